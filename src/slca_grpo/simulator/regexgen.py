"""Strings that match a JSON Schema ``pattern``, built by walking Python's parsed regex.

Covers what schemas use in practice (literals, classes, ranges, repeats, groups, alternation,
anchors, back-references); look-arounds are ignored and the result is checked with ``re.search``,
so an answer is either a real match or None.
"""

from __future__ import annotations

import re
import string
from typing import Any

from slca_grpo.simulator.safety import PatternTimeout, search

try:  # Python 3.11+
    import re._parser as _sre  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre  # type: ignore[no-redef]

from slca_grpo.simulator.words import DetRng

_MAX_EXTRA_REPEAT = 3
_LETTERS = string.ascii_lowercase
_ALPHABET = string.ascii_letters + string.digits + " -_.,:/@"
_CATEGORY_CHARS = {
    _sre.CATEGORY_DIGIT: string.digits,
    _sre.CATEGORY_NOT_DIGIT: _LETTERS,
    _sre.CATEGORY_WORD: string.ascii_letters + string.digits,
    _sre.CATEGORY_NOT_WORD: " -.",
    _sre.CATEGORY_SPACE: " ",
    _sre.CATEGORY_NOT_SPACE: string.ascii_letters + string.digits,
}
_REPEATS = {_sre.MAX_REPEAT, _sre.MIN_REPEAT} | (
    {_sre.POSSESSIVE_REPEAT} if hasattr(_sre, "POSSESSIVE_REPEAT") else set()
)


def string_from_pattern(pattern: str, rng: DetRng) -> str | None:
    """A string that ``re.search(pattern, …)`` accepts, or None when this walker cannot build one."""
    try:
        parsed = _sre.parse(pattern)
    except (re.error, TypeError, ValueError, OverflowError, RecursionError):
        return None
    for _ in range(4):
        groups: dict[int, str] = {}
        try:
            text = _emit(parsed, rng, groups)
        except (ValueError, IndexError, KeyError, RecursionError):
            continue
        try:
            if search(pattern, text):  # time-limited: a catastrophic pattern gives up, not hangs
                return text
        except PatternTimeout:
            return None
    return None


def _emit(items: Any, rng: DetRng, groups: dict[int, str]) -> str:
    out: list[str] = []
    for op, arg in items:
        out.append(_emit_one(op, arg, rng, groups))
    return "".join(out)


def _emit_one(op: Any, arg: Any, rng: DetRng, groups: dict[int, str]) -> str:
    if op is _sre.LITERAL:
        return chr(arg)
    if op is _sre.NOT_LITERAL:
        return next(c for c in _LETTERS + string.digits if ord(c) != arg)
    if op is _sre.ANY:
        return rng.choice(_LETTERS)
    if op is _sre.IN:
        return _emit_class(arg, rng)
    if op in _REPEATS:
        low, high, sub = arg
        high = min(high, low + _MAX_EXTRA_REPEAT)
        return "".join(_emit(sub, rng, groups) for _ in range(rng.randint(low, high)))
    if op is _sre.SUBPATTERN:
        group, sub = arg[0], arg[-1]
        text = _emit(sub, rng, groups)
        if group is not None:
            groups[group] = text
        return text
    if op is _sre.BRANCH:
        return _emit(rng.choice(arg[1]), rng, groups)
    if op is _sre.GROUPREF:
        return groups.get(arg, "")
    if op is _sre.GROUPREF_EXISTS:
        return _emit(arg[1], rng, groups)
    if hasattr(_sre, "ATOMIC_GROUP") and op is _sre.ATOMIC_GROUP:
        return _emit(arg, rng, groups)
    return ""  # AT (anchors), ASSERT, ASSERT_NOT: nothing to emit


def _emit_class(items: list[tuple[Any, Any]], rng: DetRng) -> str:
    negate = bool(items) and items[0][0] is _sre.NEGATE
    if negate:
        banned = re.compile("[" + "".join(_class_source(items[1:])) + "]")
        allowed = [c for c in _ALPHABET if not banned.match(c)]
        return rng.choice(allowed)
    op, arg = rng.choice(items)
    if op is _sre.LITERAL:
        return chr(arg)
    if op is _sre.RANGE:
        return chr(rng.randint(arg[0], arg[1]))
    if op is _sre.CATEGORY:
        return rng.choice(_CATEGORY_CHARS.get(arg, _LETTERS))
    raise ValueError(f"unsupported class item {op}")


def _class_source(items: list[tuple[Any, Any]]) -> list[str]:
    parts = []
    for op, arg in items:
        if op is _sre.LITERAL:
            parts.append(re.escape(chr(arg)))
        elif op is _sre.RANGE:
            parts.append(f"{re.escape(chr(arg[0]))}-{re.escape(chr(arg[1]))}")
        elif op is _sre.CATEGORY:
            parts.append(
                {
                    _sre.CATEGORY_DIGIT: r"\d",
                    _sre.CATEGORY_NOT_DIGIT: r"\D",
                    _sre.CATEGORY_WORD: r"\w",
                    _sre.CATEGORY_NOT_WORD: r"\W",
                    _sre.CATEGORY_SPACE: r"\s",
                    _sre.CATEGORY_NOT_SPACE: r"\S",
                }.get(arg, "")
            )
    return parts
