"""ToolACE rows: ``system`` (its tools as a JSON list inside the text) and ``conversations``.

Assistant calls are Python call syntax, ``[Market Trends API(trend_type="MOVERS", country="us")]``.
They are read with :mod:`ast` (the tree, never evaluated): each element must be a call of a listed
tool with keyword arguments whose values are literals (``true``/``false``/``null`` accepted as
JSON spells them). Tool names with spaces are not Python names, so each listed name is swapped
for a placeholder before parsing. A ``tool`` turn holds a JSON list with one result per call.
The parameter types are BFCL's (``dict``, ``float``...), converted as BFCL docs are. The system
text itself, an instruction to answer in that Python syntax, is dropped: the chat template states
the Hermes format instead.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from slca_grpo.data.bfcl.convert import convert_parameters
from slca_grpo.data.formats.conversation import RecordedMessage, build_task
from slca_grpo.data.formats.fields import MAX_LITERAL_CHARS, openai_tool, require
from slca_grpo.data.formats.sharegpt import turn_text
from slca_grpo.data.tasks import TaskFormatError
from slca_grpo.datatypes import Task, ToolCall

_JSON_NAMES = {"true": True, "false": False, "null": None, "none": None}
_PLACEHOLDER = "__slca_tool_{}__"


def detect(row: dict[str, Any]) -> bool:
    system = row.get("system")
    return (
        isinstance(system, str)
        and "<tools>" not in system
        and isinstance(row.get("conversations"), list)
        and "tools" not in row
    )


def tools_in_text(text: str, field: str) -> list[dict[str, Any]]:
    """The first JSON list of objects with a ``name`` found in ``text``."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\[\s*\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except (ValueError, RecursionError):
            continue
        if isinstance(value, list) and value and all(isinstance(v, dict) and "name" in v for v in value):
            return [openai_tool(t, f"{field}.tools[{i}]", convert_parameters) for i, t in enumerate(value)]
    return []


def _value(node: ast.expr, field: str) -> Any:
    if isinstance(node, ast.Name) and node.id.lower() in _JSON_NAMES:
        return _JSON_NAMES[node.id.lower()]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [_value(item, field) for item in node.elts]
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise TaskFormatError("a ** inside a dict argument", field=field)
        return {str(_value(k, field)): _value(v, field) for k, v in zip(node.keys, node.values)}
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        raise TaskFormatError(
            f"an argument value that is not a literal: {ast.unparse(node)[:80]!r}", field=field
        ) from None


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def parse_python_calls(text: str, tool_names: list[str], field: str) -> list[ToolCall] | None:
    """The calls of ``[f(a=1), g(b="x")]``; None when ``text`` does not start with a listed tool call."""
    names = sorted(set(tool_names), key=len, reverse=True)
    if not names:
        return None
    pattern = re.compile(r"(?<![\w.])(" + "|".join(re.escape(n) for n in names) + r")\s*\(")
    stripped = text.strip()
    head = re.match(r"\[\s*", stripped)
    if not (stripped.endswith("]") and head and pattern.match(stripped, head.end())):
        return None
    if len(stripped) > MAX_LITERAL_CHARS:
        raise TaskFormatError(f"a call list over {MAX_LITERAL_CHARS} characters", field=field)
    placeholders = {_PLACEHOLDER.format(i): name for i, name in enumerate(names)}
    swapped = pattern.sub(lambda m: _PLACEHOLDER.format(names.index(m.group(1))) + "(", stripped)
    try:
        tree = ast.parse(swapped, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise TaskFormatError(f"not a parsable call list: {stripped[:80]!r}", field=field) from None
    if not isinstance(tree, ast.List):
        raise TaskFormatError("a call list must be [call, ...]", field=field)
    calls = []
    for index, node in enumerate(tree.elts):
        where = f"{field}[{index}]"
        name = _dotted(node.func) if isinstance(node, ast.Call) else None
        if name is None:
            raise TaskFormatError("each element must be a call of a named function", field=where)
        if node.args or any(k.arg is None for k in node.keywords):
            raise TaskFormatError("calls take keyword arguments only", field=where)
        arguments = {k.arg: _value(k.value, f"{where}.{k.arg}") for k in node.keywords}
        calls.append(ToolCall(placeholders.get(name, name), arguments))
    return calls


def _results(value: str, calls: int, where: str) -> list[RecordedMessage]:
    """A tool turn: one result per call when it is a JSON list of that length, else one result."""
    try:
        results = json.loads(value)
    except (ValueError, RecursionError):
        results = None
    if calls > 1 and isinstance(results, list) and len(results) == calls:
        return [RecordedMessage("tool", json.dumps(r, ensure_ascii=False), field=where) for r in results]
    if calls == 1 and isinstance(results, list) and len(results) == 1:
        return [RecordedMessage("tool", json.dumps(results[0], ensure_ascii=False), field=where)]
    return [RecordedMessage("tool", value, field=where)]


def convert(row: dict[str, Any], task_id: str) -> Task:
    system = require(row, "system", str)
    tools = tools_in_text(system, "system")
    names = [t["function"]["name"] for t in tools]
    turns: list[RecordedMessage] = []
    calls_in_step = 0
    for index, raw in enumerate(require(row, "conversations", list)):
        where = f"conversations[{index}]"
        if not isinstance(raw, dict):
            raise TaskFormatError(f"a turn must be an object, got {type(raw).__name__}", field=where)
        role, value = turn_text(raw, where)
        if role == "assistant":
            calls = parse_python_calls(value, names, f"{where}.value")
            turns.append(RecordedMessage("assistant", "" if calls else value, calls=calls or [], field=where))
            calls_in_step = len(calls or [])
        elif role == "tool":
            turns.extend(_results(value, calls_in_step, where))
        elif role == "system":
            continue
        else:
            turns.append(RecordedMessage(role, value, field=where))
    return build_task(task_id, turns, tools, where="conversations")
