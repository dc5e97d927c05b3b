"""Segmentation of a response mask into tool / summary segments (docs/method.md §3)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from slca_grpo.algos import (
    SEG_NONE,
    SEG_SUMMARY,
    SEG_TOOL,
    segment_ids_for,
    segment_presence,
    segment_roles,
    segment_token_counts,
    segments_from_mask,
    turn_segments_from_mask,
    validate_segment_ids,
)


def reference_segments(row: list[int]) -> list[int]:
    """Per-row Python reference: find the runs, label the last one summary and the others tool."""
    runs: list[tuple[int, int]] = []
    start = None
    for position, value in enumerate(row + [0]):
        if value and start is None:
            start = position
        elif not value and start is not None:
            runs.append((start, position))
            start = None
    labels = [SEG_NONE] * len(row)
    for index, (begin, end) in enumerate(runs):
        code = SEG_SUMMARY if index == len(runs) - 1 else SEG_TOOL
        labels[begin:end] = [code] * (end - begin)
    return labels


masks = st.integers(1, 6).flatmap(
    lambda rows: st.integers(0, 40).flatmap(
        lambda cols: st.lists(st.lists(st.booleans(), min_size=cols, max_size=cols), min_size=rows, max_size=rows)
    )
)


def test_hand_labelled_rows() -> None:
    mask = torch.tensor(
        [
            [1, 1, 0, 1, 0, 0, 1, 1, 0],  # three runs: tool, tool, summary
            [0, 1, 1, 1, 0, 0, 0, 0, 0],  # one run (no tool call): all summary
            [0, 0, 0, 0, 0, 0, 0, 0, 0],  # nothing learnable
            [1, 0, 1, 0, 1, 0, 1, 0, 1],  # summary is the single token at the end
            [1, 1, 1, 1, 1, 1, 1, 1, 1],  # one run spanning the row
            [0, 0, 1, 1, 0, 1, 1, 1, 1],  # last run reaches the end
        ]
    )
    expected = torch.tensor(
        [
            [1, 1, 0, 1, 0, 0, 2, 2, 0],
            [0, 2, 2, 2, 0, 0, 0, 0, 0],
            [0, 0, 0, 0, 0, 0, 0, 0, 0],
            [1, 0, 1, 0, 1, 0, 1, 0, 2],
            [2, 2, 2, 2, 2, 2, 2, 2, 2],
            [0, 0, 1, 1, 0, 2, 2, 2, 2],
        ]
    )
    result = segments_from_mask(mask)
    assert result.dtype == torch.long
    assert torch.equal(result, expected)


@pytest.mark.parametrize(
    "mask",
    [
        torch.tensor([[True, False, True, True]]),
        torch.tensor([[1, 0, 1, 1]], dtype=torch.int32),
        torch.tensor([[1.0, 0.0, 1.0, 1.0]]),
        torch.tensor([[0.5, 0.0, 2.0, -1.0]]),  # any non-zero counts as learnable
        torch.tensor([[1, 0, 1, 1]], dtype=torch.uint8),
    ],
)
def test_accepts_bool_int_and_float_masks(mask: torch.Tensor) -> None:
    assert segments_from_mask(mask).tolist() == [[1, 0, 2, 2]]


def test_one_dimensional_mask_is_one_row() -> None:
    result = segments_from_mask(torch.tensor([1, 1, 0, 0, 1]))
    assert result.tolist() == [1, 1, 0, 0, 2]


def test_empty_shapes() -> None:
    assert segments_from_mask(torch.zeros(3, 0)).shape == (3, 0)
    assert segments_from_mask(torch.zeros(0, 5)).shape == (0, 5)


def test_bad_masks_raise_clearly() -> None:
    with pytest.raises(ValueError, match="non-finite"):
        segments_from_mask(torch.tensor([[1.0, float("nan")]]))
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        segments_from_mask(torch.ones(2, 3, 4))
    with pytest.raises(TypeError, match="torch.Tensor"):
        segments_from_mask([[1, 0, 1]])  # type: ignore[arg-type]


def test_input_mask_is_not_modified() -> None:
    mask = torch.tensor([[True, False, True]])
    segments_from_mask(mask)
    assert mask.tolist() == [[True, False, True]]


@settings(max_examples=150, deadline=None)
@given(masks)
def test_matches_per_row_reference(rows: list[list[bool]]) -> None:
    mask = torch.tensor(rows, dtype=torch.bool).reshape(len(rows), -1)
    expected = [reference_segments([int(v) for v in row]) for row in rows]
    assert segments_from_mask(mask).tolist() == expected


@settings(max_examples=150, deadline=None)
@given(masks)
def test_segments_partition_the_mask(rows: list[list[bool]]) -> None:
    mask = torch.tensor(rows, dtype=torch.bool).reshape(len(rows), -1)
    segments = segments_from_mask(mask)
    tool, summary = segments == SEG_TOOL, segments == SEG_SUMMARY
    assert torch.equal(tool | summary, mask)  # union is the mask
    assert not bool((tool & summary).any())  # disjoint
    for row_mask, row_summary, row_tool in zip(mask, summary, tool):
        ones = row_mask.nonzero().flatten()
        if ones.numel() == 0:
            assert not bool(row_summary.any())
            continue
        positions = row_summary.nonzero().flatten()
        # The summary is one contiguous run that ends at the last learnable token...
        assert int(positions[-1]) == int(ones[-1])
        assert positions.tolist() == list(range(int(positions[0]), int(positions[-1]) + 1))
        # ...and it is maximal: the token before it is not learnable.
        start = int(positions[0])
        assert start == 0 or not bool(row_mask[start - 1])
        # Tool tokens all come before the summary.
        if bool(row_tool.any()):
            assert int(row_tool.nonzero().max()) < start


def test_validate_segment_ids() -> None:
    good = torch.tensor([[0, 1, 2]], dtype=torch.int32)
    validated = validate_segment_ids(good, batch_size=1)
    assert validated.dtype == torch.long and validated.tolist() == [[0, 1, 2]]
    assert validate_segment_ids(torch.tensor([[0, 3, 4, 2]])).tolist() == [[0, 3, 4, 2]]  # the turn layout
    with pytest.raises(ValueError, match="mix the tool code 1"):
        validate_segment_ids(torch.tensor([[1, 3]]))
    with pytest.raises(ValueError, match=r"found values in \[-1, 1\]"):
        validate_segment_ids(torch.tensor([[-1, 1]]))
    with pytest.raises(ValueError, match="integer"):
        validate_segment_ids(torch.tensor([[0.0, 1.0]]))
    with pytest.raises(ValueError, match="integer"):
        validate_segment_ids(torch.tensor([[True, False]]))
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        validate_segment_ids(torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="2 rows but there are 3 group ids"):
        validate_segment_ids(torch.zeros(2, 4, dtype=torch.long), batch_size=3)


def test_segment_token_counts_and_presence() -> None:
    segments = torch.tensor([[1, 1, 0, 2, 2, 2], [0, 0, 0, 2, 0, 0], [0, 0, 0, 0, 0, 0]])
    assert segment_token_counts(segments).tolist() == [[1, 2, 3], [5, 0, 1], [6, 0, 0]]
    assert segment_presence(segments).tolist() == [
        [True, True, True],
        [True, False, True],
        [True, False, False],
    ]
    assert segment_presence(torch.zeros(2, 0, dtype=torch.long)).tolist() == [[False] * 3] * 2


@settings(max_examples=60, deadline=None)
@given(masks)
def test_counts_match_comparisons(rows: list[list[bool]]) -> None:
    segments = segments_from_mask(torch.tensor(rows, dtype=torch.bool).reshape(len(rows), -1))
    counts = segment_token_counts(segments)
    for code in (SEG_NONE, SEG_TOOL, SEG_SUMMARY):
        assert torch.equal(counts[:, code], (segments == code).sum(1))


# -- a segment's kind comes from its content -----------------------------------------------------


def test_a_rollout_cut_off_on_a_call_has_no_summary_segment() -> None:
    mask = torch.tensor(
        [
            [1, 1, 0, 1, 1, 0, 1, 1],  # call, call, answer
            [1, 1, 0, 1, 1, 0, 1, 1],  # call, call, call cut off by max_turns: no answer
            [0, 1, 1, 1, 0, 0, 0, 0],  # a single call the token budget left unanswered
            [0, 1, 1, 1, 0, 0, 0, 0],  # a single answer
        ]
    )
    answered = torch.tensor([True, False, False, True])
    expected = torch.tensor(
        [
            [1, 1, 0, 1, 1, 0, 2, 2],
            [1, 1, 0, 1, 1, 0, 1, 1],
            [0, 1, 1, 1, 0, 0, 0, 0],
            [0, 2, 2, 2, 0, 0, 0, 0],
        ]
    )
    assert torch.equal(segments_from_mask(mask, answered), expected)
    assert torch.equal(segments_from_mask(mask, [True, False, False, True]), expected)  # plain flags too
    # The turn layout: the unanswered call is turn 3 (code 5), the lone cut-off call turn 1 (code 3).
    turns = turn_segments_from_mask(mask, answered)
    assert turns[1].tolist() == [3, 3, 0, 4, 4, 0, 5, 5]
    assert turns[2].tolist() == [0, 3, 3, 3, 0, 0, 0, 0]
    assert torch.equal(segment_roles(turns), expected)
    # Without flags every response is taken to end with its answer (the mask alone cannot tell).
    assert torch.equal(segments_from_mask(mask), segments_from_mask(mask, [True] * 4))
    # One flag for a 1-D mask; the registry's entry point passes flags through.
    assert segments_from_mask(mask[1], False).tolist() == expected[1].tolist()
    assert torch.equal(segment_ids_for("slca", mask, answered), expected)
    assert torch.equal(segment_ids_for("slca-turn", mask, answered), turns)


def test_answered_flags_must_match_the_rows() -> None:
    mask = torch.ones(3, 4)
    with pytest.raises(ValueError, match=r"one flag per response \(3\)"):
        segments_from_mask(mask, [True, False])
    with pytest.raises(ValueError, match="non-finite"):
        segments_from_mask(mask, torch.tensor([1.0, float("nan"), 0.0]))
    for bad in ("yes", [None, None, None], [True, "no", False]):
        with pytest.raises(ValueError, match="answered must be one bool per response"):
            segments_from_mask(mask, bad)


@settings(max_examples=100, deadline=None)
@given(masks, st.data())
def test_unanswered_rows_are_all_tool_and_answered_rows_unchanged(rows: list[list[bool]], data) -> None:
    answered = data.draw(st.lists(st.booleans(), min_size=len(rows), max_size=len(rows)))
    mask = torch.tensor(rows, dtype=torch.bool).reshape(len(rows), -1)
    result = segments_from_mask(mask, answered)
    for row, flag in enumerate(answered):
        if flag:
            assert result[row].tolist() == reference_segments(rows[row])
        else:
            assert result[row].tolist() == [SEG_TOOL if bit else SEG_NONE for bit in rows[row]]
    assert torch.equal(segment_roles(turn_segments_from_mask(mask, answered)), result)
