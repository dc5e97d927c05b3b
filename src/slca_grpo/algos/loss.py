"""The clipped policy-gradient loss shared by every estimator (docs/method.md §6)."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from slca_grpo.algos.segments import SEG_SUMMARY, SEG_TOOL, SEGMENT_NAMES, segment_roles

__all__ = ["KL_LIMIT", "LOG_RATIO_LIMIT", "k3_kl", "policy_loss"]

LOG_RATIO_LIMIT = 20.0  # |log ratio| cap before exp, as in verl: keeps exp and its gradient finite
KL_LIMIT = 10.0  # cap of the k3 KL estimate per token


def k3_kl(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """Per-token k3 estimate of KL(pi || ref): ``exp(ref - logp) - (ref - logp) - 1``, in [-10, 10].

    The log-ratio is capped at ±20 first so ``exp`` cannot overflow (inf times a zero gradient
    would be NaN).
    """
    log_ratio = (ref_logp - logp).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
    return (torch.exp(log_ratio) - log_ratio - 1.0).clamp(-KL_LIMIT, KL_LIMIT)


def _check_number(name: str, value: float | None, *, low: float, strict: bool = True) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if (value <= low) if strict else (value < low):
        raise ValueError(f"{name} must be {'>' if strict else '>='} {low}, got {value!r}")


def _expand_advantages(advantages: Tensor, shape: torch.Size) -> Tensor:
    if advantages.dim() == 1 and len(shape) == 2 and advantages.shape[0] == shape[0]:
        return advantages.unsqueeze(1).expand(shape)  # one advantage per rollout
    if advantages.shape != shape:
        raise ValueError(f"advantages must be [B, T] {tuple(shape)} or [B], got {tuple(advantages.shape)}")
    return advantages


def _denominator(token_count: float | Tensor | None, tokens: Tensor) -> Tensor:
    if token_count is None:
        return tokens.clamp(min=1.0)  # an empty mask gives loss 0, not 0/0
    count = float(token_count.item() if isinstance(token_count, Tensor) else token_count)
    if not math.isfinite(count) or count <= 0:
        raise ValueError(f"token_count must be a positive number, got {token_count!r}")
    return torch.tensor(count, dtype=tokens.dtype, device=tokens.device)


def policy_loss(
    logp: Tensor,
    old_logp: Tensor | None,
    ref_logp: Tensor | None,
    advantages: Tensor,
    mask: Tensor,
    *,
    clip: float = 0.2,
    dual_clip: float | None = 3.0,
    kl_coef: float = 0.001,
    segment_ids: Tensor | None = None,
    token_count: float | Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """PPO-clip loss with dual clip and a k3 KL term, token-mean over the learnable tokens.

    All per-token inputs are ``[B, T]`` (``advantages`` may be ``[B]``). Per token, with
    ``r = exp(clamp(logp - old_logp, -20, 20))``:
    ``pg = max(-A·r, -A·clip(r, 1-clip, 1+clip))``, and for ``A < 0`` additionally
    ``pg = min(pg, -A·dual_clip)`` (``dual_clip=None`` turns that off). The loss is
    ``sum(mask · (pg + kl_coef · k3(logp, ref_logp))) / N`` with ``N = token_count`` when given
    (the mini-batch's learnable tokens, so micro-batch losses add up to an exact token-mean) or
    this call's learnable-token count. The KL term is skipped when ``ref_logp is None`` or
    ``kl_coef == 0``. ``old_logp=None`` means on-policy (``old_logp = logp.detach()``).

    Masked positions are zeroed before any arithmetic, so padding values (even NaN or -inf) never
    reach the loss or its gradient. Metrics are plain floats averaged over this call's learnable
    tokens (``tokens`` gives their number, for weighting across micro-batches).
    """
    _check_number("clip", clip, low=0.0)
    _check_number("dual_clip", dual_clip, low=1.0)
    _check_number("kl_coef", kl_coef, low=0.0, strict=False)
    if logp.dim() != 2:
        raise ValueError(f"logp must be [B, T], got shape {tuple(logp.shape)}")
    shape = logp.shape
    if old_logp is None:
        old_logp = logp.detach()
    for name, tensor in (("old_logp", old_logp), ("ref_logp", ref_logp), ("mask", mask)):
        if tensor is not None and tensor.shape != shape:
            raise ValueError(f"{name} has shape {tuple(tensor.shape)}, logp {tuple(shape)}")
    learnable = mask if mask.dtype == torch.bool else mask != 0
    learnable = learnable.to(logp.device)
    advantages = _expand_advantages(advantages, shape)

    compute_dtype = torch.promote_types(logp.dtype, torch.float32)  # bf16 in, float32 math

    def masked(values: Tensor) -> Tensor:
        return torch.where(learnable, values.to(device=logp.device, dtype=compute_dtype), 0.0)

    logp_m, old_m, adv_m = masked(logp), masked(old_logp.detach()), masked(advantages.detach())
    log_ratio = (logp_m - old_m).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
    ratio = torch.exp(log_ratio)

    unclipped = -adv_m * ratio
    clipped = -adv_m * ratio.clamp(1.0 - clip, 1.0 + clip)
    pg_per_token = torch.maximum(unclipped, clipped)
    clip_active = (clipped > unclipped) & learnable
    if dual_clip is not None:
        dual_bound = -adv_m * dual_clip
        negative = adv_m < 0
        dual_active = negative & (pg_per_token > dual_bound) & learnable
        pg_per_token = torch.where(negative, torch.minimum(pg_per_token, dual_bound), pg_per_token)
    else:
        dual_active = torch.zeros_like(learnable)

    use_kl = ref_logp is not None and kl_coef != 0
    if use_kl:
        kl_per_token = torch.where(learnable, k3_kl(logp_m, masked(ref_logp.detach())), 0.0)
    else:
        kl_per_token = torch.zeros_like(pg_per_token)

    per_token = torch.where(learnable, pg_per_token + kl_coef * kl_per_token, 0.0)
    tokens = learnable.sum().to(compute_dtype)
    loss = per_token.sum() / _denominator(token_count, tokens)

    metrics = _metrics(
        learnable=learnable,
        tokens=tokens,
        pg_per_token=pg_per_token,
        kl_per_token=kl_per_token,
        clip_active=clip_active,
        dual_active=dual_active,
        log_ratio=log_ratio,
        ratio=ratio,
        advantages=adv_m,
        segment_ids=segment_ids,
    )
    metrics["loss"] = float(loss.detach())
    return loss, metrics


def _metrics(
    *,
    learnable: Tensor,
    tokens: Tensor,
    pg_per_token: Tensor,
    kl_per_token: Tensor,
    clip_active: Tensor,
    dual_active: Tensor,
    log_ratio: Tensor,
    ratio: Tensor,
    advantages: Tensor,
    segment_ids: Tensor | None,
) -> dict[str, float]:
    """Token means over the learnable tokens, gathered into one tensor so there is one host sync."""
    with torch.no_grad():
        denominator = tokens.clamp(min=1.0)
        names = ["pg_loss", "kl", "clip_frac", "dual_clip_frac", "approx_kl", "ratio_mean"]
        sums = [
            pg_per_token.sum(),
            kl_per_token.sum(),
            clip_active.sum(),
            dual_active.sum(),
            torch.where(learnable, -log_ratio, 0.0).sum(),  # mean of old_logp - logp
            torch.where(learnable, ratio, 0.0).sum(),
        ]
        values = [s.to(denominator.dtype) / denominator for s in sums]
        names.append("tokens")
        values.append(tokens)
        if segment_ids is not None:
            if segment_ids.shape != learnable.shape:
                raise ValueError(f"segment_ids has shape {tuple(segment_ids.shape)}, logp {tuple(learnable.shape)}")
            segment_ids = segment_roles(segment_ids.to(learnable.device))  # per-turn ids count as tool
            for code in (SEG_TOOL, SEG_SUMMARY):
                in_segment = (segment_ids == code) & learnable
                count = in_segment.sum().to(denominator.dtype)
                total = torch.where(in_segment, advantages, 0.0).sum()
                names += [f"adv_mean/{SEGMENT_NAMES[code]}", f"tokens/{SEGMENT_NAMES[code]}"]
                values += [total / count.clamp(min=1.0), count]
        flat = torch.stack([v.reshape(()) for v in values]).tolist()
    return dict(zip(names, (float(v) for v in flat)))
