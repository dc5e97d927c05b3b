"""Tool-call syntaxes of models' own chat templates, read into the Hermes view.

Everything downstream of a rollout (rewards, metrics, the benchmark harnesses) reads tool calls in
one form: Hermes ``<tool_call>`` blocks (:mod:`slca_grpo.chat.parser`). A model with its own chat
template writes calls in its own syntax; each syntax here rewrites a turn's text into that form
(calls become blocks, prose stays as it is) and never raises. A body that does not parse is kept
as it was written, so the parser reports it as ``bad_json`` like any other malformed call.

The names are those of vLLM's tool parsers, so a model's usual setting carries over:

- ``hermes``: ``<tool_call>{json}</tool_call>`` blocks (Qwen2.5, Qwen3, Hermes, our Hermes format);
- ``llama3_json``: the turn is a JSON object ``{"name", "parameters"}`` (Llama 3.1-3.3), optionally
  after ``<|python_tag|>``, several joined by ``;``;
- ``mistral``: ``[TOOL_CALLS]`` followed by a JSON list of calls (Mistral / Mixtral templates);
- ``pythonic``: the turn is a Python-style list of calls, ``[get_weather(city="Oslo")]`` (Llama 4,
  ToolACE); read with :mod:`ast` into literals, never evaluated.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from typing import Any

from slca_grpo.chat.parser import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from slca_grpo.chat.template import RESERVED_TAGS

PYTHON_TAG = "<|python_tag|>"
MISTRAL_TOOL_CALLS = "[TOOL_CALLS]"
MAX_PYTHONIC_CHARS = 100_000  # longer turns are not parsed as code (ast's time and memory grow with it)


def _block(body: str) -> str:
    return f"{TOOL_CALL_OPEN}\n{body}\n{TOOL_CALL_CLOSE}"


def _escape(body: str) -> str:
    """A body can never open or close a block of its own (``<`` of a reserved tag escaped)."""
    for tag in RESERVED_TAGS:
        body = body.replace("<" + tag, "\\u003c" + tag)
    return body


def _json_body(value: Any) -> str:
    return _escape(json.dumps(value, ensure_ascii=False))


def _json_values(text: str) -> tuple[list[Any], str]:
    """Consecutive JSON values separated by ``;``/``,``/space, and the text left unread."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    position = 0
    while True:
        while position < len(text) and text[position] in " \t\r\n;,":
            position += 1
        if position >= len(text):
            return values, ""
        try:
            value, end = decoder.raw_decode(text, position)
        except (ValueError, RecursionError):
            return values, text[position:]
        values.append(value)
        position = end


def hermes_view(text: str) -> str:
    return text


def llama3_json_view(text: str) -> str:
    """``{"name": ..., "parameters": {...}}`` (after an optional ``<|python_tag|>``), or several
    joined by ``;``: one block each; anything left that does not parse is one bad block."""
    stripped = text.strip()
    if stripped.startswith(PYTHON_TAG):
        stripped = stripped[len(PYTHON_TAG) :].strip()
    elif not stripped.startswith("{"):
        return text
    values, rest = _json_values(stripped)
    blocks = [_block(_json_body(value)) for value in values]
    if rest.strip():
        blocks.append(_block(_escape(rest.strip())))
    return "\n".join(blocks)


def mistral_view(text: str) -> str:
    """Prose, then ``[TOOL_CALLS]`` and a JSON list of calls: the prose and one block per call."""
    marker = text.find(MISTRAL_TOOL_CALLS)
    if marker < 0:
        return text
    prose = text[:marker].strip()
    values, rest = _json_values(text[marker + len(MISTRAL_TOOL_CALLS) :])
    calls = [item for value in values for item in (value if isinstance(value, list) else [value])]
    blocks = [_block(_json_body(call)) for call in calls]
    if rest.strip() or not values:
        blocks.append(_block(_escape(rest.strip())))
    return "\n".join([prose, *blocks] if prose else blocks)


class _NotLiteral(ValueError):
    pass


def _dotted_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted_name(node.value)}.{node.attr}"
    raise _NotLiteral("a call must name a function")


def _pythonic_call(node: ast.expr) -> dict[str, Any]:
    if not isinstance(node, ast.Call):
        raise _NotLiteral("not a call")
    if node.args:
        raise _NotLiteral("positional arguments")
    arguments = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise _NotLiteral("**kwargs")
        try:
            arguments[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise _NotLiteral(f"argument {keyword.arg} is not a literal") from None
    return {"name": _dotted_name(node.func), "arguments": arguments}


_PYTHONIC_START = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\(")


def _pythonic_blocks(code: str) -> list[str] | None:
    """One block per call of a ``[f(a=1), ...]`` list; None when ``code`` is not such a list."""
    if len(code) > MAX_PYTHONIC_CHARS:
        return None
    try:
        tree = ast.parse(code, mode="eval")
        if not isinstance(tree.body, ast.List):
            raise _NotLiteral("not a list")
        calls = [_pythonic_call(item) for item in tree.body.elts]
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    blocks = []
    for call in calls:
        try:
            blocks.append(_block(_json_body(call)))
        except (TypeError, ValueError):  # literals JSON cannot hold (sets, bytes, complex)
            blocks.append(_block(_escape(repr(call))))
    return blocks or None


def pythonic_view(text: str) -> str:
    """``[f(a=1), g(b="x")]``, the whole turn or after some prose: one block per call, the
    arguments as literals. A turn that starts like a call list but is not one (positional
    arguments, expressions, cut off) is one bad block; prose that merely mentions one stays prose."""
    stripped = text.strip()
    found = _PYTHONIC_START.search(stripped)
    if found is None:
        return text  # prose, or a list that is not calls ("[1] see the note")
    prose, code = stripped[: found.start()].strip(), stripped[found.start() :]
    blocks = _pythonic_blocks(code) if code.endswith("]") else None
    if blocks is None:
        return _block(_escape(stripped)) if not prose else text
    return "\n".join([prose, *blocks] if prose else blocks)


TOOL_SYNTAXES: dict[str, Callable[[str], str]] = {
    "hermes": hermes_view,
    "llama3_json": llama3_json_view,
    "mistral": mistral_view,
    "pythonic": pythonic_view,
}


# The settings that choose a chat format and a call syntax (``model.chat_format``, ``model.tool_parser``).
CHAT_FORMATS = ("auto", "hermes", "native")
TOOL_PARSERS = ("auto", *TOOL_SYNTAXES)


def to_hermes(text: str, syntax: str) -> str:
    """``text`` in the Hermes view, for a turn written in ``syntax`` (a key of ``TOOL_SYNTAXES``)."""
    try:
        view = TOOL_SYNTAXES[syntax]
    except KeyError:
        raise ValueError(f"unknown tool-call syntax {syntax!r}; known: {', '.join(TOOL_SYNTAXES)}") from None
    return view(text)
