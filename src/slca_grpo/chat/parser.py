"""Tool-call parsing for the Hermes/Qwen2.5 wire format.

The parser never raises on model output: every problem (bad JSON, unknown tool, malformed
arguments, unbalanced tags) is reported as a value. It scans with ``str.find`` so its time is
linear in the text length, whatever the text holds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from enum import Enum
from typing import Any

from slca_grpo.datatypes import ToolCall

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
TOOL_RESPONSE_OPEN = "<tool_response>"
TOOL_RESPONSE_CLOSE = "</tool_response>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
ASSISTANT_HEADER = "<|im_start|>assistant\n"  # where an assistant turn starts in a ChatML text

# Chat-template markers (ChatML and friends) that can sit in a decoded multi-turn response.
_TEMPLATE_MARKER = re.compile(r"<\|im_start\|>(?:system|user|assistant|tool)?\n?|<\|[a-z_]{1,32}\|>")


class BlockStatus(str, Enum):
    VALID = "valid"
    BAD_JSON = "bad_json"  # the body is not JSON
    BAD_STRUCTURE = "bad_structure"  # JSON, but not a call object (or list of them) with a string name
    UNKNOWN_TOOL = "unknown_tool"  # a well-formed call to a tool that is not offered
    BAD_ARGUMENTS = "bad_arguments"  # arguments are neither an object nor a JSON string of one


@dataclass(frozen=True)
class ToolCallBlock:
    """One ``<tool_call>…</tool_call>`` block: its raw body, status and the calls it holds.

    ``calls`` holds every well-formed call of the block, so an ``unknown_tool`` block still says
    which tool was asked for; only ``valid`` blocks contribute to ``ParsedResponse.calls``.
    """

    body: str
    status: BlockStatus
    calls: tuple[ToolCall, ...] = ()
    error: str | None = None

    @property
    def is_valid(self) -> bool:
        return self.status is BlockStatus.VALID

    @property
    def is_executable(self) -> bool:
        """Its calls can be sent on: valid, or well-formed calls to tools that are not offered
        (the tool side answers those with its own error)."""
        return self.status in (BlockStatus.VALID, BlockStatus.UNKNOWN_TOOL)


@dataclass(frozen=True)
class ParsedResponse:
    """Everything the rewards and the agent loop need to know about one response text."""

    text: str  # the response with <think> blocks removed
    blocks: tuple[ToolCallBlock, ...] = ()
    n_open: int = 0
    n_close: int = 0
    final_answer: str = ""
    tool_responses: tuple[str, ...] = ()

    @property
    def valid_blocks(self) -> tuple[ToolCallBlock, ...]:
        return tuple(b for b in self.blocks if b.is_valid)

    @property
    def calls(self) -> list[ToolCall]:
        """Calls of the valid blocks, in order."""
        return [c for b in self.blocks if b.is_valid for c in b.calls]

    @property
    def has_tool_call(self) -> bool:
        """Whether the response holds any ``<tool_call>`` tag at all (the HierR omission gate)."""
        return self.n_open > 0

    @property
    def format_score(self) -> float:
        """Valid blocks over max(open, close) tags; 0 when there are no tags (docs/method.md §4 ``fmt``)."""
        denominator = max(self.n_open, self.n_close)
        return len(self.valid_blocks) / denominator if denominator else 0.0


def strip_think(text: str) -> str:
    """Remove reasoning: closed ``<think>`` blocks, a prefix ending in a stray ``</think>`` (the
    template may open the block in the prompt), and an unterminated ``<think>`` to the end."""
    pieces: list[str] = []
    position = 0
    while True:
        start = text.find(THINK_OPEN, position)
        if start < 0:
            pieces.append(text[position:])
            break
        end = text.find(THINK_CLOSE, start + len(THINK_OPEN))
        pieces.append(text[position:start])
        if end < 0:
            position = len(text)  # unterminated: the rest is reasoning
            break
        position = end + len(THINK_CLOSE)
    result = "".join(pieces)
    stray_close = result.rfind(THINK_CLOSE)
    if stray_close >= 0:
        result = result[stray_close + len(THINK_CLOSE) :]
    return result


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _decode_json(body: str) -> tuple[Any, str | None]:
    # NaN/Infinity are refused: echoed into a tool response they would make it invalid JSON.
    try:
        return json.loads(body, parse_constant=_not_json), None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, int-digit limit, deep nesting, NaN
        return None, f"invalid JSON: {str(exc)[:200]}"


def _parse_call(item: Any) -> tuple[ToolCall | None, BlockStatus, str | None]:
    if not isinstance(item, dict):
        return None, BlockStatus.BAD_STRUCTURE, f"a call must be a JSON object, got {type(item).__name__}"
    name = item.get("name")
    if not isinstance(name, str) or not name.strip():
        return None, BlockStatus.BAD_STRUCTURE, "a call needs a non-empty string 'name'"
    if "arguments" in item:
        arguments = item["arguments"]
    else:
        arguments = item.get("parameters", {})
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str):
        # Some models (and OpenAI's wire format) send arguments as a JSON-encoded string.
        decoded, error = _decode_json(arguments) if arguments.strip() else ({}, None)
        if error is not None:
            return None, BlockStatus.BAD_ARGUMENTS, f"arguments string of '{name}' is not JSON"
        arguments = decoded
    if not isinstance(arguments, dict):
        return None, BlockStatus.BAD_ARGUMENTS, f"arguments of '{name}' must be an object"
    return ToolCall(name=name.strip(), arguments=arguments), BlockStatus.VALID, None


def parse_block(body: str, allowed_tools: Collection[str] | None = None) -> ToolCallBlock:
    """Parse the body of one ``<tool_call>`` block (one call or a JSON list of parallel calls)."""
    data, error = _decode_json(body.strip())
    if error is not None:
        return ToolCallBlock(body=body, status=BlockStatus.BAD_JSON, error=error)
    items = data if isinstance(data, list) else [data]
    if not items:
        return ToolCallBlock(body=body, status=BlockStatus.BAD_STRUCTURE, error="empty list of calls")
    calls: list[ToolCall] = []
    for item in items:
        call, status, problem = _parse_call(item)
        if call is None:
            return ToolCallBlock(body=body, status=status, calls=tuple(calls), error=problem)
        calls.append(call)
    if allowed_tools is not None:
        unknown = [c.name for c in calls if c.name not in allowed_tools]
        if unknown:
            return ToolCallBlock(
                body=body,
                status=BlockStatus.UNKNOWN_TOOL,
                calls=tuple(calls),
                error=f"unknown tool(s): {', '.join(sorted(set(unknown)))}",
            )
    return ToolCallBlock(body=body, status=BlockStatus.VALID, calls=tuple(calls))


def _closed_blocks(text: str, open_tag: str = TOOL_CALL_OPEN, close_tag: str = TOOL_CALL_CLOSE) -> list[str]:
    """Bodies of closed blocks; with nested opens, a block starts at the last open before its close."""
    bodies: list[str] = []
    position = 0
    while True:
        close = text.find(close_tag, position)
        if close < 0:
            break
        start = text.rfind(open_tag, position, close)
        if start >= 0:
            bodies.append(text[start + len(open_tag) : close])
        position = close + len(close_tag)
    return bodies


def strip_tool_call_blocks(text: str, open_tag: str = TOOL_CALL_OPEN, close_tag: str = TOOL_CALL_CLOSE) -> str:
    """The prose of a response: the text outside closed ``<tool_call>`` blocks (or blocks of the
    given tags), stripped. One pass: linear in the text's length."""
    pieces: list[str] = []
    position = 0
    while True:
        start = text.find(open_tag, position)
        end = text.find(close_tag, start + len(open_tag)) if start >= 0 else -1
        if start < 0 or end < 0:
            pieces.append(text[position:])
            break
        pieces.append(text[position:start])
        position = end + len(close_tag)
    return "".join(pieces).strip()


