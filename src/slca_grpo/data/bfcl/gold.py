"""BFCL's gold answers as our tool calls, with the values its checkers expect.

Single-turn gold answers list the allowed values of each parameter; the gold call takes the first
allowed value and omits optional parameters whose allowed list contains ``""`` (bfcl-eval's mark
for "may be omitted"). Multi-turn gold answers are Python call strings per turn, read with
:mod:`ast` (literals only), positional arguments bound by the backend method's signature.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

from slca_grpo.data.bfcl.calls import bind_positional, parse_call_string
from slca_grpo.data.bfcl.entries import BFCLEntry
from slca_grpo.data.bfcl.package import load_bfcl
from slca_grpo.datatypes import ToolCall

_OMIT = object()

# Java/JavaScript source spelling of element types inside collections.
_JAVA_ARRAY_ELEMENT = {
    "integer": "int",
    "String": "String",
    "boolean": "boolean",
    "double": "double",
    "float": "float",
    "long": "long",
    "char": "char",
    "byte": "byte",
    "short": "short",
}


def _pick(allowed: Any, required: bool) -> Any:
    """First allowed value; ``_OMIT`` for an optional parameter that may be left out."""
    if not isinstance(allowed, list):
        return allowed
    options = [option for option in allowed if option != ""]
    if "" in allowed and not required:
        return _OMIT
    if not options:
        # A required parameter whose only allowed value is "" passes the checker as "".
        return "" if "" in allowed else _OMIT
    return options[0]


def _resolve(option: Any) -> Any:
    """A concrete value from one allowed option (dict options map keys to allowed lists)."""
    if isinstance(option, dict):
        resolved = {}
        for key, allowed in option.items():
            value = _pick(allowed, required=False)
            if value is not _OMIT:
                resolved[key] = _resolve(value)
        return resolved
    if isinstance(option, list) and option and all(isinstance(item, dict) for item in option):
        return [_resolve(item) for item in option]
    return option


def _find_doc(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for doc in docs:
        if doc.get("name") == name:
            return doc
    return {}


def _number_text(value: int | float, bfcl_type: str, language: str) -> str:
    if language == "java" and bfcl_type == "long":
        return f"{value}L"
    if language == "java" and bfcl_type == "float":
        return f"{value}f"
    if language == "javascript" and bfcl_type == "Bigint":
        return f"{value}n"
    return str(value)


def _element_text(value: Any, items_type: str, language: str, container: str) -> str:
    """One collection element as the converters of the checker read it back."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _number_text(value, items_type, language)
    if isinstance(value, list):
        return "[" + ", ".join(_element_text(v, "", language, "array") for v in value) + "]"
    text = str(value)
    # Java arrays convert elements by their declared type (String and any keep the text as is);
    # ArrayList strips the quotes of String/char elements; untyped values need quotes.
    if language == "java" and container == "Array" and items_type in ("String", "any", "char"):
        return text
    if language == "java" and container == "ArrayList" and items_type == "any":
        return text
    if language == "java" and items_type == "char":
        return f"'{text}'"
    return json.dumps(text)


def to_source_text(value: Any, schema: dict[str, Any], language: str) -> Any:
    """A gold value as the Java/JavaScript source text the checker's converters read back.

    Strings stay as they are: string parameters take their raw text, and a string where BFCL
    expects a collection names a variable (``"userList"``).
    """
    if language == "python" or isinstance(value, str):
        return value
    bfcl_type = str(schema.get("type", "any"))
    items_type = str((schema.get("items") or {}).get("type", ""))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _number_text(value, bfcl_type, language)
    if language == "java" and isinstance(value, list):
        body = ", ".join(_element_text(v, items_type, language, bfcl_type) for v in value)
        if bfcl_type == "ArrayList":
            return f"new ArrayList<>(Arrays.asList({body}))"
        return f"new {_JAVA_ARRAY_ELEMENT.get(items_type, 'Object')}[]{{{body}}}"
    if language == "java" and isinstance(value, dict):
        puts = " ".join(f"put({json.dumps(k)}, {_element_text(v, '', language, 'HashMap')});" for k, v in value.items())
        return f"new HashMap<String, Object>() {{{{ {puts} }}}}"
    if isinstance(value, list):
        return "[" + ", ".join(_element_text(v, items_type, language, "array") for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_element_text(v, '', language, 'dict')}" for k, v in value.items()) + "}"
    return json.dumps(value)


def gold_single_turn_calls(entry: BFCLEntry) -> list[ToolCall]:
    """The gold calls of a single-turn entry, with checker-ready values and original names."""
    calls: list[ToolCall] = []
    for item in entry.ground_truth:
        name, params = next(iter(item.items()))
        doc_params = _find_doc(entry.functions, name).get("parameters") or {}
        required = set(doc_params.get("required") or [])
        properties = doc_params.get("properties") or {}
        arguments: dict[str, Any] = {}
        for param, allowed in params.items():
            choice = _pick(allowed, required=param in required)
            if choice is _OMIT:
                continue
            arguments[param] = to_source_text(_resolve(choice), properties.get(param) or {}, entry.language)
        calls.append(ToolCall(name=name, arguments=arguments))
    return calls


def gold_multi_turn_calls(entry: BFCLEntry) -> list[list[ToolCall]]:
    """The gold calls of a multi-turn entry per turn, keyword arguments only."""
    bfcl = load_bfcl()
    signatures: dict[str, list[str]] = {}
    for class_name in entry.involved_classes:
        for name, function in inspect.getmembers(bfcl.backend_class(class_name), inspect.isfunction):
            if not name.startswith("_"):
                signatures[name] = [p for p in inspect.signature(function).parameters if p != "self"]
    turns: list[list[ToolCall]] = []
    for gold_turn in entry.ground_truth:
        calls = []
        for call_string in gold_turn:
            name, positional, keywords = parse_call_string(call_string)
            arguments = bind_positional(signatures.get(name, []), positional, keywords)
            calls.append(ToolCall(name=name, arguments=arguments))
        turns.append(calls)
    return turns
