"""Argument accuracy per slot kind: which reading skill a policy lacks.

ArgMatch mixes key overlap with value matches, so a policy that writes the right keys with
memorised values still scores ~30. This module looks at each gold argument value on its own and
asks where it had to come from:

- ``copied_*``: written in the user's request exactly as the call needs it (a string, an id or
  code, a number, an ISO date, a 24-hour time) — the policy only has to copy it;
- ``converted_date`` / ``converted_time``: in the request in another form ("March 5, 2026",
  "2:30 pm") — the policy has to convert it;
- ``from_tool``: not in the request but in an earlier tool response (a two-step task's link);
- ``inferred``: in neither (an enum chosen from the meaning, a default spelt out, a boolean).

A slot is correct when some predicted call of the gold call's tool has that key with a loosely
equal value (the rule HierR's value score uses).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from slca_grpo.datatypes import Task, ToolCall
from slca_grpo.value_match import loose_equal

SLOT_KINDS = (
    "copied_string",
    "copied_id",
    "copied_number",
    "copied_date",
    "copied_time",
    "converted_date",
    "converted_time",
    "from_tool",
    "inferred",
)
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_CLOCK = re.compile(r"\d{2}:\d{2}")
# Order ids, tickers, phone numbers, e-mail addresses: tokens no word list holds.
_ID_LIKE = re.compile(r"(?=.*[\d@])|^[A-Z]{2,6}$|^[A-Z]+-")


def _number_forms(value: float | int) -> set[str]:
    """How a number may be written in a request: ``70`` for 70.0, ``12.5`` or ``12.50`` for 12.5."""
    if isinstance(value, float) and value.is_integer():
        return {str(int(value))}
    if isinstance(value, float):
        return {f"{value:.2f}", repr(value)}
    return {str(value)}


def _number_in(value: float | int, text: str) -> bool:
    return any(re.search(r"(?<![\d.])" + re.escape(form) + r"(?![\d])", text) for form in _number_forms(value))


def slot_kind(value: Any, request: str, tool_text: str = "") -> str:
    """Where a gold argument value is found: in the request as is, converted, in a tool response, or nowhere."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return "inferred"
    if isinstance(value, (int, float)):
        if _number_in(value, request):
            return "copied_number"
        return "from_tool" if tool_text and _number_in(value, tool_text) else "inferred"
    if value and value in request:
        if _ISO_DATE.fullmatch(value):
            return "copied_date"
        if _CLOCK.fullmatch(value):
            return "copied_time"
        return "copied_id" if _ID_LIKE.search(value) else "copied_string"
    if value and tool_text and value in tool_text:
        return "from_tool"
    if _ISO_DATE.fullmatch(value):
        return "converted_date"
    if _CLOCK.fullmatch(value):
        return "converted_time"
    return "inferred"


def _request_text(task: Task) -> str:
    return "\n".join(str(m.get("content") or "") for m in task.messages if m.get("role") == "user")


def _responses_before(task: Task, step_index: int) -> str:
    """The fixture responses of the gold calls of steps before ``step_index`` (what the policy has seen)."""
    earlier = [call for step in task.gold_calls[:step_index] for call in step]
    fixtures = [f for f in task.metadata.get("fixtures") or [] if isinstance(f, dict)]
    return "\n".join(
        str(f.get("response", ""))
        for f in fixtures
        if any(f.get("name") == c.name and f.get("arguments") == c.arguments for c in earlier)
    )


def slot_results(task: Task, predicted: Sequence[ToolCall]) -> list[tuple[str, bool]]:
    """(kind, correct) for every argument of every gold call of ``task``."""
    request = _request_text(task)
    results = []
    for step_index, step in enumerate(task.gold_calls):
        tool_text = _responses_before(task, step_index)
        for gold in step:
            candidates = [call.arguments for call in predicted if call.name == gold.name]
            for key, value in gold.arguments.items():
                correct = any(key in args and loose_equal(value, args[key]) for args in candidates)
                results.append((slot_kind(value, request, tool_text), correct))
    return results


def slot_accuracy(per_item: Iterable[Sequence[tuple[str, bool]]]) -> dict[str, dict[str, float]]:
    """Per kind (in ``SLOT_KINDS`` order, kinds seen only): slots, correct ones and their share."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for results in per_item:
        for kind, correct in results:
            counts[kind][0] += int(correct)
            counts[kind][1] += 1
    return {
        kind: {"n": counts[kind][1], "correct": counts[kind][0], "accuracy": counts[kind][0] / counts[kind][1]}
        for kind in SLOT_KINDS
        if counts[kind][1]
    }
