"""Our chat messages in the structured OpenAI shape that chat templates and APIs expect.

Inside the project an assistant turn may carry its calls as Hermes text (``<tool_call>`` blocks in
``content``, what the benchmark harnesses append) or as ``tool_calls``; tool results may lack the
id of the call they answer. Templates and APIs want ``tool_calls`` with ids, and every tool result
naming its call.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from slca_grpo.chat.parser import TOOL_CALL_OPEN, parse_tool_calls
from slca_grpo.chat.template import assistant_text
from slca_grpo.datatypes import ToolCall


def call_id(turn: int, index: int) -> str:
    """A call id of 9 letters and digits (the strictest templates, Mistral's, ask for exactly that)."""
    return f"c{turn % 1000:03d}{index % 100000:05d}"


def arguments_dict(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except ValueError:
            return raw  # left as a string: the parser reports it as bad arguments
    return raw if raw is not None else {}


def assistant_call_message(
    calls: Sequence[ToolCall | dict[str, Any]], *, turn: int, content: str = "", json_arguments: bool = False
) -> dict[str, Any]:
    """An assistant message making ``calls``, each with an id; arguments as a dict, or as a JSON
    string with ``json_arguments`` (the OpenAI wire format)."""
    items = []
    for index, call in enumerate(calls):
        data = call.to_dict() if isinstance(call, ToolCall) else dict(call.get("function", call))
        arguments = arguments_dict(data.get("arguments", {}))
        if json_arguments:
            arguments = arguments if isinstance(arguments, str) else json.dumps(arguments)
        items.append(
            {
                "id": call.get("id") if isinstance(call, dict) and call.get("id") else call_id(turn, index),
                "type": "function",
                "function": {"name": data["name"], "arguments": arguments},
            }
        )
    return {"role": "assistant", "content": content, "tool_calls": items}


def structured_messages(messages: Sequence[dict[str, Any]], *, json_arguments: bool = False) -> list[dict[str, Any]]:
    """``messages`` with every assistant call in ``tool_calls`` (Hermes text parsed out of
    ``content``) and every tool result carrying the id of the call it answers."""
    out: list[dict[str, Any]] = []
    pending_ids: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        content = message.get("content") or ""
        if role == "assistant":
            calls = list(message.get("tool_calls") or [])
            text = content
            if not calls and TOOL_CALL_OPEN in content:
                parsed = parse_tool_calls(content)
                calls = [c.to_dict() for c in parsed.calls]
                text = parsed.final_answer if calls else content
            if not calls:
                out.append({"role": "assistant", "content": text})
                continue
            item = assistant_call_message(calls, turn=index, content=text, json_arguments=json_arguments)
            pending_ids = [c["id"] for c in item["tool_calls"]]
            out.append(item)
        elif role == "tool":
            tool_call_id = message.get("tool_call_id") or (pending_ids.pop(0) if pending_ids else call_id(index, 0))
            out.append({"role": "tool", "tool_call_id": tool_call_id, "content": content})
        else:
            out.append({"role": role, "content": content})
    return out


def flat_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """``messages`` as role and content only, one plain type for every row of a dataset (verl's
    parquet, TRL's ``prompt`` column): calls made earlier in the conversation become Hermes
    ``<tool_call>`` text. The rollouts render the task's own messages, calls structured."""
    flat = []
    for message in messages:
        content = "" if message.get("content") is None else str(message.get("content"))
        calls = [call.get("function", call) for call in message.get("tool_calls") or []]
        if calls:
            content = assistant_text(content, calls)
        flat.append({"role": str(message["role"]), "content": content})
    return flat
