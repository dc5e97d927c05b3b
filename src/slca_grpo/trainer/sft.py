"""Supervised fine-tuning on gold trajectories, with the loss on assistant tokens only.

Examples are built token by token with the same formatter as rollouts: assistant text (calls and
the final answer) has mask 1, the prompt and injected tool responses mask 0. So what SFT teaches
is exactly what the agent loop later samples.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from slca_grpo.chat.formatter import ChatFormatter
from slca_grpo.config import ConfigError, at_least, one_of
from slca_grpo.datatypes import Task, ToolCall
from slca_grpo.engine import token_logprobs
from slca_grpo.models.device import Bf16Setting, bf16_autocast, model_device, resolve_bf16
from slca_grpo.rollout.environment import find_fixture
from slca_grpo.trainer.batch import pad_sequences
from slca_grpo.trainer.optim import SCHEDULES, TrainingDiverged, build_optimizer, build_scheduler, clip_gradients


@dataclass
class SFTConfig:
    steps: int = 200
    batch_size: int = 16
    lr: float = 1e-3
    weight_decay: float = 0.0
    warmup_ratio: float = 0.1
    schedule: str = "cosine"
    grad_clip: float = 1.0
    max_length: int = 1024  # longer examples are skipped (and counted)
    # Batches are drawn from windows of this many batches sorted by length, so a batch pads
    # little (about 1.7x faster on the synthetic suite); 1 gives plain shuffled batches.
    bucket_batches: int = 16
    # Autocast forward/backward to bfloat16 (weights and optimizer stay float32): 1.9x tokens/s on
    # SmolLM2 with AMX at an equal loss; casting the weights to bf16 instead loses small updates.
    # auto: where the device has bf16 natively (CUDA, AMX / avx512_bf16), float32 elsewhere.
    bf16: Bf16Setting = "auto"
    # Examples per forward/backward pass within a batch (0: the whole batch at once). The step is
    # the same (gradients add up to the batch's token mean); activation memory scales with this.
    micro_batch_size: int = 0
    # Share of the gold trajectories (those with calls) whose answer follows the rollout's
    # final-answer notice (rollout.final_answer_notice, after the last tool results), so the model
    # has seen what to do when the agent loop ends its calls. Drawn per task, stably.
    notice_share: float = 0.0

    def __post_init__(self) -> None:
        # Checked when the config is loaded, not after the gold trajectories have been built.
        at_least(self, 0, "steps", "lr", "weight_decay", "warmup_ratio", "grad_clip", "micro_batch_size")
        at_least(self, 1, "batch_size", "bucket_batches", "max_length")
        if not 0 <= self.notice_share <= 1:
            raise ConfigError(f"notice_share must be in [0, 1], got {self.notice_share!r}")
        if self.warmup_ratio >= 1:
            raise ConfigError(f"warmup_ratio must be < 1, got {self.warmup_ratio!r}")
        one_of(self, "schedule", SCHEDULES)


@dataclass
class SFTExample:
    task_id: str
    input_ids: list[int]
    loss_mask: list[int]


def build_example(
    task: Task,
    formatter: ChatFormatter,
    observe: Callable[[ToolCall, Task], str] | None = None,
    *,
    notice: str | None = None,
) -> SFTExample | None:
    """Token ids and mask of a task's gold trajectory, or None when it has no reference answer.

    Observations come from the task's fixtures; ``observe`` supplies the rest (e.g. a simulator).
    A dataset's text said alongside a step's calls (``metadata["step_texts"]``) is learned with them.
    ``notice`` (the agent loop's request for a final answer) follows the last tool results, as the
    loop injects it, before the answer.
    """
    if task.reference_answer is None:
        return None
    dialogue = formatter.dialogue(task)
    ids = list(dialogue.prompt_ids)
    mask = [0] * len(ids)
    texts = task.metadata.get("step_texts") or []
    turns = [
        (index, turn, calls)
        for index, step in enumerate(task.gold_calls)
        for turn, calls in enumerate(formatter.call_turns(step))
    ]
    for position, (index, turn, calls) in enumerate(turns):
        # What the dataset's assistant said alongside a step's calls, once, on its first turn.
        said = texts[index] if turn == 0 and index < len(texts) and isinstance(texts[index], str) else ""
        call_ids = formatter.call_ids(dialogue, calls, said)
        ids += call_ids
        mask += [1] * len(call_ids)
        observations = []
        for call in calls:
            response = find_fixture(task, call)
            if response is None:
                if observe is None:
                    return None
                response = observe(call, task)
            observations.append(response)
        last = position == len(turns) - 1
        injected, _ = formatter.turn_results(dialogue, calls, observations, notice=notice if last else None)
        ids += injected
        mask += [0] * len(injected)
    answer = formatter.answer_ids(dialogue, task.reference_answer)
    ids += answer
    mask += [1] * len(answer)
    return SFTExample(task.id, ids, mask)


def gets_notice(task: Task, share: float, seed: int) -> bool:
    """Whether ``task``'s gold trajectory is one of the ``share`` that learn the final-answer notice:
    a draw fixed by the seed and the task's id (the same in every process), never for a task
    without calls (the notice follows tool results)."""
    if share <= 0 or not task.gold_calls:
        return False
    digest = hashlib.sha256(f"{seed}:{task.id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def _sft_nll(model: torch.nn.Module, examples: Sequence[SFTExample], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed negative log-likelihood over the examples' assistant tokens, and their count."""
    batch = pad_sequences([e.input_ids for e in examples], [e.loss_mask for e in examples], pad_id)
    batch = batch.to(model_device(model))
    logprobs = token_logprobs(
        model, batch.input_ids, batch.attention_mask, start=batch.first_learnable, positions=batch.loss_mask > 0
    )
    return -(logprobs * batch.loss_mask).sum(), batch.loss_mask.sum()


def sft_loss(model: torch.nn.Module, examples: Sequence[SFTExample], pad_id: int) -> torch.Tensor:
    """Token-mean negative log-likelihood over the examples' assistant tokens."""
    total, count = _sft_nll(model, examples, pad_id)
    return total / count.clamp(min=1.0)


def sft_backward(
    model: torch.nn.Module,
    examples: Sequence[SFTExample],
    pad_id: int,
    *,
    micro_batch_size: int = 0,
    bf16: bool = False,
) -> float:
    """Backpropagate :func:`sft_loss` of ``examples`` in passes of ``micro_batch_size`` examples
    (0: one pass) and return the loss. Each pass's token sum is divided by the whole batch's token
    count, so the accumulated gradients are the one-pass gradients. Raises
    :class:`TrainingDiverged` on a non-finite loss."""
    size = micro_batch_size or len(examples)
    tokens = max(1.0, float(sum(sum(e.loss_mask) for e in examples)))
    device = model_device(model)
    value = 0.0
    for first in range(0, len(examples), size):
        with bf16_autocast(device, bf16):
            total, _ = _sft_nll(model, examples[first : first + size], pad_id)
        loss = total / tokens
        part = float(loss.detach())
        if not math.isfinite(part):
            raise TrainingDiverged(f"the loss is {part}; no optimizer step was taken")
        loss.backward()
        value += part
    return value


def length_bucketed_batches(
    lengths: Sequence[int], batch_size: int, bucket_batches: int, rng: random.Random
) -> list[list[int]]:
    """One epoch of index batches: shuffle, sort windows of ``batch_size * bucket_batches`` by
    length, cut them into batches, shuffle the batches. Every index appears exactly once."""
    if batch_size < 1 or bucket_batches < 1:
        raise ValueError(f"batch_size and bucket_batches must be >= 1, got {batch_size} and {bucket_batches}")
    order = list(range(len(lengths)))
    rng.shuffle(order)
    window = batch_size * bucket_batches
    batches = []
    for first in range(0, len(order), window):
        chunk = sorted(order[first : first + window], key=lengths.__getitem__)
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches


def train_sft(
    model: torch.nn.Module,
    examples: Sequence[SFTExample],
    config: SFTConfig,
    *,
    pad_id: int,
    seed: int = 0,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
) -> list[float]:
    """Run ``config.steps`` optimizer steps over shuffled examples; returns the loss per step."""
    usable = [e for e in examples if len(e.input_ids) <= config.max_length]
    if not usable:
        raise ValueError(f"no SFT example fits max_length={config.max_length}")
    optimizer = build_optimizer(model, lr=config.lr, weight_decay=config.weight_decay)
    scheduler = build_scheduler(optimizer, config.schedule, total_steps=config.steps, warmup_ratio=config.warmup_ratio)
    rng = random.Random(seed)
    lengths = [len(e.input_ids) for e in usable]
    planned: list[list[int]] = []
    losses: list[float] = []
    model.train()
    bf16 = resolve_bf16(config.bf16, model_device(model), "sft.bf16")
    for step in range(config.steps):
        if not planned:
            planned = length_bucketed_batches(lengths, config.batch_size, config.bucket_batches, rng)
        chosen = planned.pop()
        optimizer.zero_grad(set_to_none=True)
        try:
            value = sft_backward(
                model, [usable[i] for i in chosen], pad_id, micro_batch_size=config.micro_batch_size, bf16=bf16
            )
            grad_norm = clip_gradients(model, config.grad_clip)
        except TrainingDiverged as exc:
            raise TrainingDiverged(f"SFT step {step}: {exc}") from None
        optimizer.step()
        scheduler.step()
        losses.append(value)
        if on_step is not None:
            on_step(step, {"sft/loss": value, "sft/grad_norm": float(grad_norm), "sft/lr": scheduler.get_last_lr()[0]})
    return losses
