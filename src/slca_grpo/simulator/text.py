"""Text utilities: token counting, middle truncation, and JSON recovery from model replies."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

TokenCounter = Callable[[str], int]

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_WRAPPER_TAGS = re.compile(r"</?(tool_response|response|tool_result|output|json)>", re.IGNORECASE)
_MAX_JSON_STARTS = 64  # bounds the scan on long replies full of braces
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)


def approx_token_count(text: str) -> int:
    """About four characters per token, the usual rule of thumb for English and JSON."""
    return (len(text) + 3) // 4


def truncate_middle_to_tokens(
    text: str, max_tokens: int | None, count_tokens: TokenCounter = approx_token_count
) -> str:
    """Keep the head and tail of ``text`` within ``max_tokens``, with a marker where the middle was.

    Binary search on the number of characters kept, so any monotone counter works (a real
    tokenizer's length included) with O(log n) calls to it.
    """
    if max_tokens is None or count_tokens(text) <= max_tokens:
        return text

    def build(keep: int) -> str:
        head = (keep + 1) // 2
        tail = keep - head
        omitted = len(text) - keep
        marker = f"\n...[truncated {omitted} characters]...\n"
        return text[:head] + marker + (text[len(text) - tail :] if tail else "")

    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if count_tokens(build(mid)) <= max_tokens:
            low = mid
        else:
            high = mid - 1
    return build(low)


def strip_wrappers(text: str) -> str:
    """Remove reasoning blocks, code fences and tool-response tags a model may wrap JSON in."""
    text = _THINK_BLOCK.sub("", text)
    lowered = text.lower()
    if "</think>" in lowered:  # an opening tag the template swallowed: keep what follows
        text = text[lowered.rindex("</think>") + len("</think>") :]
    text = _WRAPPER_TAGS.sub("", text)
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1)
    return text.strip()


def extract_json(text: str) -> tuple[Any, str | None]:
    """The JSON value in a model reply, or ``(None, reason)`` when there is none."""
    cleaned = strip_wrappers(text)
    if not cleaned:
        return None, "the reply is empty"
    try:
        return json.loads(cleaned), None
    except json.JSONDecodeError as exc:
        first_error = f"the reply is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    decoder = json.JSONDecoder()
    starts = [i for i, char in enumerate(cleaned) if char in "{["][:_MAX_JSON_STARTS]
    for index in starts:
        try:
            value, _ = decoder.raw_decode(cleaned, index)
        except json.JSONDecodeError:
            continue
        return value, None
    return None, first_error
