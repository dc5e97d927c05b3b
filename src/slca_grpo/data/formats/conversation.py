"""One recorded conversation → one :class:`~slca_grpo.datatypes.Task`, its assistant turns kept.

Every chat-style format (ShareGPT/Hermes, APIGen-MT, ToolACE, Glaive, OpenAI messages, the
release's SFT rows) is first read into :class:`RecordedMessage` values, then built here the same way:

- the prompt is the conversation up to its last user turn that has a reply (earlier assistant
  calls and tool responses stay in it as history); user turns left unanswered at the end go;
- each assistant turn with calls after that is a gold step (its calls are parallel); text said
  alongside a step goes to ``metadata["step_texts"]``;
- the tool responses recorded for a step become ``metadata["fixtures"]`` (so rollouts and SFT
  answer those calls with what the dataset recorded); they are paired with calls by id when the
  format has ids, else in order;
- the last assistant text is the ``reference_answer``; no call at all makes the task
  ``irrelevant`` (no call expected).

Tool names that OpenAI would refuse (spaces, dots) are rewritten the way BFCL's are
(``"Market Trends API"`` → ``"Market_Trends_API"``) in tools, calls and history alike;
``metadata["tool_names"]`` maps them back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slca_grpo.data.bfcl.convert import exposed_names
from slca_grpo.data.tasks import TaskFormatError, task_from_dict
from slca_grpo.datatypes import Task, ToolCall, tool_function

ROLES = ("system", "user", "assistant", "tool")


@dataclass
class RecordedMessage:
    """One message of a conversation, as read from a dataset row."""

    role: str
    content: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    call_ids: list[str | None] = field(default_factory=list)  # one per call, where the format has ids
    call_id: str | None = None  # a tool turn: the call it answers
    field: str = ""  # where in the row it came from, for errors


@dataclass
class _Step:
    turn: RecordedMessage
    text: str
    responses: list[RecordedMessage] = field(default_factory=list)


def _renames(tools: list[dict[str, Any]]) -> dict[str, str]:
    names = exposed_names(tool_function(t) for t in tools)
    return {old: new for old, new in names.items() if old != new}


def _rename_call(call: ToolCall, renames: dict[str, str]) -> ToolCall:
    return ToolCall(renames.get(call.name, call.name), call.arguments)


def _group(turns: Sequence[RecordedMessage]) -> list[RecordedMessage | _Step]:
    """Turns with each assistant call turn and the tool turns after it merged into a step."""
    items: list[RecordedMessage | _Step] = []
    for turn in turns:
        if turn.role == "tool":
            last = items[-1] if items else None
            if not isinstance(last, _Step):
                raise TaskFormatError("a tool response that answers no call", field=turn.field)
            last.responses.append(turn)
        elif turn.role == "assistant" and turn.calls:
            items.append(_Step(turn, turn.content))
        else:
            items.append(turn)
    return items


def _paired(step: _Step) -> list[RecordedMessage | None]:
    """The response of each call of a step (None where the dataset recorded none)."""
    calls, responses = step.turn.calls, step.responses
    if not responses:
        return [None] * len(calls)
    ids = step.turn.call_ids
    if all(r.call_id for r in responses) and len(ids) == len(calls) and all(ids):
        by_id = {r.call_id: r for r in responses}
        unknown = [r for r in responses if r.call_id not in ids]
        if unknown:
            raise TaskFormatError(f"answers call id {unknown[0].call_id!r}, which no call has", field=unknown[0].field)
        return [by_id.get(i) for i in ids]
    if len(responses) != len(calls):
        raise TaskFormatError(
            f"{len(responses)} tool response(s) for {len(calls)} call(s), and no call ids to pair them by",
            field=responses[0].field,
        )
    return list(responses)


def _history(items: list[RecordedMessage | _Step], renames: dict[str, str]) -> list[dict[str, Any]]:
    """OpenAI-style messages of the prompt's turns (assistant calls with ids; tool messages naming them)."""
    messages: list[dict[str, Any]] = []
    for number, item in enumerate(items):
        if isinstance(item, RecordedMessage):
            messages.append({"role": item.role, "content": item.content})
            continue
        calls = [_rename_call(c, renames) for c in item.turn.calls]
        given = item.turn.call_ids
        ids = [(given[i] if i < len(given) else None) or f"call_h{number}_{i}" for i in range(len(calls))]
        messages.append(
            {
                "role": "assistant",
                "content": item.text,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for i, c in zip(ids, calls)
                ],
            }
        )
        for call_index, response in enumerate(_paired(item)):
            if response is not None:
                call = calls[call_index]
                messages.append(
                    {"role": "tool", "tool_call_id": ids[call_index], "name": call.name, "content": response.content}
                )
    return messages


def build_task(
    task_id: str,
    turns: Sequence[RecordedMessage],
    tools: list[dict[str, Any]],
    *,
    where: str = "conversation",
    metadata: dict[str, Any] | None = None,
) -> Task:
    """The task of a conversation (see the module docstring); ``where`` names the field it came from."""
    for turn in turns:
        if turn.role not in ROLES:
            raise TaskFormatError(f"role must be one of {', '.join(ROLES)}, got {turn.role!r}", field=turn.field)
    answers = [i for i, t in enumerate(turns) if t.role == "assistant"]
    replied = [i for i, t in enumerate(turns[: answers[-1]] if answers else []) if t.role == "user"]
    if not replied:
        raise TaskFormatError("no user turn has an assistant reply", field=where)
    cut = replied[-1] + 1
    last = max(i for i, t in enumerate(turns) if t.role in ("assistant", "tool"))
    reply = list(turns[cut : last + 1])
    stray = next((t for t in reply if t.role not in ("assistant", "tool")), None)
    if stray is not None:
        raise TaskFormatError(f"a {stray.role} turn inside the assistant's reply", field=stray.field)
    renames = _renames(tools)
    prompt = _history(_group(turns[:cut]), renames)

    steps: list[list[dict[str, Any]]] = []
    texts: list[str] = []
    fixtures: list[dict[str, Any]] = []
    pending: list[str] = []
    for item in _group(reply):
        if isinstance(item, RecordedMessage):
            if item.content.strip():
                pending.append(item.content.strip())
            continue
        calls = [_rename_call(c, renames) for c in item.turn.calls]
        steps.append([c.to_dict() for c in calls])
        texts.append("\n\n".join([*pending, item.text.strip()] if item.text.strip() else pending))
        pending = []
        for call, response in zip(calls, _paired(item)):
            if response is not None:
                fixtures.append({**call.to_dict(), "response": response.content})
    reference = "\n\n".join(pending) if pending else None
    if not steps and reference is None:
        raise TaskFormatError("the assistant's reply holds neither a call nor any text", field=reply[0].field or where)

    extra = dict(metadata or {})
    if fixtures:
        extra["fixtures"] = fixtures
    if any(texts):
        extra["step_texts"] = texts
    if renames:
        extra["tool_names"] = {new: old for old, new in renames.items()}
    data: dict[str, Any] = {
        "id": task_id,
        "messages": prompt,
        "tools": [_renamed_tool(t, renames) for t in tools],
        "gold_calls": steps,
        "reference_answer": reference,
        "metadata": extra,
    }
    return task_from_dict(data)


def _renamed_tool(tool: dict[str, Any], renames: dict[str, str]) -> dict[str, Any]:
    function = tool_function(tool)
    if function.get("name") not in renames:
        return tool
    return {**tool, "function": {**function, "name": renames[function["name"]]}}
