"""Segment codes and the split of a response into tool and summary segments (docs/method.md §3).

A response's learnable tokens (``response_mask == 1``) come in maximal runs: one per assistant turn,
separated by injected tool responses (mask 0). A segment's kind comes from its content: every run
but the last asked for tool results (that is why a tool response follows it), so it is a tool run;
the last run is the *summary* segment when it is the rollout's answer, and a tool run when it holds
a call too (a rollout cut off by ``max_turns`` or the token budget before answering, which has no
summary segment). The mask cannot say which: the caller passes ``answered`` (one flag per
response, from the last turn's text: ``chat.parser.is_call_turn``); without it every response is
taken to end with its answer.

Two layouts share these runs. The *role* layout (``segments_from_mask``) codes 0 none, 1 tool,
2 summary. The *turn* layout (``turn_segments_from_mask``) keeps 0 and 2 and gives the k-th tool
run its own code ``SEG_FIRST_TURN + k - 1`` (3, 4, ...), so collapsing every code >= 3 to 1
(``segment_roles``) gives back the role layout exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

SEG_NONE = 0
SEG_TOOL = 1
SEG_SUMMARY = 2
NUM_SEGMENT_CODES = 3  # codes of the role layout
SEG_FIRST_TURN = 3  # turn layout: tool turn k has code SEG_FIRST_TURN + k - 1
SEGMENT_NAMES: dict[int, str] = {SEG_NONE: "none", SEG_TOOL: "tool", SEG_SUMMARY: "summary"}

__all__ = [
    "NUM_SEGMENT_CODES",
    "SEGMENTATIONS",
    "SEGMENT_NAMES",
    "SEG_FIRST_TURN",
    "SEG_NONE",
    "SEG_SUMMARY",
    "SEG_TOOL",
    "learnable_runs",
    "segment_ids_from_mask",
    "segment_presence",
    "segment_roles",
    "segment_token_counts",
    "segments_from_mask",
    "turn_count",
    "turn_segments_from_mask",
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


Answered = Tensor | Sequence[bool] | bool | None


def _answered_rows(answered: Answered, rows: int, device: torch.device) -> Tensor:
    """``[B, 1]`` bool: whether each response's last run is its answer (all, for ``None``)."""
    if answered is None:
        return torch.ones((rows, 1), dtype=torch.bool, device=device)
    try:
        flags = torch.as_tensor(answered, device=device)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"answered must be one bool per response, got {type(answered).__name__}") from None
    if flags.dim() == 0:
        flags = flags.reshape(1)
    if flags.dim() != 1 or flags.shape[0] != rows:
        raise ValueError(f"answered must hold one flag per response ({rows}), got shape {tuple(flags.shape)}")
    if flags.is_floating_point() and not bool(torch.isfinite(flags).all()):
        raise ValueError("answered has non-finite values (NaN or inf)")
    return (flags != 0).reshape(rows, 1)


def _label_runs(response_mask: Tensor, answered: Answered, label: Callable[[Tensor, Tensor, Tensor], Tensor]) -> Tensor:
    """``label(mask, run_number, summary_run)`` over a ``[B, T]`` (or ``[T]``) mask: ``mask`` bool,
    ``run_number`` the 1-based number of each token's run (meaningful where the mask is set),
    ``summary_run`` ``[B, 1]`` the number of the row's summary run (0 when it has none)."""
    if isinstance(response_mask, Tensor) and response_mask.dim() == 1:
        return _label_runs(response_mask.unsqueeze(0), answered, label).squeeze(0)
    mask = _as_bool_mask(response_mask)
    if mask.dim() != 2:
        raise ValueError(f"response_mask must be [B, T] (or [T]), got shape {tuple(mask.shape)}")
    ends_with_answer = _answered_rows(answered, mask.shape[0], mask.device)
    if mask.shape[1] == 0:
        return torch.zeros(mask.shape, dtype=torch.long, device=mask.device)
    # A run starts where the mask is 1 and the previous token is not; numbering the runs with a
    # cumulative sum lets every row find its last run without a loop over rows or tokens.
    run_starts = mask.clone()
    run_starts[:, 1:] &= ~mask[:, :-1]
    run_number = run_starts.cumsum(dim=1, dtype=torch.int32)
    summary_run = torch.where(ends_with_answer, run_number[:, -1:], 0)
    return label(mask, run_number, summary_run)


