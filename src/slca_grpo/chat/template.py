"""Rendering of the Hermes/Qwen2.5 tool-calling chat format (ChatML turns).

Used for models without a chat template of their own (our tiny models) and as the reference
format in tests; models that ship a template render through ``tokenizer.apply_chat_template``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from slca_grpo.chat.parser import (
    ASSISTANT_HEADER,
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    TOOL_RESPONSE_CLOSE,
    TOOL_RESPONSE_OPEN,
)
from slca_grpo.datatypes import ToolCall

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
DEFAULT_SYSTEM = "You are a helpful assistant."

TOOLS_PREAMBLE = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
TOOLS_POSTAMBLE = (
    "</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)


RESERVED_TAGS = ("tool_call>", "/tool_call>", "tool_response>", "/tool_response>", "think>", "/think>")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _dumps_call(value: Any) -> str:
    """JSON for a call, with reserved tags inside strings escaped (``<`` as ``\\u003c``) so that an
    argument value can never open or close a block when the text is parsed back."""
    text = _dumps(value)
    if "<" in text:
        for tag in RESERVED_TAGS:
            text = text.replace("<" + tag, "\\u003c" + tag)
    return text


def render_tools_system_prompt(tools: Sequence[dict[str, Any]], system: str | None = None) -> str:
    """The system turn's content: the system text followed by the ``<tools>`` block."""
    head = system if system else DEFAULT_SYSTEM
    if not tools:
        return head
    listing = "".join("\n" + _dumps(tool) for tool in tools)
    return f"{head}\n\n{TOOLS_PREAMBLE}{listing}\n{TOOLS_POSTAMBLE}"


def render_tool_calls(calls: Iterable[ToolCall | dict[str, Any]]) -> str:
    """Assistant text for one step of calls: a single ``<tool_call>`` block holding the call, or a
    JSON list of parallel calls (the form HierR's ``parallel`` component scores)."""
    items: list[dict[str, Any]] = []
    for call in calls:
        if isinstance(call, ToolCall):
            items.append(call.to_dict())
            continue
        arguments = call.get("arguments", {})
        if isinstance(arguments, str):  # OpenAI messages carry arguments as a JSON string
            arguments = json.loads(arguments) if arguments.strip() else {}
        items.append({"name": call["name"], "arguments": arguments})
    if not items:
        return ""
    payload: Any = items[0] if len(items) == 1 else items
    return f"{TOOL_CALL_OPEN}\n{_dumps_call(payload)}\n{TOOL_CALL_CLOSE}"


def assistant_text(content: str, calls: Iterable[ToolCall | dict[str, Any]]) -> str:
    """An assistant turn's text: what it says, then its block of calls (either may be empty)."""
    return "\n".join(part for part in (content, render_tool_calls(calls)) if part)


def render_tool_response(content: str) -> str:
    return f"{TOOL_RESPONSE_OPEN}\n{content}\n{TOOL_RESPONSE_CLOSE}"


def render_turn(role: str, content: str) -> str:
    return f"{IM_START}{role}\n{content}{IM_END}\n"


def tool_results_turn(observations: Sequence[str]) -> str:
    """The user-side turn that carries tool results (Qwen2.5 groups consecutive results)."""
    return render_turn("user", "\n".join(render_tool_response(text) for text in observations))


def generation_prompt() -> str:
    return ASSISTANT_HEADER


def render_chat(
    messages: Sequence[dict[str, Any]],
    tools: Sequence[dict[str, Any]] = (),
    *,
    add_generation_prompt: bool = True,
) -> str:
    """Render messages in ChatML with tools in the system turn.

    Messages use OpenAI roles: ``system``, ``user``, ``assistant`` (optional ``tool_calls`` of
    ``{"name", "arguments"}`` or ``{"function": {...}}``) and ``tool`` (consecutive tool messages
    share one user turn, as Qwen2.5's template does).
    """
    out: list[str] = []
    rest = list(messages)
    system = None
    if rest and rest[0].get("role") == "system":
        system = str(rest.pop(0).get("content") or "")
    out.append(render_turn("system", render_tools_system_prompt(tools, system)))
    pending_results: list[str] = []
    for message in rest:
        role = message.get("role")
        content = "" if message.get("content") is None else str(message.get("content"))
        if role == "tool":
            pending_results.append(content)
            continue
        if pending_results:
            out.append(tool_results_turn(pending_results))
            pending_results = []
        if role == "assistant":
            calls = [c.get("function", c) for c in message.get("tool_calls") or []]
            out.append(render_turn("assistant", assistant_text(content, calls)))
        else:
            out.append(render_turn(str(role), content))
    if pending_results:
        out.append(tool_results_turn(pending_results))
    if add_generation_prompt:
        out.append(generation_prompt())
    return "".join(out)
