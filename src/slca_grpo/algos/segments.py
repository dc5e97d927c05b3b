"""Segment codes and the split of a response into tool and summary segments (docs/method.md §3).

A response's learnable tokens (``response_mask == 1``) come in maximal runs: one per assistant turn,
separated by injected tool responses (mask 0). The last run is the *summary* segment, all earlier
runs together are the *tool* segment; a response with a single run is all summary.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

SEG_NONE = 0
SEG_TOOL = 1
SEG_SUMMARY = 2
NUM_SEGMENT_CODES = 3
SEGMENT_NAMES: dict[int, str] = {SEG_NONE: "none", SEG_TOOL: "tool", SEG_SUMMARY: "summary"}

__all__ = [
    "NUM_SEGMENT_CODES",
    "SEGMENT_NAMES",
    "SEG_NONE",
    "SEG_SUMMARY",
    "SEG_TOOL",
    "segment_presence",
    "segment_token_counts",
    "segments_from_mask",
    "validate_segment_ids",
]


def _as_bool_mask(response_mask: Tensor) -> Tensor:
    if not isinstance(response_mask, Tensor):
        raise TypeError(f"response_mask must be a torch.Tensor, got {type(response_mask).__name__}")
    if response_mask.dtype == torch.bool:
        return response_mask
    inexact = response_mask.is_floating_point() or response_mask.is_complex()
    if inexact and not bool(torch.isfinite(response_mask).all()):
        raise ValueError("response_mask has non-finite values (NaN or inf)")
    return response_mask != 0


def segments_from_mask(response_mask: Tensor) -> Tensor:
    """Label each token ``SEG_NONE``, ``SEG_TOOL`` or ``SEG_SUMMARY`` from a ``[B, T]`` response mask.

    Any non-zero entry counts as learnable (bool, int and float masks are accepted). A 1-D mask is
    treated as a single row and a 1-D result is returned. The result is ``torch.long``.
    """
    mask = _as_bool_mask(response_mask)
    if mask.dim() == 1:
        return segments_from_mask(mask.unsqueeze(0)).squeeze(0)
    if mask.dim() != 2:
        raise ValueError(f"response_mask must be [B, T] (or [T]), got shape {tuple(mask.shape)}")
    if mask.shape[1] == 0:
        return torch.zeros(mask.shape, dtype=torch.long, device=mask.device)
    # A run starts where the mask is 1 and the previous token is not; numbering the runs with a
    # cumulative sum lets every row find its last run without a loop over rows or tokens.
    run_starts = mask.clone()
    run_starts[:, 1:] &= ~mask[:, :-1]
    run_number = run_starts.cumsum(dim=1, dtype=torch.int32)
    in_last_run = (run_number == run_number[:, -1:]) & mask
    segment_ids = mask.long()
    segment_ids += in_last_run  # 1 (tool) becomes 2 (summary) on the last run
    return segment_ids


def validate_segment_ids(segment_ids: Tensor, *, batch_size: int | None = None) -> Tensor:
    """Check that ``segment_ids`` is an integer ``[B, T]`` tensor of known codes; return it as long."""
    if not isinstance(segment_ids, Tensor):
        raise TypeError(f"segment_ids must be a torch.Tensor, got {type(segment_ids).__name__}")
    if segment_ids.dim() != 2:
        raise ValueError(f"segment_ids must be [B, T], got shape {tuple(segment_ids.shape)}")
    if segment_ids.is_floating_point() or segment_ids.is_complex() or segment_ids.dtype == torch.bool:
        raise ValueError(f"segment_ids must be an integer tensor, got dtype {segment_ids.dtype}")
    if batch_size is not None and segment_ids.shape[0] != batch_size:
        raise ValueError(f"segment_ids has {segment_ids.shape[0]} rows but there are {batch_size} group ids")
    if segment_ids.numel() > 0:
        low, high = torch.aminmax(segment_ids)
        if int(low) < 0 or int(high) >= NUM_SEGMENT_CODES:
            raise ValueError(
                f"segment_ids must only hold codes {sorted(SEGMENT_NAMES)} "
                f"(none/tool/summary), found values in [{int(low)}, {int(high)}]"
            )
    return segment_ids.long()


def segment_token_counts(segment_ids: Tensor) -> Tensor:
    """``[B, NUM_SEGMENT_CODES]`` long: how many tokens of rollout ``b`` carry code ``c``.

    Expects validated codes (see :func:`validate_segment_ids`).
    """
    rows = segment_ids.shape[0]
    if segment_ids.numel() == 0:
        return torch.zeros((rows, NUM_SEGMENT_CODES), dtype=torch.long, device=segment_ids.device)
    # A per-row histogram in one fused pass: summing one-hot rows of an identity "embedding" over
    # each row's codes. Several times cheaper than one comparison pass per code, and float32 counts
    # are exact up to 2**24 tokens per row.
    one_hot = torch.eye(NUM_SEGMENT_CODES, dtype=torch.float32, device=segment_ids.device)
    counts = F.embedding_bag(segment_ids.long(), one_hot, mode="sum")
    return counts.round().long()


def segment_presence(segment_ids: Tensor) -> Tensor:
    """``[B, NUM_SEGMENT_CODES]`` bool: whether rollout ``b`` has at least one token with code ``c``.

    Expects validated codes (see :func:`validate_segment_ids`).
    """
    return segment_token_counts(segment_ids) > 0
