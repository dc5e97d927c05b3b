"""Reading a row's fields: typed access, JSON-or-value fields, Python-literal text, tool schemas.

Every problem raises :class:`~slca_grpo.data.tasks.TaskFormatError` naming the field. Nothing
here evaluates dataset text: Python-style literals go through :func:`ast.literal_eval`, which
builds constants and containers only.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from typing import Any

from slca_grpo.data.tasks import TaskFormatError

# Longer literal text is refused before parsing: ast builds a tree several times the text's size.
MAX_LITERAL_CHARS = 1_000_000

_TYPE_NAMES = {dict: "an object", list: "a list", str: "a string", int: "an integer", bool: "a boolean"}


def kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)


def require(row: dict[str, Any], key: str, kind: type | tuple[type, ...], *, prefix: str = "") -> Any:
    """``row[key]``, which must exist and be of ``kind``."""
    field = f"{prefix}{key}"
    if key not in row or row[key] is None:
        raise TaskFormatError("missing", field=field)
    value = row[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise TaskFormatError(f"must be {kind_name(kind)}, got {type(value).__name__}", field=field)
    return value


def json_field(value: Any, field: str, kind: type | tuple[type, ...] | None = None) -> Any:
    """A field that holds a value or a JSON string of it (datasets store both)."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else None
        except (ValueError, RecursionError) as exc:
            raise TaskFormatError(f"not valid JSON ({str(exc)[:120]})", field=field) from None
    if kind is not None and not isinstance(value, kind):
        raise TaskFormatError(f"must be {kind_name(kind)}, got {type(value).__name__}", field=field)
    return value


def literal(text: str, field: str) -> Any:
    """JSON text, or a Python literal (single quotes, True/None) as some datasets write it."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    if len(text) > MAX_LITERAL_CHARS:
        raise TaskFormatError(f"neither JSON nor a Python literal under {MAX_LITERAL_CHARS} characters", field=field)
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise TaskFormatError(f"neither JSON nor a Python literal: {text.strip()[:80]!r}", field=field) from None


def json_values(text: str) -> list[Any]:
    """Every JSON value written one after another in ``text`` (Hermes lists tools one per line)."""
    decoder = json.JSONDecoder()
    values, position = [], 0
    while True:
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
        if position >= len(text):
            return values
        value, position = decoder.raw_decode(text, position)
        values.append(value)


def call_arguments(value: Any, field: str) -> dict[str, Any]:
    """Call arguments given as an object, a JSON string of one, or nothing."""
    if value is None:
        return {}
    if isinstance(value, str):
        value = literal(value, field) if value.strip() else {}
    if not isinstance(value, dict):
        raise TaskFormatError(f"arguments must be an object, got {type(value).__name__}", field=field)
    return value


def named_function(raw: Any, field: str, what: str) -> tuple[dict[str, Any], str]:
    """The ``function`` part of a wrapped tool or call (or the object itself), and its name."""
    if not isinstance(raw, dict):
        raise TaskFormatError(f"{what} must be an object, got {type(raw).__name__}", field=field)
    function = raw.get("function") if isinstance(raw.get("function"), dict) else raw
    name = function.get("name")
    if not isinstance(name, str) or not name.strip():
        raise TaskFormatError(f"{what} needs a non-empty string 'name'", field=field)
    return function, name.strip()


def openai_tool(
    schema: Any, field: str, parameters: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A tool schema (wrapped ``{"type": "function", "function": ...}`` or bare) in the OpenAI form.

    ``parameters`` rewrites the parameter schema (e.g. BFCL-style types into JSON Schema).
    """
    function, name = named_function(schema, field, "a tool")
    description = function.get("description")
    params = function.get("parameters")
    if params is None:
        params = {"type": "object", "properties": {}}
    if not isinstance(params, dict):
        raise TaskFormatError(
            f"'parameters' must be an object, got {type(params).__name__}", field=f"{field}.parameters"
        )
    out: dict[str, Any] = {
        "name": name,
        "description": description if isinstance(description, str) else "",
        "parameters": parameters(params) if parameters is not None else params,
    }
    if isinstance(function.get("returns"), dict):  # the simulator's response schema
        out["returns"] = function["returns"]
    return {"type": "function", "function": out}


def tool_list(value: Any, field: str, parameters: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> list:
    """A list of tool schemas (or a JSON string of one) in the OpenAI form."""
    tools = json_field(value, field, (list, type(None)))
    return [openai_tool(tool, f"{field}[{i}]", parameters) for i, tool in enumerate(tools or [])]
