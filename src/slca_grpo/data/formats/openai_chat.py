"""OpenAI chat rows: ``messages`` (with assistant ``tool_calls``) and ``tools``, as lists or JSON strings.

Assistant calls are ``{"id", "type": "function", "function": {"name", "arguments"}}`` (arguments
a JSON string or an object; the flat ``{"name", "arguments"}`` form works too); tool messages
answer them by ``tool_call_id``. The legacy ``function_call`` / ``role: "function"`` pair and the
``functions`` list are read as well; ``developer`` is a system turn. Content given as a list of
parts keeps its text parts. Our own SFT files (``slca data convert --to sft.jsonl``) are rows of
this format, so they read back as tasks.
"""

from __future__ import annotations

from typing import Any

from slca_grpo.data.formats.conversation import RecordedMessage, build_task
from slca_grpo.data.formats.fields import call_arguments, json_field, named_function, require, tool_list
from slca_grpo.data.tasks import TaskFormatError
from slca_grpo.datatypes import Task, ToolCall

_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


def detect(row: dict[str, Any]) -> bool:
    return "messages" in row and "gold_calls" not in row


def _content(value: Any, field: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(p.get("text", "") for p in value if isinstance(p, dict) and isinstance(p.get("text"), str))
    raise TaskFormatError(f"content must be a string or a list of parts, got {type(value).__name__}", field=field)


def _call(raw: Any, field: str) -> tuple[ToolCall, str | None]:
    function, name = named_function(raw, field, "a tool call")
    call_id = raw.get("id")
    arguments = call_arguments(function.get("arguments"), f"{field}.arguments")
    return ToolCall(name, arguments), call_id if isinstance(call_id, str) and call_id else None


def read_messages(messages: list[Any], field: str = "messages") -> list[RecordedMessage]:
    turns: list[RecordedMessage] = []
    for index, message in enumerate(messages):
        where = f"{field}[{index}]"
        if not isinstance(message, dict):
            raise TaskFormatError(f"a message must be an object, got {type(message).__name__}", field=where)
        role = message.get("role")
        content = _content(message.get("content"), f"{where}.content")
        if role == "function":  # the legacy reply to a function_call
            turns.append(RecordedMessage("tool", content, field=where))
            continue
        if not isinstance(role, str) or role not in _ROLES:
            raise TaskFormatError(f"role must be one of {', '.join([*_ROLES, 'function'])}, got {role!r}", field=where)
        tool_calls = message.get("tool_calls") or []
        if not isinstance(tool_calls, list):
            raise TaskFormatError(
                f"must be a list of calls, got {type(tool_calls).__name__}", field=f"{where}.tool_calls"
            )
        raw_calls = list(tool_calls)
        if isinstance(message.get("function_call"), dict):
            raw_calls.append(message["function_call"])
        if raw_calls and role != "assistant":
            raise TaskFormatError(f"a {role} message with tool calls", field=where)
        pairs = [_call(raw, f"{where}.tool_calls[{i}]") for i, raw in enumerate(raw_calls)]
        call_id = message.get("tool_call_id")
        turns.append(
            RecordedMessage(
                _ROLES[role],
                content,
                calls=[p[0] for p in pairs],
                call_ids=[p[1] for p in pairs],
                call_id=call_id if isinstance(call_id, str) and call_id else None,
                field=where,
            )
        )
    return turns


def convert(row: dict[str, Any], task_id: str) -> Task:
    messages = json_field(require(row, "messages", (list, str)), "messages", list)
    tools_key = "tools" if row.get("tools") not in (None, "") else "functions"
    tools = tool_list(row.get(tools_key), tools_key)
    metadata = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
    return build_task(task_id, read_messages(messages), tools, where="messages", metadata=dict(metadata))
