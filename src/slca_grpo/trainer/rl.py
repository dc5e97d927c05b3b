"""One RL step, read top to bottom: rollouts → rewards → advantages → PPO-clip updates.

The estimator is looked up by name once, when the trainer is built, and then used as an object:
nothing here depends on which one it is beyond what it declares (the rewards it reads, its segment
layout, its own settings). Only the reward families those rewards (and ``rl.log_rewards``) need are
computed; a rollout the simulator or the judge failed on is void (left out).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from slca_grpo.algos import (
    SEG_FIRST_TURN,
    SEG_SUMMARY,
    SEG_TOOL,
    AdvantageConfig,
    Estimator,
    estimator_spec,
    learnable_runs,
    policy_loss,
    segment_roles,
    turn_count,
)
from slca_grpo.config import ConfigError, at_least, one_of
from slca_grpo.datatypes import Task, Trajectory
from slca_grpo.engine import token_logprobs
from slca_grpo.models.device import Bf16Setting, bf16_autocast, model_device, peak_memory_gb, resolve_bf16
from slca_grpo.rewards.batch import compute_rewards
from slca_grpo.rewards.config import RewardConfig
from slca_grpo.rewards.judge_base import Judge
from slca_grpo.rewards.noise import summary_noise
from slca_grpo.rollout.loop import AgentLoop
from slca_grpo.simulator.errors import simulator_fault
from slca_grpo.trainer.batch import TokenBatch, trajectory_batch
from slca_grpo.trainer.diagnostics import segment_gradient_cosine
from slca_grpo.trainer.optim import SCHEDULES, TrainingDiverged, build_optimizer, build_scheduler, clip_gradients


@dataclass
class RLConfig:
    estimator: str = "slca"
    steps: int = 50
    prompts_per_step: int = 8
    mini_batch_prompts: int = 8  # prompts per optimizer step (all their rollouts)
    micro_batch_rollouts: int = 32  # rollouts per forward/backward (gradient accumulation)
    ppo_epochs: int = 1
    lr: float = 2e-4
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    schedule: str = "constant"
    warmup_ratio: float = 0.0
    clip: float = 0.2
    dual_clip: float | None = 3.0  # > 1; null turns the dual clip off
    kl_coef: float = 0.001
    # Autocast rollouts, training forward passes and evaluations to bfloat16 (float32 weights and
    # optimizer): on SmolLM2 with AMX, 1.9x train and 1.5x generation tokens/s at an equal loss
    # (benchmarks/precision.py). Sampled log-probs are not used by the loss, which recomputes them.
    # auto: where the device has bf16 natively (CUDA, AMX / avx512_bf16), float32 elsewhere.
    bf16: Bf16Setting = "auto"
    diagnostics_every: int = 0  # steps between gradient diagnostics (0: never)
    # Rewards to compute and log beside the ones the estimator reads (e.g. [score] to chart HierR
    # for a ToolPO run); each costs its family's judge or checker calls.
    log_rewards: list[str] = field(default_factory=list)
    # Recompute activations in the backward pass instead of keeping them: less memory, one more
    # forward pass of compute. For models that do not fit otherwise.
    gradient_checkpointing: bool = False
    advantage: AdvantageConfig = field(default_factory=AdvantageConfig)

    def __post_init__(self) -> None:
        at_least(self, 0, "steps", "lr", "weight_decay", "grad_clip", "warmup_ratio", "kl_coef", "diagnostics_every")
        at_least(self, 1, "prompts_per_step", "mini_batch_prompts", "micro_batch_rollouts", "ppo_epochs")
        if not 0 < self.clip < 1:
            raise ConfigError(f"clip must be in (0, 1), got {self.clip!r}")
        if self.dual_clip is not None and not (math.isfinite(self.dual_clip) and self.dual_clip > 1):
            # What policy_loss accepts (NaN fails both comparisons).
            raise ConfigError(f"dual_clip must be a finite number > 1 (null turns it off), got {self.dual_clip!r}")
        if self.warmup_ratio >= 1:
            raise ConfigError(f"warmup_ratio must be < 1, got {self.warmup_ratio!r}")
        one_of(self, "schedule", SCHEDULES)


def segment_advantage_stats(advantages: torch.Tensor, segment_ids: torch.Tensor) -> dict[str, float]:
    """``adv/*`` metrics: per segment, statistics of each rollout's mean advantage on it (tool and
    summary, every tool turn counting as tool; with per-turn segment ids also each tool turn,
    ``adv/turn<k>_*``) and the share of rollouts that have the segment."""
    roles = segment_roles(segment_ids)
    segments = [(roles == SEG_TOOL, "tool"), (roles == SEG_SUMMARY, "summary")]
    segments += [(segment_ids == SEG_FIRST_TURN + k, f"turn{k + 1}") for k in range(turn_count(segment_ids))]
    stats = {}
    for in_segment, name in segments:
        rows = in_segment.any(dim=1)
        if rows.any():
            # One value per rollout and segment: the mean over its tokens (a constant for one segment).
            per_rollout = (advantages * in_segment).sum(1)[rows] / in_segment.sum(1)[rows]
            stats[f"adv/{name}_mean"] = float(per_rollout.mean())
            stats[f"adv/{name}_abs_mean"] = float(per_rollout.abs().mean())
            stats[f"adv/{name}_nonzero"] = float((per_rollout != 0).float().mean())
        stats[f"adv/{name}_present"] = float(rows.float().mean())
    return stats


def check_turns_match_runs(trajectories: Sequence[Trajectory]) -> None:
    """Per-turn rewards are matched to segments by position: turn k of ``trajectory.turns`` must be
    the k-th run of learnable tokens. Raise if a rollout breaks that (a formatter that injects
    learnable tokens, or a turn that sampled none)."""
    for index, trajectory in enumerate(trajectories):
        runs = len(learnable_runs(trajectory.response_mask))
        if runs != len(trajectory.turns):
            raise RuntimeError(
                f"rollout {index} ({trajectory.task_id}) has {len(trajectory.turns)} turns but {runs} runs of "
                "learnable tokens; per-turn rewards would land on the wrong turns"
            )


def rollout_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    count = max(1, len(trajectories))

    def mean(key: str) -> float:
        return sum(t.counters.get(key, 0.0) for t in trajectories) / count

    return {
        "rollout/calls": mean("calls"),
        "rollout/turns": mean("turns"),
        "rollout/generated_tokens": mean("generated_tokens"),
        "rollout/response_tokens": mean("response_tokens"),
        "rollout/tool_errors": mean("tool_errors"),
        "rollout/truncated": sum(t.truncated for t in trajectories) / count,
        "rollout/forced_answer": mean("forced_answer"),
        "rollout/repeat_calls": mean("repeat_calls"),
    }


def void_reasons(trajectories: Sequence[Trajectory], reward_failed: Sequence[bool]) -> list[str | None]:
    """Per rollout, why it is void — the simulator failed (``simulator:<kind>``) or the judge or
    checker behind a reward the estimator reads did (``judge``) — or None when it is valid. Policy
    faults (malformed calls, unknown tools, bad arguments) are the policy's and never void."""
    reasons = []
    for trajectory, failed in zip(trajectories, reward_failed, strict=True):
        fault = simulator_fault(trajectory.turns)
        reasons.append(f"simulator:{fault}" if fault else "judge" if failed else None)
    return reasons


def void_step_metrics(void: Sequence[str | None], group_size: int) -> dict[str, float]:
    """``rollout/void`` (count), its rate, and the groups left with fewer than two valid rollouts."""
    valid_per_group = [
        sum(reason is None for reason in void[start : start + group_size]) for start in range(0, len(void), group_size)
    ]
    count = sum(reason is not None for reason in void)
    return {
        "rollout/void": float(count),
        "rollout/void_rate": count / max(1, len(void)),
        "rollout/void_groups": float(sum(valid < 2 for valid in valid_per_group)),
    }


def describe_void(void: Sequence[str | None]) -> str:
    counts: dict[str, int] = {}
    for reason in void:
        if reason is not None:
            counts[reason] = counts.get(reason, 0) + 1
    return ", ".join(f"{reason} {n}" for reason, n in sorted(counts.items()))


class RLTrainer:
    def __init__(
        self,
        model: torch.nn.Module,
        ref_model: torch.nn.Module | None,
        loop: AgentLoop,
        judge: Judge,
        reward_config: RewardConfig,
        config: RLConfig,
        *,
        seed: int = 0,
        checker: Any = None,
    ):
        self.estimator: Estimator = estimator_spec(config.estimator)  # fails fast on an unknown name
        self.model = model
        self.device = model_device(model)  # the reference model and every batch go where it is
        self.bf16 = resolve_bf16(config.bf16, self.device, "rl.bf16")  # also the evaluations' precision
        if config.gradient_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.ref_model = ref_model if config.kl_coef > 0 else None
        self.loop = loop
        self.judge = judge
        self.checker = checker
        self.reward_config = reward_config
        self.config = config
        self.seed = seed
        self.optimizer = build_optimizer(model, lr=config.lr, weight_decay=config.weight_decay)
        updates_per_step = config.ppo_epochs * -(-config.prompts_per_step // config.mini_batch_prompts)
        self.scheduler = build_scheduler(
            self.optimizer,
            config.schedule,
            total_steps=config.steps * updates_per_step,
            warmup_ratio=config.warmup_ratio,
        )

    # -- state for checkpoints -------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])

    # -- the step ---------------------------------------------------------------------------
    def reward_names(self) -> tuple[str, ...]:
        """What each step computes: the estimator's rewards, ``log_rewards``, and R_sum when the
        study's summary noise (defined on R_sum) is on."""
        names = [*self.estimator.rewards, *self.config.log_rewards]
        if self.reward_config.has_summary_noise:
            names.append("summary")
        return tuple(dict.fromkeys(names))

    def step(self, tasks: Sequence[Task], step_index: int) -> tuple[dict[str, float], list[Trajectory]]:
        config = self.config
        group_size = self.loop.config.group_size
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + step_index)

        started = time.perf_counter()
        with bf16_autocast(self.device, self.bf16):
            trajectories = self.loop.run(tasks, generator=generator, session_prefix=f"s{step_index}")
        rollout_seconds = time.perf_counter() - started

        rollout_tasks = [task for task in tasks for _ in range(group_size)]
        if self.estimator.segmentation == "turn":
            check_turns_match_runs(trajectories)
        rewards = compute_rewards(
            [t.response_text for t in trajectories],
            rollout_tasks,
            self.judge,
            self.reward_config,
            names=self.reward_names(),
            checker=self.checker,
            turns=[t.turns for t in trajectories],
        )
        reward_tensors = rewards.tensors()
        noise_metrics: dict[str, float] = {}
        if self.reward_config.has_summary_noise:
            # The study's summary-reward noise: only the reward that trains is perturbed; the
            # logged reward/* metrics stay the clean ones.
            noise = summary_noise(rewards, self.reward_config, seed=self.seed, step=step_index)
            reward_tensors = noise.apply(reward_tensors)
            noise_metrics = {
                **noise.metrics(),
                "noise/train_summary": float(reward_tensors["summary"].mean()),
                "noise/train_score": float(reward_tensors["score"].mean()),
            }
        batch = trajectory_batch(trajectories, self.loop.formatter.pad_id, estimator=self.estimator).to(self.device)
        group_ids = torch.arange(len(tasks)).repeat_interleave(group_size)
        void = void_reasons(trajectories, rewards.failed_for(self.estimator.rewards))
        valid = torch.tensor([reason is None for reason in void])
        void_metrics = void_step_metrics(void, group_size)
        advantages = self.estimator.advantages(
            group_ids=group_ids,
            segment_ids=batch.segment_ids,
            rewards=reward_tensors,
            config=config.advantage,
            valid=None if bool(valid.all()) else valid,
        )

        started = time.perf_counter()
        if void_metrics["rollout/void_groups"] * 2 > len(tasks):
            # Most groups cannot be normalised: a step on what is left would follow a few prompts.
            print(
                f"warning: RL step {step_index}: {int(void_metrics['rollout/void'])} of {len(void)} rollouts void "
                f"({describe_void(void)}), {int(void_metrics['rollout/void_groups'])} of {len(tasks)} groups with "
                "fewer than two valid rollouts; the step is skipped (no update)",
                file=sys.stderr,
            )
            train_metrics = {"train/skipped": 1.0}
        else:
            if not bool(valid.all()):
                batch.loss_mask[~valid.to(batch.loss_mask.device)] = 0  # void rollouts stay out of the loss
            try:
                train_metrics = self._update(batch, advantages, len(tasks), group_size, generator)
            except TrainingDiverged as exc:
                raise TrainingDiverged(f"RL step {step_index}: {exc}") from None
            if config.diagnostics_every and step_index % config.diagnostics_every == 0:
                train_metrics.update(self._diagnostics(batch, advantages))
        train_seconds = time.perf_counter() - started

        tokens = float(batch.attention_mask.sum())
        metrics = {
            **rewards.metrics(),
            **noise_metrics,
            **segment_advantage_stats(advantages, batch.segment_ids),
            **rollout_metrics(trajectories),
            **void_metrics,
            **train_metrics,
            "time/rollout_s": rollout_seconds,
            "time/train_s": train_seconds,
            "throughput/rollout_tokens_per_s": sum(t.counters.get("generated_tokens", 0) for t in trajectories)
            / max(rollout_seconds, 1e-9),
            "throughput/train_tokens_per_s": tokens * config.ppo_epochs / max(train_seconds, 1e-9),
            "lr": self.scheduler.get_last_lr()[0],
            "memory/peak_gb": peak_memory_gb(self.device),
        }
        return metrics, trajectories

    def _logprobs(self, model: torch.nn.Module, batch: TokenBatch) -> torch.Tensor:
        temperature = self.loop.config.temperature
        with bf16_autocast(self.device, self.bf16):
            return token_logprobs(
                model,
                batch.input_ids,
                batch.attention_mask,
                temperature=temperature,
                start=batch.first_learnable,
                positions=batch.loss_mask > 0,
            )

    @torch.no_grad()
    def _frozen_logprobs(self, model: torch.nn.Module, batch: TokenBatch) -> torch.Tensor:
        """Old or reference log-probs: in eval mode, so dropout (LoRA's, or the model's own) does
        not put noise into the values every later ratio and KL term is measured against."""
        was_training = model.training
        model.eval()
        try:
            chunks = []
            for start in range(0, len(batch), self.config.micro_batch_rollouts):
                rows = range(start, min(len(batch), start + self.config.micro_batch_rollouts))
                chunks.append(self._logprobs(model, batch.select(list(rows))))
        finally:
            model.train(was_training)
        width = batch.input_ids.shape[1]
        return torch.cat([torch.nn.functional.pad(c, (0, width - c.shape[1])) for c in chunks])

    def needs_no_old_logprobs(self, prompts: int) -> bool:
        """With one pass over one mini-batch the policy is still the sampling policy: the old
        log-probs are the current ones (detached), no extra forward pass."""
        return self.config.ppo_epochs == 1 and -(-prompts // self.config.mini_batch_prompts) == 1

    def has_reference_pass(self) -> bool:
        """Whether a step runs a frozen reference forward pass for the KL term."""
        return self.ref_model is not None or (self.config.kl_coef > 0 and hasattr(self.model, "disable_adapter"))

    def _reference_logprobs(self, batch: TokenBatch) -> torch.Tensor | None:
        """The frozen reference's log-probs for the KL term: the reference model's, or, for a LoRA
        policy without one, the policy's with its adapters switched off."""
        if self.ref_model is not None:
            return self._frozen_logprobs(self.ref_model, batch)
        if self.config.kl_coef > 0 and hasattr(self.model, "disable_adapter"):
            with self.model.disable_adapter():
                return self._frozen_logprobs(self.model, batch)
        return None

    def _update(
        self, batch: TokenBatch, advantages: torch.Tensor, prompts: int, group_size: int, generator
    ) -> dict[str, float]:
        config = self.config
        minibatches = -(-prompts // config.mini_batch_prompts)
        # With one pass over one mini-batch the policy is still the sampling policy, so the old
        # log-probs equal the current ones (detached) and need no extra forward pass.
        old_logp = None if self.needs_no_old_logprobs(prompts) else self._frozen_logprobs(self.model, batch)
        ref_logp = self._reference_logprobs(batch)

        self.model.train()
        totals: dict[str, float] = {}
        token_total = 0.0
        segment_tokens = {"tool": 0.0, "summary": 0.0}
        segment_advantage = {"tool": 0.0, "summary": 0.0}
        grad_norms = []
        for _ in range(config.ppo_epochs):
            prompt_order = torch.randperm(prompts, generator=generator)
            for m in range(minibatches):
                chosen = prompt_order[m * config.mini_batch_prompts : (m + 1) * config.mini_batch_prompts]
                rows = (chosen[:, None] * group_size + torch.arange(group_size)).flatten()
                token_count = float(batch.loss_mask[rows].sum())
                if token_count == 0:
                    continue  # every rollout here is void (or learned nothing): no step on zero gradients
                self.optimizer.zero_grad(set_to_none=True)
                for start in range(0, len(rows), config.micro_batch_rollouts):
                    micro = rows[start : start + config.micro_batch_rollouts]
                    sub = batch.select(micro)
                    logp = self._logprobs(self.model, sub)
                    old = logp.detach() if old_logp is None else old_logp[micro]
                    loss, metrics = policy_loss(
                        logp,
                        old,
                        None if ref_logp is None else ref_logp[micro],
                        advantages[micro],
                        sub.loss_mask,
                        clip=config.clip,
                        dual_clip=config.dual_clip,
                        kl_coef=config.kl_coef,
                        segment_ids=sub.segment_ids,
                        token_count=max(token_count, 1.0),
                    )
                    loss.backward()
                    weight = float(sub.loss_mask.sum())
                    token_total += weight
                    for key in ("pg_loss", "kl", "clip_frac", "dual_clip_frac", "approx_kl", "ratio_mean"):
                        if key in metrics:
                            totals[key] = totals.get(key, 0.0) + metrics[key] * weight
                    for segment in segment_tokens:
                        count = metrics[f"tokens/{segment}"]
                        segment_tokens[segment] += count
                        segment_advantage[segment] += metrics[f"adv_mean/{segment}"] * count
                grad_norms.append(clip_gradients(self.model, config.grad_clip))
                self.optimizer.step()
                self.scheduler.step()
        out = {f"train/{k}": v / max(token_total, 1.0) for k, v in totals.items()}
        out["train/grad_norm"] = sum(grad_norms) / len(grad_norms) if grad_norms else 0.0
        out["train/learnable_tokens"] = token_total / config.ppo_epochs
        for segment, count in segment_tokens.items():
            # Token-weighted, unlike adv/* (one value per rollout): what the loss actually saw.
            out[f"train/adv_token_mean/{segment}"] = segment_advantage[segment] / max(count, 1.0)
            out[f"train/{segment}_tokens"] = count / config.ppo_epochs
        return out

    def _diagnostics(self, batch: TokenBatch, advantages: torch.Tensor) -> dict[str, float]:
        rows = list(range(min(len(batch), self.config.micro_batch_rollouts)))
        sub = batch.select(rows)
        return segment_gradient_cosine(
            self.model,
            lambda: self._logprobs(self.model, sub),
            advantages[rows],
            sub,
            clip=self.config.clip,
            dual_clip=self.config.dual_clip,
        )
