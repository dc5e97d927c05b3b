"""What a ``pattern`` costs, known before it is compiled or generated from.

The ``regex`` engine unrolls every counted repeat when it compiles a pattern: ``(a{1000}){1000}``
becomes a million nodes (about 300 MB and a second of CPU), and ``((a{1000}){1000}){1000}`` runs
out of memory before its match time limit is ever checked. A string built from a pattern is at
least as long as the pattern's shortest match. Both numbers are read here from Python's parsed
regex (which does not unroll anything), saturating far above any limit, so a pattern can be refused
before it costs anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

try:  # Python 3.11+
    import re._parser as sre  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as sre  # type: ignore[no-redef]

_SATURATED = 10**12  # far above every limit: counts stop growing here
REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT} | ({sre.POSSESSIVE_REPEAT} if hasattr(sre, "POSSESSIVE_REPEAT") else set())
_ATOMIC = getattr(sre, "ATOMIC_GROUP", None)


_MEMO_CHARS = 2_000  # longer patterns are measured each time, not kept (the memo holds its keys)


@dataclass(frozen=True)
class PatternCost:
    shortest: int  # characters of the shortest string the pattern matches
    nodes: int  # nodes the regex engine unrolls it into (counted repeats written out), at least its length


def pattern_cost(pattern: str) -> PatternCost | None:
    """The cost of ``pattern``; None when Python's ``re`` cannot parse it. Parsing takes time in
    proportion to the pattern's length, so callers refuse very long patterns first."""
    return _memo_cost(pattern) if len(pattern) <= _MEMO_CHARS else _cost(pattern)


@lru_cache(maxsize=1024)
def _memo_cost(pattern: str) -> PatternCost | None:
    return _cost(pattern)


def _cost(pattern: str) -> PatternCost | None:
    try:
        parsed = sre.parse(pattern)
    except (re.error, TypeError, ValueError, OverflowError, RecursionError):
        return None
    try:
        shortest, nodes = _measure(parsed, {})
    except RecursionError:  # deeper than the parser allowed: treat as too costly
        return PatternCost(_SATURATED, _SATURATED)
    # Comments and verbose-mode space unroll to nothing but are still text the engine is given.
    return PatternCost(shortest, max(nodes, len(pattern)))


def _add(a: int, b: int) -> int:
    return min(a + b, _SATURATED)


def _times(a: int, b: int) -> int:
    return min(a * b, _SATURATED)


def _measure(items: Any, groups: dict[int, int]) -> tuple[int, int]:
    shortest = nodes = 0
    for op, arg in items:
        length, count = _measure_one(op, arg, groups)
        shortest, nodes = _add(shortest, length), _add(nodes, count)
    return shortest, nodes


def _measure_one(op: Any, arg: Any, groups: dict[int, int]) -> tuple[int, int]:
    if op in (sre.LITERAL, sre.NOT_LITERAL, sre.ANY):
        return 1, 1
    if op is sre.IN:
        return 1, max(1, len(arg))
    if op in REPEATS:
        low, high, sub = arg
        length, count = _measure(sub, groups)
        # The engine writes out the `low` required copies and keeps one more as the loop body.
        return _times(low, length), _add(_times(max(low, 1), count), count if high != low else 0)
    if op is sre.SUBPATTERN:
        group, sub = arg[0], arg[-1]
        length, count = _measure(sub, groups)
        if group is not None:
            groups[group] = length
        return length, _add(count, 1)
    if op is sre.BRANCH:
        measured = [_measure(branch, groups) for branch in arg[1]]
        return min((m[0] for m in measured), default=0), _add(sum(m[1] for m in measured), 1)
    if op is sre.GROUPREF:
        return groups.get(arg, 0), 1
    if op is sre.GROUPREF_EXISTS:
        yes = _measure(arg[1], groups)
        no = _measure(arg[2], groups) if arg[2] is not None else (0, 0)
        return min(yes[0], no[0]), _add(_add(yes[1], no[1]), 1)
    if op in (sre.ASSERT, sre.ASSERT_NOT):
        return 0, _add(_measure(arg[1], groups)[1], 1)
    if _ATOMIC is not None and op is _ATOMIC:
        length, count = _measure(arg, groups)
        return length, _add(count, 1)
    return 0, 1  # AT (anchors), CATEGORY and the like: zero width
