"""ShareGPT conversations: Hermes function-calling, APIGen-MT and the release's SFT rows.

A row is ``{"conversations": [{"from", "value"}, ...]}`` (``role``/``content`` keys work too),
optionally with ``system`` and ``tools`` (a list or a JSON string of one) beside it. Two call
conventions are read:

- Hermes: ``gpt`` turns hold ``<tool_call>`` blocks (JSON, or Python-literal dicts as in
  hermes-function-calling-v1) and ``tool`` turns ``<tool_response>`` blocks; the tools sit in a
  ``<tools>`` block of the system turn (a JSON list, one JSON object per line, or a Python literal);
- APIGen-MT / LLaMA-Factory: ``function_call`` turns hold a JSON call (or a list of parallel calls)
  and ``observation`` turns the result; the tools are the row's ``tools``.

A user turn made only of ``<tool_response>`` blocks (Qwen's chat template puts results there) counts
as tool turns. The ``<tools>`` block leaves the system text; so does the standard Qwen/Hermes tool
preamble around it, which the chat template adds back when the prompt is rendered.
"""

from __future__ import annotations

import json
from typing import Any

from slca_grpo.chat.parser import (
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    TOOL_RESPONSE_CLOSE,
    TOOL_RESPONSE_OPEN,
    parse_tool_calls,
    strip_tool_call_blocks,
)
from slca_grpo.chat.template import TOOLS_POSTAMBLE, TOOLS_PREAMBLE
from slca_grpo.data.formats.conversation import RecordedMessage, build_task
from slca_grpo.data.formats.fields import call_arguments, json_values, literal, named_function, require, tool_list
from slca_grpo.data.tasks import TaskFormatError
from slca_grpo.datatypes import Task, ToolCall

ROLE_NAMES = {
    "system": "system",
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "model": "assistant",
    "tool": "tool",
    "observation": "tool",
    "function_response": "tool",
    "function_call": "function_call",
}
TOOLS_OPEN, TOOLS_CLOSE = "<tools>", "</tools>"


def detect(row: dict[str, Any]) -> bool:
    turns = row.get("conversations")
    return isinstance(turns, list) and bool(turns) and isinstance(turns[0], dict)


def split_tools_block(system: str) -> tuple[str, str | None]:
    """(system text without its tool listing, the text inside ``<tools>…</tools>`` or None).

    The listing is the last ``<tools>`` block: the preambles themselves mention ``<tools></tools>``.
    """
    close = system.rfind(TOOLS_CLOSE)
    start = system.rfind(TOOLS_OPEN, 0, close) if close >= 0 else -1
    if start < 0:
        return system, None
    listing = system[start + len(TOOLS_OPEN) : close]
    preamble = system.find(TOOLS_PREAMBLE)
    standard = 0 <= preamble <= start and system.startswith(TOOLS_POSTAMBLE, close)
    if standard:  # our (and Qwen2.5's) wording around the listing: the chat template writes it again
        head, tail = system[:preamble], system[close + len(TOOLS_POSTAMBLE) :]
    else:
        head, tail = system[:start], system[close + len(TOOLS_CLOSE) :]
    return (head.rstrip() + ("\n\n" + tail.strip() if tail.strip() else "")).strip(), listing


def parse_tools_text(text: str, field: str) -> list[Any]:
    """The tools of a ``<tools>`` block: a JSON list, JSON objects one after another, or a literal."""
    text = text.strip()
    if not text:
        return []
    try:
        values = json_values(text)
    except ValueError:
        values = [literal(text, field)]
    if len(values) == 1 and isinstance(values[0], list):
        return values[0]
    return values


def calls_of(value: Any, field: str) -> list[ToolCall]:
    """Calls from a decoded call object (``name`` + ``arguments``/``parameters``) or a list of them."""
    items = value if isinstance(value, list) else [value]
    calls = []
    for i, item in enumerate(items):
        where = f"{field}[{i}]" if isinstance(value, list) else field
        function, name = named_function(item, where, "a call")
        arguments = function["arguments"] if "arguments" in function else function.get("parameters")
        calls.append(ToolCall(name, call_arguments(arguments, f"{where}.arguments")))
    if not calls:
        raise TaskFormatError("an empty list of calls", field=field)
    return calls