def _role_labels(mask: Tensor, run_number: Tensor, summary_run: Tensor) -> Tensor:
    segment_ids = mask.long()
    segment_ids += (run_number == summary_run) & mask  # 1 (tool) becomes 2 (summary) on the answer
    return segment_ids


def _turn_labels(mask: Tensor, run_number: Tensor, summary_run: Tensor) -> Tensor:
    codes = run_number.long()
    codes += SEG_FIRST_TURN - 1  # run k -> turn code
    codes.masked_fill_(run_number == summary_run, SEG_SUMMARY)
    return codes.masked_fill_(~mask, SEG_NONE)


def segments_from_mask(response_mask: Tensor, answered: Answered = None) -> Tensor:
    """Label each token ``SEG_NONE``, ``SEG_TOOL`` or ``SEG_SUMMARY`` from a ``[B, T]`` response mask.

    ``answered`` (``[B]`` flags, or one for a 1-D mask): whether each response ends with its answer.
    Its last run is then the summary; otherwise it is a tool call cut off unanswered, a tool run,
    and the response has no summary segment. ``None``: every response ends with its answer.
    Any non-zero mask entry counts as learnable (bool, int and float masks are accepted). A 1-D
    mask is treated as a single row and a 1-D result is returned. The result is ``torch.long``.
    """
    return _label_runs(response_mask, answered, _role_labels)


def turn_segments_from_mask(response_mask: Tensor, answered: Answered = None) -> Tensor:
    """The turn layout: the k-th run gets ``SEG_FIRST_TURN + k - 1`` unless it is the response's
    answer (its last run, where ``answered``), which is ``SEG_SUMMARY``; not learnable is
    ``SEG_NONE``. The same runs as :func:`segments_from_mask` (``segment_roles`` of the result
    equals it); 1-D in, 1-D out.
    """
    return _label_runs(response_mask, answered, _turn_labels)


def learnable_runs(response_mask: Sequence[int] | Sequence[bool] | Tensor) -> list[tuple[int, int]]:
    """``[(start, end), ...]``: the maximal runs of learnable tokens of one response, in order (run
    k is assistant turn k). With the response ids, this is how a trainer
    that holds only tokens (the verl adapter) recovers each turn's text for the per-turn reward."""
    if isinstance(response_mask, Tensor):
        mask = _as_bool_mask(response_mask)  # refuses NaN, as the tensor segmenters do
        if mask.dim() != 1:
            raise ValueError(f"learnable_runs reads one response's [T] mask, got shape {tuple(mask.shape)}")
        values = mask.tolist()
    else:
        values = list(response_mask)
    runs: list[tuple[int, int]] = []
    start = None
    for position, value in enumerate([*values, 0]):
        if value and start is None:
            start = position
        elif not value and start is not None:
            runs.append((start, position))
            start = None
    return runs


_SEGMENTERS = {"role": segments_from_mask, "turn": turn_segments_from_mask}
SEGMENTATIONS = tuple(_SEGMENTERS)


def segment_ids_from_mask(segmentation: str, response_mask: Tensor, answered: Answered = None) -> Tensor:
    """Segment ids of ``response_mask`` in the layout ``segmentation`` (``"role"`` or ``"turn"``);
    ``answered`` as in :func:`segments_from_mask`.

    Trainers call it through ``algos.segment_ids_for(estimator, mask, answered)``, which reads the
    layout the estimator declares."""
    try:
        segmenter = _SEGMENTERS[segmentation]
    except (KeyError, TypeError):
        raise ValueError(f"unknown segmentation {segmentation!r}; known: {', '.join(SEGMENTATIONS)}") from None
    return segmenter(response_mask, answered)


def segment_roles(segment_ids: Tensor) -> Tensor:
    """The role layout (0 none / 1 tool / 2 summary) of segment ids in either layout."""
    return torch.where(segment_ids >= SEG_FIRST_TURN, SEG_TOOL, segment_ids)


