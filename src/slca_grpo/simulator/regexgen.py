"""Strings that match a JSON Schema ``pattern``, built by walking Python's parsed regex.

Covers what schemas use in practice (literals, classes, ranges, repeats, groups, alternation,
anchors, back-references); look-arounds are ignored and the result is checked with ``re.search``,
so an answer is either a real match or None. A pattern whose shortest match is longer than the
caller's limit gets None at once, and building stops as soon as the text passes the limit: nested
repeats multiply, so the size of a string is never left to the pattern.
"""

from __future__ import annotations

import re
import string
from functools import lru_cache
from typing import Any

from slca_grpo.simulator.budget import check_deadline
from slca_grpo.simulator.regexsize import REPEATS, pattern_cost, sre
from slca_grpo.simulator.safety import MAX_GENERATED_UNITS, PatternError, pattern_problem, search
from slca_grpo.simulator.words import DetRng

_MAX_EXTRA_REPEAT = 3
_MEMO_CHARS = 500  # parsed patterns up to this length are kept (a parse tree costs ~100 B a character)
_LETTERS = string.ascii_lowercase
_ALPHABET = string.ascii_letters + string.digits + " -_.,:/@"
_CATEGORY_CHARS = {
    sre.CATEGORY_DIGIT: string.digits,
    sre.CATEGORY_NOT_DIGIT: _LETTERS,
    sre.CATEGORY_WORD: string.ascii_letters + string.digits,
    sre.CATEGORY_NOT_WORD: " -.",
    sre.CATEGORY_SPACE: " ",
    sre.CATEGORY_NOT_SPACE: string.ascii_letters + string.digits,
}


class _TooLong(Exception):
    """The string being built passed its length limit."""


class _Text:
    """The string being built, refusing to grow past ``limit`` characters."""

    def __init__(self, limit: int) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.limit = limit

    def add(self, piece: str) -> None:
        self.length += len(piece)
        if self.length > self.limit:
            raise _TooLong
        self.parts.append(piece)

    def since(self, index: int) -> str:
        return "".join(self.parts[index:])


def string_from_pattern(pattern: str, rng: DetRng, max_chars: int = MAX_GENERATED_UNITS) -> str | None:
    """A string of at most ``max_chars`` that ``re.search(pattern, …)`` accepts, or None when this
    walker cannot build one (or none is short enough)."""
    if pattern_problem(pattern) is not None:  # search would refuse it too
        return None
    cost = pattern_cost(pattern)
    if cost is None or cost.shortest > max_chars:
        return None
    parsed = _parsed(pattern)
    if parsed is None:
        return None
    for _ in range(4):
        text = _Text(max_chars)
        try:
            _emit(parsed, rng, {}, text)
        except _TooLong:
            return None  # the random extra repeats overshot; another draw would likely too
        except (ValueError, IndexError, KeyError, RecursionError):
            continue
        built = "".join(text.parts)
        try:
            if search(pattern, built):  # time-limited: a catastrophic pattern gives up, not hangs
                return built
        except PatternError:
            return None
    return None


def _parsed(pattern: str) -> Any:
    """The parsed pattern (read, never changed, by the walker); short ones are kept for reuse."""
    return _parsed_short(pattern) if len(pattern) <= _MEMO_CHARS else _parse(pattern)


@lru_cache(maxsize=256)
def _parsed_short(pattern: str) -> Any:
    return _parse(pattern)


def _parse(pattern: str) -> Any:
    try:
        return sre.parse(pattern)
    except (re.error, TypeError, ValueError, OverflowError, RecursionError):
        return None


def _emit(items: Any, rng: DetRng, groups: dict[int, str], text: _Text) -> None:
    for op, arg in items:
        _emit_one(op, arg, rng, groups, text)


def _emit_one(op: Any, arg: Any, rng: DetRng, groups: dict[int, str], text: _Text) -> None:
    if op is sre.LITERAL:
        text.add(chr(arg))
    elif op is sre.NOT_LITERAL:
        text.add(next(c for c in _LETTERS + string.digits if ord(c) != arg))
    elif op is sre.ANY:
        text.add(rng.choice(_LETTERS))
    elif op is sre.IN:
        text.add(_emit_class(arg, rng))
    elif op in REPEATS:
        low, high, sub = arg
        high = min(high, low + _MAX_EXTRA_REPEAT)
        for _ in range(rng.randint(low, high)):
            check_deadline()
            _emit(sub, rng, groups, text)
    elif op is sre.SUBPATTERN:
        group, sub = arg[0], arg[-1]
        start = len(text.parts)
        _emit(sub, rng, groups, text)
        if group is not None:
            groups[group] = text.since(start)
    elif op is sre.BRANCH:
        _emit(rng.choice(arg[1]), rng, groups, text)
    elif op is sre.GROUPREF:
        text.add(groups.get(arg, ""))
    elif op is sre.GROUPREF_EXISTS:
        _emit(arg[1], rng, groups, text)
    elif hasattr(sre, "ATOMIC_GROUP") and op is sre.ATOMIC_GROUP:
        _emit(arg, rng, groups, text)
    # AT (anchors), ASSERT, ASSERT_NOT: nothing to emit


def _emit_class(items: list[tuple[Any, Any]], rng: DetRng) -> str:
    negate = bool(items) and items[0][0] is sre.NEGATE
    if negate:
        banned = re.compile("[" + "".join(_class_source(items[1:])) + "]")
        allowed = [c for c in _ALPHABET if not banned.match(c)]
        return rng.choice(allowed)
    op, arg = rng.choice(items)
    if op is sre.LITERAL:
        return chr(arg)
    if op is sre.RANGE:
        return chr(rng.randint(arg[0], arg[1]))
    if op is sre.CATEGORY:
        return rng.choice(_CATEGORY_CHARS.get(arg, _LETTERS))
    raise ValueError(f"unsupported class item {op}")


def _class_source(items: list[tuple[Any, Any]]) -> list[str]:
    parts = []
    for op, arg in items:
        if op is sre.LITERAL:
            parts.append(re.escape(chr(arg)))
        elif op is sre.RANGE:
            parts.append(f"{re.escape(chr(arg[0]))}-{re.escape(chr(arg[1]))}")
        elif op is sre.CATEGORY:
            parts.append(
                {
                    sre.CATEGORY_DIGIT: r"\d",
                    sre.CATEGORY_NOT_DIGIT: r"\D",
                    sre.CATEGORY_WORD: r"\w",
                    sre.CATEGORY_NOT_WORD: r"\W",
                    sre.CATEGORY_SPACE: r"\s",
                    sre.CATEGORY_NOT_SPACE: r"\S",
                }.get(arg, "")
            )
    return parts
