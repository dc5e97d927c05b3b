"""Python call strings for bfcl-eval's multi-turn executor, built safely, and parsed back.

bfcl-eval runs multi-turn calls by ``eval``-ing strings such as ``cd(folder='docs')`` against its
backend instances. Model text never reaches it: a string is built here only from a call our
parser validated, whose name is a known backend method offered to the model, whose argument
names are plain identifiers and whose values are JSON literals (rendered with ``repr`` of plain
Python values). The result is re-parsed with :mod:`ast` as a final check that it is exactly one
call of a bare name with literal keyword arguments. Anything else raises :class:`UnsafeCallError`.

Gold call strings from the dataset are read with :func:`parse_call_string`, which accepts
literals only (``ast.literal_eval``), never evaluates code.
"""

from __future__ import annotations

import ast
import keyword
import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

_MAX_DEPTH = 32
_MAX_CALL_CHARS = 200_000


class UnsafeCallError(ValueError):
    """A call that must not be handed to bfcl-eval's executor."""


def _is_plain_identifier(name: Any) -> bool:
    return isinstance(name, str) and name.isidentifier() and name.isascii() and not keyword.iskeyword(name)


def _check_literal(value: Any, path: str, depth: int = 0) -> None:
    """Accept exactly the values ``json.loads`` produces (finite numbers only)."""
    if depth > _MAX_DEPTH:
        raise UnsafeCallError(f"argument {path} is nested deeper than {_MAX_DEPTH} levels")
    if value is None or isinstance(value, (bool, str)):
        return
    if isinstance(value, int):
        if type(value) is not int:  # an int subclass could override __repr__
            raise UnsafeCallError(f"argument {path} is a {type(value).__name__}, not a JSON literal")
        return
    if isinstance(value, float):
        if type(value) is not float or not math.isfinite(value):
            raise UnsafeCallError(f"argument {path} is not a finite number")
        return
    if type(value) is list:
        for index, item in enumerate(value):
            _check_literal(item, f"{path}[{index}]", depth + 1)
        return
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise UnsafeCallError(f"argument {path} has a non-string key {key!r}")
            _check_literal(item, f"{path}[{key!r}]", depth + 1)
        return
    raise UnsafeCallError(f"argument {path} is a {type(value).__name__}, not a JSON literal")


def build_call_string(name: str, arguments: Mapping[str, Any], allowed_names: Collection[str]) -> str:
    """``name(arg=repr(value), ...)`` for a validated call, or :class:`UnsafeCallError`.

    ``allowed_names`` are the backend methods the model may call right now (names from the
    entry's docs that are public methods of its backend classes).
    """
    if not _is_plain_identifier(name):
        raise UnsafeCallError(f"function name {name!r} is not a plain identifier")
    if name not in allowed_names:
        raise UnsafeCallError(f"function {name!r} is not available")
    if not isinstance(arguments, Mapping):
        raise UnsafeCallError(f"arguments of {name!r} must be an object")
    rendered: list[str] = []
    for key, value in arguments.items():
        if not _is_plain_identifier(key):
            raise UnsafeCallError(f"argument name {key!r} of {name!r} is not a plain identifier")
        _check_literal(value, key)
        rendered.append(f"{key}={value!r}")
    call = f"{name}({', '.join(rendered)})"
    if len(call) > _MAX_CALL_CHARS:
        raise UnsafeCallError(f"call to {name!r} is longer than {_MAX_CALL_CHARS} characters")
    _verify_call_string(call, name)
    return call


def _verify_call_string(call: str, name: str) -> None:
    """Defence in depth: the string is one call of ``name`` with literal keyword arguments."""
    try:
        tree = ast.parse(call, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise UnsafeCallError(f"call to {name!r} does not parse: {exc}") from exc
    node = tree.body
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name):
        raise UnsafeCallError(f"call to {name!r} is not a plain function call")
    if node.args or any(kw.arg is None for kw in node.keywords):
        raise UnsafeCallError(f"call to {name!r} has positional or ** arguments")
    for kw in node.keywords:
        try:
            ast.literal_eval(kw.value)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError) as exc:
            raise UnsafeCallError(f"argument {kw.arg!r} of {name!r} is not a literal") from exc


def parse_call_string(call: str) -> tuple[str, list[Any], dict[str, Any]]:
    """``(name, positional values, keyword values)`` of a gold call string such as
    ``mv(source='a', destination='b')``; literals only, raises ``ValueError`` otherwise."""
    try:
        node = ast.parse(call.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ValueError(f"not a call: {call!r} ({exc})") from exc
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        raise ValueError(f"not a call of a plain name: {call!r}")
    try:
        positional = [ast.literal_eval(arg) for arg in node.args]
        keywords: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise ValueError(f"** arguments are not supported: {call!r}")
            keywords[kw.arg] = ast.literal_eval(kw.value)
    except (TypeError, SyntaxError, RecursionError, MemoryError) as exc:
        raise ValueError(f"non-literal argument in {call!r}") from exc
    return node.func.id, positional, keywords


def bind_positional(
    parameter_names: Sequence[str], positional: Sequence[Any], keywords: Mapping[str, Any]
) -> dict[str, Any]:
    """Keyword arguments for a call given the callee's parameter order."""
    if len(positional) > len(parameter_names):
        raise ValueError(f"{len(positional)} positional arguments for {len(parameter_names)} parameters")
    arguments = dict(zip(parameter_names, positional, strict=False))
    for key, value in keywords.items():
        if key in arguments:
            raise ValueError(f"argument {key!r} given twice")
        arguments[key] = value
    return arguments
