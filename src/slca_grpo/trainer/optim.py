"""AdamW and learning-rate schedules (constant, linear, cosine; all with linear warm-up)."""

from __future__ import annotations

import math

import torch

SCHEDULES = ("constant", "linear", "cosine")


def build_optimizer(model: torch.nn.Module, *, lr: float, weight_decay: float = 0.0) -> torch.optim.AdamW:
    # No decay on biases and norms, as usual for transformers.
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        if parameter.requires_grad:
            (no_decay if parameter.ndim < 2 or "norm" in name else decay).append(parameter)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=lr, betas=(0.9, 0.999), eps=1e-8)


def lr_factor(step: int, kind: str, total_steps: int, warmup_steps: int) -> float:
    """Multiplier of the base learning rate at optimizer step ``step`` (0-based)."""
    if kind not in SCHEDULES:
        raise ValueError(f"unknown schedule {kind!r}; choose one of {', '.join(SCHEDULES)}")
    if warmup_steps > 0 and step < warmup_steps:
        return (step + 1) / warmup_steps
    if kind == "constant":
        return 1.0
    span = max(1, total_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / span)
    if kind == "linear":
        return max(0.0, 1.0 - progress)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def build_scheduler(
    optimizer: torch.optim.Optimizer, kind: str, *, total_steps: int, warmup_ratio: float = 0.0
) -> torch.optim.lr_scheduler.LambdaLR:
    warmup_steps = int(round(warmup_ratio * total_steps))
    lr_factor(0, kind, total_steps, warmup_steps)  # validates the kind before training starts
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(step, kind, total_steps, warmup_steps))


class TrainingDiverged(FloatingPointError):
    """A loss or gradient became NaN/inf; the optimizer step that would spread it was not taken."""


def clip_gradients(model: torch.nn.Module, max_norm: float) -> float:
    """Clip the gradient norm to ``max_norm`` and return the norm before clipping;
    ``TrainingDiverged`` (no parameter touched) when it is not finite."""
    norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))
    if not math.isfinite(norm):
        raise TrainingDiverged(f"the gradient norm is {norm}; no optimizer step was taken")
    return norm
