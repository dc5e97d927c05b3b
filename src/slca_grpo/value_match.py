"""Loose equality of argument values (docs/method.md §4), pure and never raising.

One rule for every place that asks whether two argument values agree: the rewards (HierR, ToolPO,
RLTR), the evaluation's slot accuracy and the rollout's lookup of a task's recorded fixtures.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

NUMBER_TOLERANCE = 1e-9

# A JSON-style number written as a string ("3", "-2.5", "1e3"); stricter than float(), which
# would also accept "nan", "inf" and "1_000".
_NUMERIC_STRING = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_TRUE_STRINGS = frozenset({"true"})
_FALSE_STRINGS = frozenset({"false"})


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _as_number(value: Any) -> float | int | None:
    """The number a value stands for: numbers themselves and numeric strings; else None."""
    if _is_number(value):
        return value
    if isinstance(value, str):
        text = value.strip()
        if _NUMERIC_STRING.fullmatch(text):
            try:
                number = float(text)
            except (ValueError, OverflowError):
                return None
            # Keep integers exact so huge ids compare without float rounding.
            if re.fullmatch(r"[+-]?\d+", text):
                try:
                    return int(text)
                except ValueError:  # beyond Python's int-digit limit
                    return number
            return number
    return None


def _as_bool(value: Any) -> bool | None:
    """The boolean a value stands for: booleans, "true"/"false" strings, 1/0 (numbers or numeric strings)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE_STRINGS:
        return True
    if isinstance(value, str) and value.strip().lower() in _FALSE_STRINGS:
        return False
    number = _as_number(value)
    if number is not None and _numbers_equal(number, 1):
        return True
    if number is not None and _numbers_equal(number, 0):
        return False
    return None


def _numbers_equal(a: float | int, b: float | int) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    try:
        fa, fb = float(a), float(b)
    except OverflowError:  # an int too large for a float: equal only if exactly equal
        return a == b
    if fa == fb or (math.isnan(fa) and math.isnan(fb)):
        return True
    return abs(fa - fb) <= NUMBER_TOLERANCE


def _normalized(value: Any) -> Any:
    """A normal form for containers: trimmed lower-case strings, integral floats as ints, sorted keys."""
    if isinstance(value, str):
        return value.strip().lower()
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {str(k).strip().lower(): _normalized(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalized(v) for v in value]
    return value


def normalized_json(value: Any) -> str:
    """Sorted, whitespace-free JSON of the normalized form, for loose comparison (not the simulator's
    strict ``canonical_json``); non-JSON objects fall back to ``str``."""
    return json.dumps(_normalized(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _container_from(value: Any) -> Any:
    """A list/dict as is, or a JSON string holding one (models often stringify list arguments)."""
    if isinstance(value, (list, tuple, dict)):
        return value
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            decoded = json.loads(value)
        except (ValueError, RecursionError):
            return None
        return decoded if isinstance(decoded, (list, dict)) else None
    return None


def _loose_equal(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (list, tuple, dict)) or isinstance(b, (list, tuple, dict)):
        ca, cb = _container_from(a), _container_from(b)
        if ca is None or cb is None:
            return False
        return normalized_json(ca) == normalized_json(cb)
    if isinstance(a, bool) or isinstance(b, bool):
        ba, bb = _as_bool(a), _as_bool(b)
        return ba is not None and ba == bb
    if _is_number(a) or _is_number(b):
        na, nb = _as_number(a), _as_number(b)
        return na is not None and nb is not None and _numbers_equal(na, nb)
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().lower() == b.strip().lower()
    return bool(a == b)


def loose_equal(a: Any, b: Any) -> bool:
    """Loose equality (docs/method.md §4) of two argument values; symmetric, reflexive, never raises.

    - strings: trimmed, case-insensitive (two strings never compare as numbers: "02139" != "2139");
    - numbers: equal within 1e-9; a numeric string equals a number ("3" == 3);
    - booleans: ``True`` equals ``True``, ``"true"`` (any case), ``1`` and ``"1"``; likewise ``False``;
    - lists/dicts: equal when their normalized sorted JSON is equal (keys sorted, strings trimmed and
      lower-cased, integral floats as ints; list order kept); a JSON string of a list/dict counts;
    - ``None`` equals only ``None``.
    """
    try:
        return _loose_equal(a, b)
    except Exception:  # defensive: exotic objects (custom __eq__, cyclic containers) are "not equal"
        try:
            return a is b
        except Exception:  # pragma: no cover - `is` cannot raise
            return False