def clean_answer(text: str) -> str:
    """Drop chat-template markers and stray tags from an answer, collapse surrounding space."""
    text = _TEMPLATE_MARKER.sub("", text)
    for tag in (TOOL_CALL_OPEN, TOOL_CALL_CLOSE, TOOL_RESPONSE_OPEN, TOOL_RESPONSE_CLOSE):
        text = text.replace(tag, "")
    return text.strip()


def _final_answer(text: str) -> str:
    """Text after the last ``</tool_response>`` or ``</tool_call>`` (whichever is later), else the
    whole text, and within it after the last assistant header (a user turn after the tool results,
    such as the agent loop's request for a final answer, is not the answer); an unterminated
    ``<tool_call>`` and what follows it is not part of the answer."""
    anchor = 0
    for tag in (TOOL_RESPONSE_CLOSE, TOOL_CALL_CLOSE):
        found = text.rfind(tag)
        if found >= 0:
            anchor = max(anchor, found + len(tag))
    header = text.rfind(ASSISTANT_HEADER, anchor)
    if header >= 0:
        anchor = header + len(ASSISTANT_HEADER)
    tail = text[anchor:]
    dangling = tail.find(TOOL_CALL_OPEN)
    return clean_answer(tail if dangling < 0 else tail[:dangling])


def is_call_turn(text: str) -> bool:
    """Whether an assistant turn's text (Hermes view) holds a tool call: any ``<tool_call>`` or
    ``</tool_call>`` tag outside reasoning, so a malformed or cut-off call counts. A turn without one
    is an answer. This is what makes a run of tokens a tool segment or the summary segment."""
    text = strip_think(text)
    return TOOL_CALL_OPEN in text or TOOL_CALL_CLOSE in text


def last_turn_text(response_text: str) -> str:
    """The last assistant turn of a whole multi-turn response, when its turn boundaries are not
    known: everything after the last ``</tool_response>`` (the whole text if there is none)."""
    cut = response_text.rfind(TOOL_RESPONSE_CLOSE)
    return response_text if cut < 0 else response_text[cut + len(TOOL_RESPONSE_CLOSE) :]


def parse_tool_calls(text: Any, allowed_tools: Collection[str] | None = None) -> ParsedResponse:
    """Parse a response: every ``<tool_call>`` block with its status, tag counts and final answer.

    ``allowed_tools`` (tool names) marks calls to other tools ``unknown_tool``; ``None`` accepts any
    name. Never raises: bytes are decoded as UTF-8 (invalid bytes replaced), ``None`` is empty and
    anything else is taken in its string form.
    """
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    elif not isinstance(text, str):
        text = "" if text is None else str(text)
    text = strip_think(text)
    allowed = frozenset(allowed_tools) if allowed_tools is not None else None
    bodies = _closed_blocks(text)
    return ParsedResponse(
        text=text,
        blocks=tuple(parse_block(body, allowed) for body in bodies),
        n_open=text.count(TOOL_CALL_OPEN),
        n_close=text.count(TOOL_CALL_CLOSE),
        final_answer=_final_answer(text),
        tool_responses=tuple(body.strip() for body in _closed_blocks(text, TOOL_RESPONSE_OPEN, TOOL_RESPONSE_CLOSE)),
    )
