"""Summary-reward noise for the credit-assignment study, independent of the tool calls.

The paper's claim is that GRPO lets summary-reward noise leak into tool tokens (one scalar
advantage for the whole rollout) while SLCA confines it to summary tokens. To test it, the RL
training reward's R_sum is perturbed in every rollout by noise whose draws depend only on (run
seed, step, rollout slot) — never on the rollout's text or calls, nor on the global RNGs — so:

- the two estimators of a paired seed see the same draws for the same rollout slots;
- a resumed run draws exactly what the uninterrupted one did;
- the perturbation of a rollout depends on it only through its clean R_sum: whether it called a
  tool, which one, and whether the omission gate fired make no difference.

Every rollout is perturbed, gated ones included (their R_sum is 0). Applying it only where the
judge was asked would make the noise's mean a reward for getting a tool response — a signal
about the calls, not noise. The noisy R_sum stays on the judge's scale [0, 1], so a rollout's
score stays >= 0 unless the gate fired, and SLCA's penalty rule (``score < 0``) never fires
because of the noise. The perturbation reaches GRPO through ``score`` (= R_tool + R_sum, or the
gate's penalty) and SLCA through its summary channel, by the same amount. Held-out evaluation
never sees it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from slca_grpo.rewards.config import RewardConfig

if TYPE_CHECKING:
    import torch

    from slca_grpo.rewards.batch import RewardBatch

# Mixed into every seed so these draws never coincide with another stream seeded by (seed, step).
NOISE_STREAM = 0x5C0DE


@dataclass(frozen=True)
class NoiseDraws:
    """Per rollout slot: a standard normal, a uniform deciding replacement, a uniform rating."""

    gaussian: np.ndarray
    uniform: np.ndarray
    rating: np.ndarray


def noise_draws(seed: int, step: int, count: int) -> NoiseDraws:
    """The draws of rollout slots ``0..count-1`` of a step; slot i's draws are a pure function of
    (seed, step, i), whatever ``count`` is and whatever the noise settings are."""
    values = np.empty((count, 3))
    for index in range(count):
        generator = np.random.default_rng([NOISE_STREAM, seed % 2**64, step % 2**64, index])
        values[index] = (generator.standard_normal(), generator.random(), generator.integers(1, 6))
    return NoiseDraws(values[:, 0], values[:, 1], values[:, 2].astype(int))


def noisy_summary_rewards(clean: np.ndarray, draws: NoiseDraws, config: RewardConfig) -> tuple[np.ndarray, np.ndarray]:
    """(noisy R_sum, replaced mask): a random rating with probability p, plus σ·z, clamped to [0, 1]."""
    replaced = draws.uniform < config.summary_noise_prob
    base = np.where(replaced, (draws.rating - 1) / 4, clean)
    return np.clip(base + config.summary_noise_std * draws.gaussian, 0.0, 1.0), replaced


@dataclass(frozen=True)
class SummaryNoise:
    """The realised noise of one step: ``shift`` (noisy − clean R_sum) is added to R_sum and score."""

    shift: np.ndarray  # per rollout
    replaced: np.ndarray  # bool: its summary reward was replaced by a random rating's

    def apply(self, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The reward tensors with the noisy R_sum in ``summary`` and ``score`` (others unchanged)."""
        import torch

        out = dict(tensors)
        for name in ("summary", "score"):
            if name in out:
                out[name] = out[name] + torch.as_tensor(self.shift, dtype=out[name].dtype, device=out[name].device)
        return out

    def metrics(self, prefix: str = "noise/") -> dict[str, float]:
        """Share of rollouts replaced, and the realised shift's mean, std and mean absolute value."""
        if not self.shift.size:
            return {}
        out = {
            "replaced_rate": float(self.replaced.mean()),
            "mean": float(self.shift.mean()),
            "std": float(self.shift.std()),
            "abs_mean": float(np.abs(self.shift).mean()),
        }
        return {prefix + k: v for k, v in out.items()}


def summary_noise(rewards: RewardBatch, config: RewardConfig, *, seed: int, step: int) -> SummaryNoise:
    """The noise of a step's HierR rewards (zero shift when the config asks for none); the batch
    must hold ``summary`` (R_sum)."""
    count = len(rewards)
    if not config.has_summary_noise or count == 0:
        return SummaryNoise(np.zeros(count), np.zeros(count, dtype=bool))
    clean = np.array([record.value("summary") for record in rewards.records], dtype=float)
    noisy, replaced = noisy_summary_rewards(clean, noise_draws(seed, step, count), config)
    return SummaryNoise(noisy - clean, replaced)
