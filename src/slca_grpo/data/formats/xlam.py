"""xLAM / APIGen rows: ``query``, ``tools`` and ``answers`` (the last two usually JSON strings).

``tools`` lists ``{"name", "description", "parameters": {param: {"type", "description",
"default"}}}`` with Python-style type strings (``"str"``, ``"List[int]"``, ``"str, optional"``);
:func:`type_schema` turns them into JSON Schema, reading the type expression with :mod:`ast`
(syntax only, nothing is evaluated). A parameter is required unless its type says ``optional``.
``answers`` holds the calls, all parallel in one step; an empty list (xlam-irrelevance) means no
call is expected. Rows record no tool responses and no final answer: they are RL tasks and, as
SFT data, teach the calls alone.
"""

from __future__ import annotations

import ast
from typing import Any

from slca_grpo.data.formats.fields import call_arguments, json_field, openai_tool, require
from slca_grpo.data.tasks import TaskFormatError, task_from_dict
from slca_grpo.datatypes import SUBSET_IRRELEVANT, SUBSET_TOOL_CALL, Task

_SCALARS = {
    "str": "string",
    "string": "string",
    "int": "integer",
    "integer": "integer",
    "float": "number",
    "number": "number",
    "bool": "boolean",
    "boolean": "boolean",
    "list": "array",
    "array": "array",
    "tuple": "array",
    "set": "array",
    "dict": "object",
    "object": "object",
}
_SEQUENCES = {"list", "tuple", "set", "sequence", "iterable"}
_MAPPINGS = {"dict", "mapping"}
_ANY = {"any", "callable", "function"}


def detect(row: dict[str, Any]) -> bool:
    return "query" in row and "answers" in row and "tools" in row


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):  # typing.List
        return node.attr
    if isinstance(node, ast.Constant) and node.value is None:
        return "None"
    return None


def _node_schema(node: ast.expr) -> dict[str, Any] | None:
    """JSON Schema of a parsed type expression; None for a type it does not know."""
    name = _name(node)
    if name is not None:
        key = name.lower()
        if key == "none":
            return {"type": "null"}
        if key in _ANY:
            return {}
        return {"type": _SCALARS[key]} if key in _SCALARS else None
    if not isinstance(node, ast.Subscript):
        return None
    outer = (_name(node.value) or "").lower()
    inner = node.slice
    arguments = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
    if outer in ("optional", "union"):
        options = [_node_schema(a) for a in arguments]
        options = [o for o in options if o != {"type": "null"}]
        if any(o is None for o in options):
            return None
        return options[0] if len(options) == 1 else {"anyOf": options}
    if outer in _SEQUENCES:
        items = [_node_schema(a) for a in arguments if not (isinstance(a, ast.Constant) and a.value is Ellipsis)]
        schema: dict[str, Any] = {"type": "array"}
        if outer == "tuple" and len(items) > 1 and all(i is not None for i in items):
            schema["prefixItems"] = items
        elif items and items[0] is not None:
            schema["items"] = items[0]
        return schema
    if outer in _MAPPINGS:
        values = _node_schema(arguments[-1]) if len(arguments) == 2 else None
        return {"type": "object", **({"additionalProperties": values} if values else {})}
    if outer in _ANY:  # Callable[[int], int]: JSON has no functions, any value goes
        return {}
    if outer == "literal":
        constants = [a.value for a in arguments if isinstance(a, ast.Constant)]
        return {"enum": constants} if len(constants) == len(arguments) else None
    return None


def type_schema(text: Any) -> tuple[dict[str, Any], bool]:
    """(JSON Schema, optional?) of an xLAM type string such as ``"List[int], optional"``."""
    if not isinstance(text, str) or not text.strip():
        return {}, False
    head, *flags = [part.strip() for part in _split_top_level(text)]
    optional = any(flag.lower().startswith("optional") for flag in flags) or head.lower().startswith("optional[")
    try:
        schema = _node_schema(ast.parse(head, mode="eval").body)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        schema = None
    if schema is None:  # a type JSON Schema has no word for: any value, the type named
        return {"description": f"(type: {head})"}, optional
    return schema, optional


def _split_top_level(text: str) -> list[str]:
    """``"Dict[str, int], optional"`` → ``["Dict[str, int]", "optional"]`` (commas outside brackets)."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return parts


def parameters_schema(parameters: dict[str, Any], field: str) -> dict[str, Any]:
    """xLAM's ``{param: {"type", "description", "default"}}`` as a JSON Schema object."""
    if parameters.get("type") in ("object", "dict") and isinstance(parameters.get("properties"), dict):
        return parameters  # already JSON Schema (some APIGen sources)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, spec in parameters.items():
        if not isinstance(spec, dict):
            raise TaskFormatError(f"a parameter must be an object, got {type(spec).__name__}", field=f"{field}.{name}")
        schema, optional = type_schema(spec.get("type"))
        description = " ".join(s for s in (spec.get("description"), schema.pop("description", None)) if s)
        if description:
            schema["description"] = description
        if "default" in spec:
            schema["default"] = spec["default"]
        properties[str(name)] = schema
        if not optional:
            required.append(str(name))
    return {"type": "object", "properties": properties, "required": required}


def convert(row: dict[str, Any], task_id: str) -> Task:
    query = require(row, "query", str)
    raw_tools = json_field(require(row, "tools", (list, str)), "tools", list)
    tools = []
    for index, raw in enumerate(raw_tools):
        field = f"tools[{index}]"
        params = raw.get("parameters") if isinstance(raw, dict) else None
        if params is not None and not isinstance(params, dict):
            raise TaskFormatError(f"must be an object, got {type(params).__name__}", field=f"{field}.parameters")
        tools.append(openai_tool(raw, field, lambda p, f=field: parameters_schema(p, f"{f}.parameters")))
    answers = json_field(require(row, "answers", (list, str)), "answers", (list, type(None))) or []
    calls = []
    for index, answer in enumerate(answers):
        field = f"answers[{index}]"
        if not isinstance(answer, dict) or not isinstance(answer.get("name"), str):
            raise TaskFormatError("a call must be an object with a string 'name'", field=field)
        calls.append(
            {"name": answer["name"], "arguments": call_arguments(answer.get("arguments"), f"{field}.arguments")}
        )
    data = {
        "id": task_id,
        "messages": [{"role": "user", "content": query}],
        "tools": tools,
        "gold_calls": [calls] if calls else [],
        "subset": SUBSET_TOOL_CALL if calls else SUBSET_IRRELEVANT,
    }
    return task_from_dict(data)
