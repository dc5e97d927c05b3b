"""The clipped policy loss (docs/method.md §6): hand values per clip region, KL, masking, accumulation."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from slca_grpo.algos import k3_kl, policy_loss

# exp() of the log-ratios used below, written out.
E_0_5, E_M0_5, E_1_5, E_0_1 = 1.6487212707001282, 0.6065306597126334, 4.4816890703380645, 1.1051709180756477

# One token per case: (advantage, logp - old_logp, per-token loss, d loss / d logp, region).
REGIONS = [
    (1.0, 0.5, -1.2, 0.0, "A>0, ratio above 1+eps: clipped to -A*1.2"),
    (1.0, -0.5, -E_M0_5, -E_M0_5, "A>0, ratio below 1-eps: unclipped (pessimistic)"),
    (-1.0, 0.5, E_0_5, E_0_5, "A<0, ratio above 1+eps but under c: unclipped"),
    (-1.0, 1.5, 3.0, 0.0, "A<0, ratio beyond c=3: dual clip -A*c"),
    (-1.0, -0.5, 0.8, 0.0, "A<0, ratio below 1-eps: clipped to -A*0.8"),
    (2.0, 0.1, -2 * E_0_1, -2 * E_0_1, "inside the trust region"),
]


def region_inputs(requires_grad: bool = True) -> tuple[torch.Tensor, ...]:
    advantages = torch.tensor([[case[0] for case in REGIONS]], dtype=torch.float64)
    log_ratio = torch.tensor([[case[1] for case in REGIONS]], dtype=torch.float64)
    old_logp = torch.full_like(log_ratio, -2.0)
    logp = (old_logp + log_ratio).requires_grad_(requires_grad)
    mask = torch.ones_like(logp, dtype=torch.bool)
    return logp, old_logp, advantages, mask


def test_clip_and_dual_clip_regions_match_hand_values() -> None:
    logp, old_logp, advantages, mask = region_inputs()
    loss, metrics = policy_loss(logp, old_logp, None, advantages, mask)
    n = len(REGIONS)
    assert float(loss) == pytest.approx(sum(case[2] for case in REGIONS) / n, rel=1e-12)
    loss.backward()
    expected_grad = [case[3] / n for case in REGIONS]
    assert logp.grad is not None
    assert logp.grad[0].tolist() == pytest.approx(expected_grad, rel=1e-12, abs=1e-15)
    assert metrics["clip_frac"] == pytest.approx(2 / 6)  # regions 1 and 5
    assert metrics["dual_clip_frac"] == pytest.approx(1 / 6)  # region 4
    assert metrics["pg_loss"] == pytest.approx(float(loss))
    assert metrics["approx_kl"] == pytest.approx(-(0.5 - 0.5 + 0.5 + 1.5 - 0.5 + 0.1) / 6)
    ratios = [E_0_5, E_M0_5, E_0_5, E_1_5, E_M0_5, E_0_1]
    assert metrics["ratio_mean"] == pytest.approx(sum(ratios) / 6)
    assert metrics["tokens"] == 6.0 and metrics["kl"] == 0.0
    assert all(isinstance(value, float) for value in metrics.values())


def reference_token_loss(advantage: float, log_ratio: float, clip: float, dual: float) -> float:
    """Scalar restatement of docs/method.md §6 / the verl convention for one token."""
    ratio = math.exp(min(max(log_ratio, -20.0), 20.0))
    loss = max(-advantage * ratio, -advantage * min(max(ratio, 1 - clip), 1 + clip))
    if advantage < 0:
        loss = min(loss, -advantage * dual)
    return loss


@settings(max_examples=200, deadline=None)
@given(
    st.floats(-5, 5),
    st.floats(-25, 25),
    st.floats(0.01, 0.9),
    st.floats(1.01, 10),
)
def test_per_token_loss_matches_scalar_reference(advantage: float, log_ratio: float, clip: float, dual: float) -> None:
    logp = torch.tensor([[log_ratio]], dtype=torch.float64)
    loss, _ = policy_loss(
        logp,
        torch.zeros_like(logp),
        None,
        torch.tensor([[advantage]], dtype=torch.float64),
        torch.ones(1, 1),
        clip=clip,
        dual_clip=dual,
    )
    expected = reference_token_loss(advantage, log_ratio, clip, dual)
    assert float(loss) == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_on_policy_default_for_old_logp() -> None:
    logp = torch.tensor([[-1.0, -0.5]], requires_grad=True)
    loss, metrics = policy_loss(logp, None, None, torch.tensor([[1.0, -2.0]]), torch.ones(1, 2))
    # ratio 1 everywhere: loss = mean(-A) = (-1 + 2) / 2, gradient -A / 2.
    assert float(loss) == pytest.approx(0.5) and metrics["ratio_mean"] == 1.0
    loss.backward()
    assert logp.grad is not None and logp.grad.tolist() == [[-0.5, 1.0]]


def test_dual_clip_can_be_turned_off_and_changed() -> None:
    logp, old_logp, advantages, mask = region_inputs(requires_grad=False)
    loss_off, metrics_off = policy_loss(logp, old_logp, None, advantages, mask, dual_clip=None)
    loss_c4, _ = policy_loss(logp, old_logp, None, advantages, mask, dual_clip=4.0)
    with_dual = [case[2] for case in REGIONS]
    without = with_dual.copy()
    without[3] = E_1_5  # region 4 is no longer capped at 3 (nor at 4: 4.48 > 4 -> 4)
    assert float(loss_off) == pytest.approx(sum(without) / 6)
    capped_at_4 = with_dual.copy()
    capped_at_4[3] = 4.0
    assert float(loss_c4) == pytest.approx(sum(capped_at_4) / 6)
    assert metrics_off["dual_clip_frac"] == 0.0


def test_clip_epsilon_changes_the_clip_points() -> None:
    # A = 1, ratio e^0.5 = 1.6487: with eps 0.3 the clipped value is -1.3.
    logp = torch.tensor([[0.5]])
    loss, _ = policy_loss(logp, torch.zeros(1, 1), None, torch.ones(1, 1), torch.ones(1, 1), clip=0.3)
    assert float(loss) == pytest.approx(-1.3)


def test_kl_is_k3_and_zero_when_reference_equals_policy() -> None:
    logp = torch.tensor([[-1.0, -2.0, -0.5]], dtype=torch.float64, requires_grad=True)
    zeros = torch.zeros(1, 3, dtype=torch.float64)
    mask = torch.ones(1, 3)
    loss, metrics = policy_loss(logp, logp.detach(), logp.detach(), zeros, mask, kl_coef=0.5)
    assert float(loss) == 0.0 and metrics["kl"] == 0.0
    # ref - logp = 0.3 on every token: k3 = e^0.3 - 0.3 - 1 = 0.04985880757600314
    ref = logp.detach() + 0.3
    loss, metrics = policy_loss(logp, logp.detach(), ref, zeros, mask, kl_coef=0.5)
    assert metrics["kl"] == pytest.approx(0.04985880757600314, rel=1e-12)
    assert float(loss) == pytest.approx(0.5 * 0.04985880757600314, rel=1e-12)
    loss.backward()
    # d k3 / d logp = 1 - e^(ref - logp) = 1 - 1.3498588075760032, times 0.5 / 3 tokens.
    assert logp.grad is not None
    assert logp.grad.tolist()[0] == pytest.approx([0.5 * (1 - 1.3498588075760032) / 3] * 3)


def test_kl_skipped_without_reference_or_coefficient() -> None:
    logp, old_logp, advantages, mask = region_inputs(requires_grad=False)
    ref = old_logp + 1.0
    base, _ = policy_loss(logp, old_logp, None, advantages, mask)
    no_coef, metrics = policy_loss(logp, old_logp, ref, advantages, mask, kl_coef=0.0)
    assert float(no_coef) == float(base) and metrics["kl"] == 0.0
    with_kl, metrics = policy_loss(logp, old_logp, ref, advantages, mask, kl_coef=0.001)
    assert metrics["kl"] > 0
    assert float(with_kl) == pytest.approx(float(base) + 0.001 * metrics["kl"])


def test_kl_and_ratio_clamps() -> None:
    logp = torch.zeros(1, 2)
    assert k3_kl(logp, torch.tensor([[30.0, -30.0]])).tolist() == [[10.0, 10.0]]
    # log ratio 50 is capped at 20 before exp: -A * e^20 with A = -1 and no dual clip.
    loss, metrics = policy_loss(
        torch.tensor([[50.0]]),
        torch.zeros(1, 1),
        None,
        -torch.ones(1, 1),
        torch.ones(1, 1),
        dual_clip=None,
    )
    assert float(loss) == pytest.approx(math.exp(20), rel=1e-6)
    assert metrics["ratio_mean"] == pytest.approx(math.exp(20), rel=1e-6)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_gradient_is_exactly_zero_on_masked_tokens(data: st.DataObject) -> None:
    rows, cols = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 8))
    size = rows * cols
    floats = st.floats(-5, 5)

    def draw(values: st.SearchStrategy) -> torch.Tensor:
        return torch.tensor(data.draw(st.lists(values, min_size=size, max_size=size))).reshape(rows, cols)

    mask = draw(st.booleans())
    garbage = torch.tensor(float("nan"))
    # Padding positions hold garbage (NaN, -inf) that must never reach the loss or the gradient.
    logp = torch.where(mask, draw(floats), -torch.inf).requires_grad_(True)
    old_logp = torch.where(mask, draw(floats), garbage)
    ref_logp = torch.where(mask, draw(floats), torch.inf)
    advantages = torch.where(mask, draw(floats), garbage)
    loss, metrics = policy_loss(logp, old_logp, ref_logp, advantages, mask, kl_coef=0.1)
    loss.backward()
    assert logp.grad is not None
    assert bool(torch.isfinite(loss))
    assert torch.all(logp.grad[~mask] == 0)
    assert bool(torch.isfinite(logp.grad).all())
    assert all(math.isfinite(value) for value in metrics.values())


def test_empty_mask_gives_zero_loss_with_gradient_path() -> None:
    logp = torch.randn(2, 3, requires_grad=True)
    loss, metrics = policy_loss(logp, torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 3), torch.zeros(2, 3))
    assert float(loss) == 0.0 and loss.requires_grad
    loss.backward()
    assert logp.grad is not None and torch.all(logp.grad == 0)
    assert metrics["tokens"] == 0.0
    assert all(math.isfinite(value) for value in metrics.values())


def test_token_count_makes_micro_batches_add_up_to_the_mini_batch() -> None:
    generator = torch.Generator().manual_seed(0)
    logp = torch.randn(4, 7, generator=generator, dtype=torch.float64)
    old_logp = logp + 0.3 * torch.randn(4, 7, generator=generator, dtype=torch.float64)
    ref_logp = logp + 0.3 * torch.randn(4, 7, generator=generator, dtype=torch.float64)
    advantages = torch.randn(4, 7, generator=generator, dtype=torch.float64)
    mask = torch.rand(4, 7, generator=generator) < 0.6
    mask[0] = False  # uneven token counts across the micro-batches
    full_logp = logp.clone().requires_grad_(True)
    full, _ = policy_loss(full_logp, old_logp, ref_logp, advantages, mask)
    full.backward()

    parts_logp = logp.clone().requires_grad_(True)
    total = int(mask.sum())
    accumulated = torch.zeros((), dtype=torch.float64)
    for rows in (slice(0, 2), slice(2, 4)):
        part, _ = policy_loss(
            parts_logp[rows],
            old_logp[rows],
            ref_logp[rows],
            advantages[rows],
            mask[rows],
            token_count=total,
        )
        part.backward()
        accumulated = accumulated + part.detach()
    assert float(accumulated) == pytest.approx(float(full), rel=1e-12)
    assert full_logp.grad is not None and parts_logp.grad is not None
    assert torch.allclose(parts_logp.grad, full_logp.grad, rtol=1e-12, atol=0)


def test_rollout_advantages_broadcast_and_segment_metrics() -> None:
    logp = torch.zeros(2, 4)
    segments = torch.tensor([[1, 0, 2, 2], [2, 2, 0, 0]])
    mask = segments != 0
    per_token = torch.tensor([[3.0, 9.0, -1.0, -1.0], [0.5, 0.5, 9.0, 9.0]])
    per_rollout = torch.tensor([2.0, -1.0])
    a, _ = policy_loss(logp, logp, None, per_rollout, mask)
    b, _ = policy_loss(logp, logp, None, per_rollout[:, None].expand(2, 4), mask)
    assert float(a) == float(b) == pytest.approx(-(2 * 3 - 1 * 2) / 5)
    _, metrics = policy_loss(logp, logp, None, per_token, mask, segment_ids=segments)
    assert metrics["tokens/tool"] == 1.0 and metrics["adv_mean/tool"] == 3.0
    # summary tokens: -1, -1, 0.5, 0.5 (the 9s are masked)
    assert metrics["tokens/summary"] == 4.0 and metrics["adv_mean/summary"] == pytest.approx(-0.25)


def test_low_precision_inputs_compute_in_float32() -> None:
    logp = torch.randn(2, 3).to(torch.bfloat16).requires_grad_(True)
    loss, _ = policy_loss(logp, logp.detach(), logp.detach(), torch.ones(2, 3), torch.ones(2, 3))
    assert loss.dtype == torch.float32 and float(loss) == pytest.approx(-1.0)
    loss.backward()
    assert logp.grad is not None and logp.grad.dtype == torch.bfloat16


def test_bad_arguments_raise_clearly() -> None:
    x = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="clip must be > 0"):
        policy_loss(x, x, None, x, x, clip=0.0)
    with pytest.raises(ValueError, match="dual_clip must be > 1"):
        policy_loss(x, x, None, x, x, dual_clip=1.0)
    with pytest.raises(ValueError, match="kl_coef must be >= 0"):
        policy_loss(x, x, None, x, x, kl_coef=-0.1)
    with pytest.raises(ValueError, match="token_count must be a positive number"):
        policy_loss(x, x, None, x, x, token_count=0)
    with pytest.raises(ValueError, match="old_logp has shape"):
        policy_loss(x, torch.zeros(1, 3), None, x, x)
    with pytest.raises(ValueError, match="advantages must be"):
        policy_loss(x, x, None, torch.zeros(3), x)
    with pytest.raises(ValueError, match="segment_ids has shape"):
        policy_loss(x, x, None, x, x, segment_ids=torch.zeros(1, 3, dtype=torch.long))
