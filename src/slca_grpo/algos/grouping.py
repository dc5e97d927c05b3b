"""Grouped statistics over rollouts: group ids to indices, per-group mean / unbiased std, z-scores.

Every function is vectorised over the batch with ``index_add_`` / ``scatter_reduce_``; nothing loops
over rollouts in Python. Statistics are computed in float64 (float32 on MPS, which lacks float64):
the batch dimension is small, and it makes hand-computed values reproducible to the last digit.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Literal, NamedTuple

import torch
from torch import Tensor

__all__ = [
    "GroupStats",
    "group_index_from_ids",
    "group_stats",
    "group_zscore",
    "stat_dtype",
]

SmallGroupPolicy = Literal["zero", "unit"]


def stat_dtype(device: torch.device) -> torch.dtype:
    """The dtype used for group statistics on ``device``."""
    return torch.float32 if device.type == "mps" else torch.float64


def group_index_from_ids(
    group_ids: Tensor | Sequence[Hashable],
    *,
    batch_size: int | None = None,
    device: torch.device | str | None = None,
) -> tuple[Tensor, int]:
    """Map per-rollout group ids to dense indices ``0..G-1``; return ``(index [B] long, G)``.

    ``group_ids`` is a 1-D integer/float tensor (grouped with ``torch.unique``) or a sequence of
    hashables such as prompt uids or ``(prompt, epoch)`` tuples (numbered by first appearance).
    """
    if isinstance(group_ids, Tensor):
        if group_ids.dim() != 1:
            raise ValueError(f"group_ids must be 1-D [B], got shape {tuple(group_ids.shape)}")
        if group_ids.is_floating_point() and not bool(torch.isfinite(group_ids).all()):
            raise ValueError("group_ids has non-finite values")
        unique, index = torch.unique(group_ids, return_inverse=True)
        index, num_groups = index.long(), int(unique.numel())
    else:
        if isinstance(group_ids, (str, bytes)) or not isinstance(group_ids, Sequence):
            try:
                group_ids = list(group_ids)  # numpy arrays, generators
            except TypeError:
                raise TypeError(
                    f"group_ids must be a 1-D tensor or a sequence of hashable ids, got {type(group_ids).__name__}"
                ) from None
        numbering: dict[Hashable, int] = {}
        try:
            dense = [numbering.setdefault(gid, len(numbering)) for gid in group_ids]
        except TypeError as err:
            raise TypeError(f"group_ids must be hashable (str, int, tuple, ...): {err}") from None
        index = torch.tensor(dense, dtype=torch.long)
        num_groups = len(numbering)
    if batch_size is not None and index.numel() != batch_size:
        raise ValueError(f"got {index.numel()} group ids for a batch of {batch_size} rollouts")
    if device is not None:
        index = index.to(device)
    return index, num_groups


class GroupStats(NamedTuple):
    """Per-group statistics, each ``[G]`` (float, in :func:`stat_dtype`)."""

    count: Tensor
    mean: Tensor
    std: Tensor


def _present_mask(values: Tensor, present: Tensor | None) -> Tensor:
    if present is None:
        return torch.ones(values.shape, dtype=torch.bool, device=values.device)
    if present.shape != values.shape:
        raise ValueError(f"present has shape {tuple(present.shape)}, values {tuple(values.shape)}")
    return present.to(device=values.device, dtype=torch.bool)


def _deviations(values: Tensor, group_index: Tensor, present: Tensor, num_groups: int) -> tuple[GroupStats, Tensor]:
    """Return the group statistics and each rollout's deviation from its group mean ``[B]``."""
    dtype = stat_dtype(values.device)
    x = values.to(dtype)
    if not bool(torch.isfinite(x).all()):
        raise ValueError("grouped statistics need finite values; got NaN or inf")
    weight = present.to(dtype)
    count = torch.zeros(num_groups, dtype=dtype, device=x.device).index_add_(0, group_index, weight)
    # Shift by the group minimum first: equal values then give deviations of exactly 0 (not 1e-17
    # from rounding in sum / n), and the shifted sums lose less precision.
    shift = torch.full((num_groups,), float("inf"), dtype=dtype, device=x.device)
    shift.scatter_reduce_(0, group_index, torch.where(present, x, float("inf")), reduce="amin")
    shift = torch.where(torch.isfinite(shift), shift, 0.0)
    shifted = torch.where(present, x - shift[group_index], 0.0)
    shifted_sum = torch.zeros_like(count).index_add_(0, group_index, shifted)
    shifted_mean = shifted_sum / count.clamp(min=1.0)
    deviation = torch.where(present, shifted - shifted_mean[group_index], 0.0)
    squares = torch.zeros_like(count).index_add_(0, group_index, deviation * deviation)
    std = torch.sqrt(squares / (count - 1.0).clamp(min=1.0))
    mean = torch.where(count > 0, shift + shifted_mean, 0.0)
    return GroupStats(count=count, mean=mean, std=std), deviation