def hermes_calls(text: str, field: str) -> list[ToolCall]:
    """The calls of every ``<tool_call>`` block of an assistant text."""
    parsed = parse_tool_calls(text)
    if parsed.n_open != parsed.n_close:
        raise TaskFormatError(
            f"{parsed.n_open} {TOOL_CALL_OPEN} tag(s) but {parsed.n_close} {TOOL_CALL_CLOSE}", field=field
        )
    return [call for block in parsed.blocks for call in calls_of(literal(block.body.strip(), field), field)]


def _tool_turns(text: str, field: str) -> list[RecordedMessage] | None:
    """One tool turn per ``<tool_response>`` block, or None when the text has none."""
    responses = parse_tool_calls(text).tool_responses
    return [RecordedMessage("tool", body, field=field) for body in responses] if responses else None


def turn_text(turn: dict[str, Any], field: str) -> tuple[str, str]:
    role = turn.get("from", turn.get("role"))
    value = turn.get("value", turn.get("content"))
    if not isinstance(role, str) or role.lower() not in ROLE_NAMES:
        raise TaskFormatError(f"unknown speaker {role!r} (known: {', '.join(ROLE_NAMES)})", field=field)
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise TaskFormatError(f"the text must be a string, got {type(value).__name__}", field=field)
    return ROLE_NAMES[role.lower()], value


def read_turns(conversations: list[Any], field: str = "conversations") -> tuple[list[RecordedMessage], str | None]:
    """The turns of a ShareGPT conversation, and the ``<tools>`` listing its system turn holds."""
    turns: list[RecordedMessage] = []
    listing = None
    after_function_call = False
    for index, raw in enumerate(conversations):
        where = f"{field}[{index}]"
        if not isinstance(raw, dict):
            raise TaskFormatError(f"a turn must be an object, got {type(raw).__name__}", field=where)
        role, value = turn_text(raw, where)
        if role == "function_call":
            calls = calls_of(literal(value, f"{where}.value"), f"{where}.value")
            if after_function_call:  # consecutive function_call turns: one parallel step
                turns[-1].calls.extend(calls)
            else:
                turns.append(RecordedMessage("assistant", "", calls=calls, field=where))
        elif role == "system":
            text, found = split_tools_block(value)
            listing = found if found is not None else listing
            turns.append(RecordedMessage("system", text, field=where))
        elif role == "assistant":
            calls = hermes_calls(value, f"{where}.value")
            turns.append(
                RecordedMessage(
                    "assistant", strip_tool_call_blocks(value) if calls else value, calls=calls, field=where
                )
            )
        elif role == "tool":
            turns.extend(_tool_turns(value, where) or _observation_turns(value, turns, where))
        else:
            responses = _tool_turns(value, where)
            is_results = responses is not None and not strip_tool_call_blocks(
                value, TOOL_RESPONSE_OPEN, TOOL_RESPONSE_CLOSE
            )
            turns.extend(responses if is_results else [RecordedMessage("user", value, field=where)])
        after_function_call = role == "function_call"
    return turns, listing


def _observation_turns(value: str, turns: list[RecordedMessage], where: str) -> list[RecordedMessage]:
    """An observation: one turn, or one per call when parallel calls got a JSON list of results."""
    step = next((t for t in reversed(turns) if t.role != "tool"), None)
    expected = len(step.calls) if step is not None and step.role == "assistant" else 0
    if expected > 1:
        try:
            results = literal(value, where)
        except TaskFormatError:
            results = None
        if isinstance(results, list) and len(results) == expected:
            return [
                RecordedMessage("tool", r if isinstance(r, str) else json.dumps(r, ensure_ascii=False), field=where)
                for r in results
            ]
    return [RecordedMessage("tool", value, field=where)]


def convert(row: dict[str, Any], task_id: str) -> Task:
    conversations = require(row, "conversations", list)
    turns, listing = read_turns(conversations)
    system = row.get("system")
    if isinstance(system, str) and system.strip():
        text, found = split_tools_block(system)
        listing = found if listing is None else listing
        turns = [t for t in turns if t.role != "system"]
        turns.insert(0, RecordedMessage("system", text, field="system"))
    if row.get("tools") not in (None, "", []):
        tools = tool_list(row["tools"], "tools")
    else:
        tools = tool_list(parse_tools_text(listing or "", "conversations[0].value"), "<tools>")
    turns = [t for t in turns if not (t.role == "system" and not t.content.strip())]
    metadata = {k: row[k] for k in ("category", "subcategory") if isinstance(row.get(k), str)}
    return build_task(task_id, turns, tools, metadata=metadata)
