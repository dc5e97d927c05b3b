"""Gradient diagnostics from the paper: how the tool-segment and summary-segment losses pull.

The cosine between the two segments' policy gradients shows cross-segment interference; the
spread of the gradient norm over steps is the stability measure the paper reports.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from slca_grpo.algos import SEG_SUMMARY, SEG_TOOL, policy_loss, segment_roles


def segment_gradient_cosine(
    model: torch.nn.Module,
    logprobs_fn: Callable[[], torch.Tensor],
    advantages: torch.Tensor,
    batch,
    *,
    clip: float = 0.2,
    dual_clip: float | None = 3.0,
) -> dict[str, float]:
    """Cosine and norms of the policy-gradient of the tool-token and summary-token losses.

    Both losses are normalised by all learnable tokens, so they add up to the step's loss (KL
    excluded). Returns nothing when either segment is absent from the batch.
    """
    roles = segment_roles(batch.segment_ids)  # every tool turn counts as tool
    masks = {name: batch.loss_mask * (roles == code) for name, code in (("tool", SEG_TOOL), ("summary", SEG_SUMMARY))}
    if any(float(m.sum()) == 0 for m in masks.values()):
        return {}
    parameters = [p for p in model.parameters() if p.requires_grad]
    logp = logprobs_fn()
    total = float(batch.loss_mask.sum())
    flat = {}
    for index, (name, mask) in enumerate(masks.items()):
        loss, _ = policy_loss(
            logp, logp.detach(), None, advantages, mask, clip=clip, dual_clip=dual_clip, kl_coef=0.0, token_count=total
        )
        grads = torch.autograd.grad(loss, parameters, retain_graph=index == 0, allow_unused=True)
        flat[name] = torch.cat(
            [(g if g is not None else torch.zeros_like(p)).flatten() for g, p in zip(grads, parameters)]
        )
    tool, summary = flat["tool"], flat["summary"]
    norms = float(tool.norm()), float(summary.norm())
    cosine = float(torch.dot(tool, summary) / (norms[0] * norms[1])) if min(norms) > 0 else 0.0
    return {
        "diag/grad_cosine_tool_summary": cosine,
        "diag/grad_norm_tool": norms[0],
        "diag/grad_norm_summary": norms[1],
    }


def std(values: Sequence[float]) -> float:
    """Unbiased standard deviation (0 for fewer than two values)."""
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