def group_stats(
    values: Tensor,
    group_index: Tensor,
    present: Tensor | None = None,
    *,
    num_groups: int | None = None,
) -> GroupStats:
    """Count, mean and unbiased std of ``values`` per group, over the rollouts marked ``present``.

    Groups with no present rollout get mean 0; groups with one get std 0.
    """
    group_index = group_index.to(values.device)
    present_mask = _present_mask(values, present)
    num_groups = _num_groups(group_index, num_groups)
    stats, _ = _deviations(values, group_index, present_mask, num_groups)
    return stats


def _num_groups(group_index: Tensor, num_groups: int | None) -> int:
    if num_groups is not None:
        return num_groups
    return int(group_index.max()) + 1 if group_index.numel() else 0


def group_zscore(
    values: Tensor,
    group_index: Tensor,
    present: Tensor | None = None,
    *,
    min_count: int = 2,
    eps: float = 1e-6,
    norm_std: bool = True,
    small_groups: SmallGroupPolicy = "zero",
    num_groups: int | None = None,
) -> Tensor:
    """Group-normalised values ``(x - mean_P) / (std_P + eps)`` over the present rollouts ``P``.

    - Rollouts not ``present`` get 0 and do not enter their group's statistics.
    - A group with fewer than ``min_count`` present rollouts: ``small_groups="zero"`` gives them 0
      (SLCA's presence-filtered rule); ``"unit"`` uses mean 0 and std 1 (GRPO's group of one).
    - ``norm_std=False`` only subtracts the mean (Dr.GRPO).
    - Equal values in a group give exactly 0, never NaN.

    Returns a ``[B]`` tensor in :func:`stat_dtype`.
    """
    if values.dim() != 1 or group_index.shape != values.shape:
        raise ValueError(
            f"values and group_index must both be [B]; got {tuple(values.shape)} and {tuple(group_index.shape)}"
        )
    if small_groups not in ("zero", "unit"):
        raise ValueError(f"small_groups must be 'zero' or 'unit', got {small_groups!r}")
    group_index = group_index.to(values.device)
    present_mask = _present_mask(values, present)
    num_groups = _num_groups(group_index, num_groups)
    stats, deviation = _deviations(values, group_index, present_mask, num_groups)
    if norm_std:
        denominator = stats.std + eps
        # eps = 0 with a constant group: the deviation is exactly 0, so divide by 1 instead of 0.
        denominator = torch.where(denominator > 0, denominator, 1.0)
        normalised = deviation / denominator[group_index]
    else:
        normalised = deviation
    big_enough = (stats.count >= min_count)[group_index]
    if small_groups == "unit":
        x = values.to(normalised.dtype)
        fallback = x / (1.0 + eps) if norm_std else x
    else:
        fallback = torch.zeros_like(normalised)
    return torch.where(present_mask, torch.where(big_enough, normalised, fallback), 0.0)
