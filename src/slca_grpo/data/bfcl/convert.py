"""Between BFCL's function docs and calls and the OpenAI-style tools and calls our agents use.

BFCL docs use their own type names (``dict``, ``float``, ``tuple``, ``any`` and Java/JavaScript
names such as ``HashMap`` or ``Bigint``) and dotted function names (``math.factorial``); OpenAI
tool schemas need JSON Schema types and names matching ``^[a-zA-Z0-9_-]{1,64}$``. The checkers
want calls as ``[{original_name: {param: value}}]``.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from slca_grpo.datatypes import ToolCall

# BFCL type name -> JSON Schema type; ``None`` means "no type constraint" (any JSON value).
BFCL_TO_JSON_SCHEMA_TYPE: dict[str, str | None] = {
    "string": "string",
    "String": "string",
    "char": "string",
    "integer": "integer",
    "int": "integer",
    "byte": "integer",
    "short": "integer",
    "long": "integer",
    "Bigint": "integer",
    "number": "number",
    "float": "number",
    "double": "number",
    "boolean": "boolean",
    "bool": "boolean",
    "Boolean": "boolean",
    "array": "array",
    "list": "array",
    "tuple": "array",
    "Array": "array",
    "ArrayList": "array",
    "Set": "array",
    "Queue": "array",
    "Stack": "array",
    "dict": "object",
    "object": "object",
    "HashMap": "object",
    "Hashtable": "object",
    "any": None,
    "Any": None,
}

# JSON Schema keywords carried over unchanged (BFCL adds non-standard ones such as ``optional``).
_KEPT_KEYWORDS = (
    "description",
    "enum",
    "default",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
)
_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
_MAX_NAME_LENGTH = 64


def convert_schema(schema: Any) -> dict[str, Any]:
    """A BFCL parameter schema as JSON Schema (recursively through properties and items)."""
    if not isinstance(schema, Mapping):
        return {}
    out: dict[str, Any] = {}
    bfcl_type = schema.get("type")
    json_type = BFCL_TO_JSON_SCHEMA_TYPE.get(bfcl_type) if isinstance(bfcl_type, str) else None
    if json_type is not None:
        out["type"] = json_type
    for keyword in _KEPT_KEYWORDS:
        if keyword in schema:
            out[keyword] = copy.deepcopy(schema[keyword])
    if isinstance(bfcl_type, str) and bfcl_type and bfcl_type not in BFCL_TO_JSON_SCHEMA_TYPE:
        # Unknown BFCL type: accept any value but tell the model what was meant.
        out["description"] = f"{out.get('description', '')} (type: {bfcl_type})".strip()
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        out["properties"] = {str(name): convert_schema(sub) for name, sub in properties.items()}
        if bfcl_type is None:
            out["type"] = "object"
    required = schema.get("required")
    if isinstance(required, list) and all(isinstance(r, str) for r in required):
        out["required"] = list(required)
    items = schema.get("items")
    if isinstance(items, Mapping):
        out["items"] = convert_schema(items)
    additional = schema.get("additionalProperties")
    if isinstance(additional, Mapping):
        out["additionalProperties"] = convert_schema(additional)
    elif isinstance(additional, bool):
        out["additionalProperties"] = additional
    return out


def exposed_names(docs: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Original BFCL name -> a valid, unique OpenAI tool name (``a.b`` -> ``a_b``).

    Deterministic in the order of ``docs``; a clash gets a numeric suffix.
    """
    mapping: dict[str, str] = {}
    taken: set[str] = set()
    next_counter: dict[str, int] = {}  # per base: the suffix to try first (every lower one is taken)
    for doc in docs:
        original = str(doc.get("name", ""))
        if original in mapping:
            continue
        base = _NAME_CHARS.sub("_", original)[:_MAX_NAME_LENGTH] or "function"
        candidate, counter = base, next_counter.get(base, 2)
        while candidate in taken:
            suffix = f"_{counter}"
            candidate = base[: _MAX_NAME_LENGTH - len(suffix)] + suffix
            counter += 1
        next_counter[base] = counter
        mapping[original] = candidate
        taken.add(candidate)
    return mapping


def convert_parameters(schema: Any) -> dict[str, Any]:
    """A BFCL-style parameter object (top-level ``"type": "dict"``) as a JSON Schema object."""
    parameters = convert_schema(schema or {})
    parameters["type"] = "object"  # BFCL writes "dict" at the top level
    parameters.setdefault("properties", {})
    return parameters


def doc_to_tool(doc: Mapping[str, Any], name: str | None = None) -> dict[str, Any]:
    """One BFCL function doc as an OpenAI tool schema (``{"type": "function", "function": ...}``)."""
    parameters = convert_parameters(doc.get("parameters"))
    function: dict[str, Any] = {
        "name": name if name is not None else str(doc.get("name", "")),
        "description": str(doc.get("description", "")),
        "parameters": parameters,
    }
    return {"type": "function", "function": function}


def docs_to_tools(docs: Iterable[Mapping[str, Any]], names: Mapping[str, str]) -> list[dict[str, Any]]:
    """Tool schemas for ``docs`` under the exposed ``names`` (from :func:`exposed_names`)."""
    return [doc_to_tool(doc, names[str(doc["name"])]) for doc in docs]


def _source_literal(value: bool | int | float | None) -> str:
    """How a JSON scalar is written in Java/JavaScript source (``true``, ``5``, ``1.5``, ``null``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    return json.dumps(value)


def to_checker_value(value: Any, language: str) -> Any:
    """A model's argument value as the AST checker expects it for ``language``.

    The Java/JavaScript checker only accepts strings (source text it parses itself; the model
    sees those parameters typed ``string``). A JSON scalar the model sends instead (``true``,
    ``5``) is the same token in Java/JavaScript source, so it becomes that text; objects and
    arrays are left as they are and fail the type check, as they would in bfcl-eval.
    """
    if language == "python" or isinstance(value, str):
        return value
    if value is None or isinstance(value, (bool, int, float)):
        return _source_literal(value)
    return value


def calls_to_checker_format(
    calls: Iterable[ToolCall], original_names: Mapping[str, str], language: str = "python"
) -> list[dict[str, dict[str, Any]]]:
    """Our calls as ``[{original_name: {param: value}}]`` (exposed names mapped back)."""
    output: list[dict[str, dict[str, Any]]] = []
    for call in calls:
        name = original_names.get(call.name, call.name)
        output.append({name: {key: to_checker_value(v, language) for key, v in call.arguments.items()}})
    return output