def turn_count(segment_ids: Tensor) -> int:
    """How many tool-turn codes the columns of :func:`segment_presence` must cover: the highest turn
    number in ``segment_ids`` (0 for the role layout or no tool turn)."""
    if segment_ids.numel() == 0:
        return 0
    return max(0, int(segment_ids.max()) - SEG_FIRST_TURN + 1)


def validate_segment_ids(segment_ids: Tensor, *, batch_size: int | None = None) -> Tensor:
    """Check that ``segment_ids`` is an integer ``[B, T]`` tensor in one layout; return it as long.

    Codes 0, 1, 2 (role layout) or 0, 2 and >= 3 (turn layout); mixing the tool code 1 with turn
    codes is an error, as is any negative code.
    """
    return checked_segment_ids(segment_ids, batch_size=batch_size)[0]


def checked_segment_ids(segment_ids: Tensor, *, batch_size: int | None = None) -> tuple[Tensor, int]:
    """:func:`validate_segment_ids` and the highest code found (0 for an empty tensor)."""
    if not isinstance(segment_ids, Tensor):
        raise TypeError(f"segment_ids must be a torch.Tensor, got {type(segment_ids).__name__}")
    if segment_ids.dim() != 2:
        raise ValueError(f"segment_ids must be [B, T], got shape {tuple(segment_ids.shape)}")
    if segment_ids.is_floating_point() or segment_ids.is_complex() or segment_ids.dtype == torch.bool:
        raise ValueError(f"segment_ids must be an integer tensor, got dtype {segment_ids.dtype}")
    if batch_size is not None and segment_ids.shape[0] != batch_size:
        raise ValueError(f"segment_ids has {segment_ids.shape[0]} rows but there are {batch_size} group ids")
    if segment_ids.numel() == 0:
        return segment_ids.long(), 0
    low, high = (int(v) for v in torch.aminmax(segment_ids))
    if low < 0:
        raise ValueError(
            f"segment_ids must only hold codes {sorted(SEGMENT_NAMES)} (none/tool/summary) or turn codes "
            f">= {SEG_FIRST_TURN}, found values in [{low}, {high}]"
        )
    if high >= SEG_FIRST_TURN and bool((segment_ids == SEG_TOOL).any()):
        raise ValueError(
            f"segment_ids mix the tool code {SEG_TOOL} (role layout) with turn codes >= {SEG_FIRST_TURN} "
            "(turn layout); build them with one function (algos.segment_ids_for)"
        )
    if high >= SEG_FIRST_TURN + segment_ids.shape[1]:
        # A row of T tokens holds at most T runs: a larger turn code is not one of a mask's.
        raise ValueError(
            f"segment_ids hold turn code {high}, but rows of {segment_ids.shape[1]} tokens have at most "
            f"{segment_ids.shape[1]} turns (codes up to {SEG_FIRST_TURN + segment_ids.shape[1] - 1})"
        )
    return segment_ids.long(), high


def segment_token_counts(segment_ids: Tensor, num_codes: int | None = None) -> Tensor:
    """``[B, C]`` long: how many tokens of rollout ``b`` carry code ``c``, for ``C = num_codes``
    (default: ``NUM_SEGMENT_CODES``, or more when turn codes are present).

    Expects validated codes (see :func:`validate_segment_ids`).
    """
    rows = segment_ids.shape[0]
    if num_codes is None:
        num_codes = NUM_SEGMENT_CODES + turn_count(segment_ids)
    if segment_ids.numel() == 0:
        return torch.zeros((rows, num_codes), dtype=torch.long, device=segment_ids.device)
    # A per-row histogram in one fused pass: summing one-hot rows of an identity "embedding" over
    # each row's codes. Several times cheaper than one comparison pass per code, and float32 counts
    # are exact up to 2**24 tokens per row.
    one_hot = torch.eye(num_codes, dtype=torch.float32, device=segment_ids.device)
    counts = F.embedding_bag(segment_ids.long(), one_hot, mode="sum")
    return counts.round().long()


def segment_presence(segment_ids: Tensor, num_codes: int | None = None) -> Tensor:
    """``[B, C]`` bool: whether rollout ``b`` has at least one token with code ``c`` (``C`` as in
    :func:`segment_token_counts`).

    Expects validated codes (see :func:`validate_segment_ids`).
    """
    return segment_token_counts(segment_ids, num_codes) > 0
