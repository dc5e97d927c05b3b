"""The execution reward ``R_tool`` of HierR (docs/method.md §4): format, names, keys, values, parallelism.

Pure arithmetic over a parsed response and a task; no I/O.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, replace
from typing import Any

from slca_grpo.chat import BlockStatus, ParsedResponse, parse_tool_calls
from slca_grpo.datatypes import Task, ToolCall
from slca_grpo.rewards.config import ExecutionWeights
from slca_grpo.rewards.matching import key_jaccard, value_match_fraction


@dataclass(frozen=True)
class ExecutionReward:
    """The five components of R_tool (each in [0, 1]) and their weighted sum."""

    fmt: float
    name_f1: float
    key: float
    value: float
    parallel: float
    total: float

    @property
    def arg_match(self) -> float:
        """ArgMatch (docs/method.md §8) = (key + value) / 2."""
        return (self.key + self.value) / 2

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def parse_for_task(text_or_parsed: str | ParsedResponse | Any, task: Task) -> ParsedResponse:
    """Parse a response against the task's tools; a ParsedResponse is re-checked against them.

    A response parsed elsewhere may have used another tool list, so a ``valid`` block that calls a
    tool the task does not offer becomes ``unknown_tool``, and an ``unknown_tool`` block whose calls
    all name task tools becomes ``valid`` (the parser keeps every call of such a block).
    """
    allowed = frozenset(task.tool_names)
    if not isinstance(text_or_parsed, ParsedResponse):
        return parse_tool_calls(text_or_parsed, allowed_tools=allowed)
    blocks = []
    for block in text_or_parsed.blocks:
        unknown = sorted({c.name for c in block.calls if c.name not in allowed})
        if block.is_valid and unknown:
            block = replace(block, status=BlockStatus.UNKNOWN_TOOL, error=f"unknown tool(s): {', '.join(unknown)}")
        elif block.status is BlockStatus.UNKNOWN_TOOL and block.calls and not unknown:
            block = replace(block, status=BlockStatus.VALID, error=None)
        blocks.append(block)
    return replace(text_or_parsed, blocks=tuple(blocks))


def name_f1(predicted: list[str], gold: list[str]) -> float:
    """Multiset F1 of call names: 2·|P ∩ G| / (|P| + |G|); 1 if both empty, 0 if exactly one is."""
    if not predicted and not gold:
        return 1.0
    if not predicted or not gold:
        return 0.0
    overlap = sum((Counter(predicted) & Counter(gold)).values())
    return 2 * overlap / (len(predicted) + len(gold))


def key_value_scores(predicted: list[ToolCall], gold: list[ToolCall]) -> tuple[float, float]:
    """Greedy argument matching (docs/method.md §4) → (key, value).

    Rule order, as the paper lists it (docs/method.md §4): (1) no gold call has arguments → (1, 1),
    whatever was predicted;
    (2) nothing predicted → (0, 0). Otherwise each gold call with arguments, in order, takes the
    unused predicted call of the same name with the largest key+value (first on ties); an unmatched
    gold call scores (0, 0); the scores are averaged over the gold calls with arguments.
    """
    gold_with_args = [call for call in gold if call.arguments]
    if not gold_with_args:
        return 1.0, 1.0
    if not predicted:
        return 0.0, 0.0
    used: set[int] = set()
    key_total = value_total = 0.0
    for gold_call in gold_with_args:
        best: tuple[int, float, float] | None = None
        for index, candidate in enumerate(predicted):
            if index in used or candidate.name != gold_call.name:
                continue
            key = key_jaccard(gold_call.arguments, candidate.arguments)
            value = value_match_fraction(gold_call.arguments, candidate.arguments)
            if best is None or key + value > best[1] + best[2]:
                best = (index, key, value)
        if best is not None:
            used.add(best[0])
            key_total += best[1]
            value_total += best[2]
    return key_total / len(gold_with_args), value_total / len(gold_with_args)


def parallel_score(parsed: ParsedResponse, task: Task) -> float:
    """1 if the first valid block holds as many calls as the first gold step, else 0.

    The first gold step is the first non-empty one. With no gold step and no valid block the
    response agrees with the gold (nothing in parallel either way): 1. Exactly one missing: 0.
    """
    first_gold = next((step for step in task.gold_calls if step), None)
    valid = parsed.valid_blocks
    if first_gold is None and not valid:
        return 1.0
    if first_gold is None or not valid:
        return 0.0
    return 1.0 if len(valid[0].calls) == len(first_gold) else 0.0


def execution_reward(
    text_or_parsed: str | ParsedResponse, task: Task, weights: ExecutionWeights | None = None
) -> ExecutionReward:
    """R_tool = w_fmt·fmt + w_name·nameF1 + w_key·key + w_value·value + w_par·parallel (docs/method.md §4).

    ``fmt`` = valid blocks / max(#open, #close) (0 without tags), where a block is valid when every
    call in it names one of the task's tools with an object of arguments.
    """
    weights = weights or ExecutionWeights()
    parsed = parse_for_task(text_or_parsed, task)
    predicted = parsed.calls
    gold = task.flat_gold_calls
    fmt = parsed.format_score
    names = name_f1([c.name for c in predicted], [c.name for c in gold])
    key, value = key_value_scores(predicted, gold)
    parallel = parallel_score(parsed, task)
    total = (
        weights.fmt * fmt
        + weights.name * names
        + weights.key * key
        + weights.value * value
        + weights.parallel * parallel
    )
    return ExecutionReward(fmt=fmt, name_f1=names, key=key, value=value, parallel=parallel, total=total)
