"""Robust parsing of a judge's 1..5 rating and of a checker's yes/no verdict (pure)."""

from __future__ import annotations

import json
import re
from typing import Any

_NUMBER = r"([+-]?\d+(?:\.\d+)?)"
# "Rating: 4", "**Rating:** 4", "final score = 4", "rating of 4", "I rate it 4", "Score - 4".
_LABELLED = re.compile(
    r"(?:\brating|\bscore|\bgrade|\brate\s+(?:it|this(?:\s+answer)?|the\s+answer)(?:\s+(?:a|an|as))?)"
    r"\s*(?:\(\s*1\s*(?:-|to)\s*5\s*\))?"  # "Rating (1-5): 4"
    r"[\s*_`'\"]*(?:[:=\-]|\bis\b|\bof\b)?[\s*_`'\"]*" + _NUMBER + r"(?![\d.]*\s*(?:-|to)\s*\d)",
    re.IGNORECASE,
)
# "4/5", "**4**/5", "4 out of 5".
_OUT_OF_FIVE = re.compile(_NUMBER + r"[\s*_`]*(?:/|\bout\s+of\b)\s*5\b", re.IGNORECASE)
# A line that is only a number, possibly in markdown or quotes: "4", "**4**", "(4).".
_BARE = re.compile(r"[\s*_`'\"(\[]*" + _NUMBER + r"[\s*_`'\".)\]]*")
_JSON_OBJECT = re.compile(r"\{[^{}]*\}")
_RATING_KEYS = ("rating", "score", "grade")

_MISSING = object()


def _json_objects(text: str) -> list[dict[str, Any]]:
    """JSON objects in the text: the whole text (fences removed) or flat ``{...}`` spans in it."""
    stripped = re.sub(r"^```[a-zA-Z]*\s*|\s*```$", "", text.strip())
    found: list[dict[str, Any]] = []
    try:
        whole = json.loads(stripped)
        if isinstance(whole, dict):
            return [whole]
    except (ValueError, RecursionError):
        pass
    for span in _JSON_OBJECT.findall(text):
        try:
            value = json.loads(span)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def _to_rating(value: Any, low: int, high: int) -> int | None:
    """An integral number in [low, high] as int (``"4"``, ``4.0`` accepted); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        match = re.fullmatch(r"\s*" + _NUMBER + r"\s*(?:/\s*5)?\s*", value)
        if not match:
            return None
        value = match.group(1)
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if not number.is_integer() or not low <= number <= high:
        return None
    return int(number)


def parse_rating(text: Any, low: int = 1, high: int = 5) -> int | None:
    """The rating a judge's reply states, or None.

    Tried in order, the first kind found decides (an out-of-range or fractional value there is a
    failure, not a reason to look at other numbers): a JSON object with ``rating``/``score``/``grade``
    (the last one); the last labelled rating ("Rating: 4", "**Score:** 4", "rating of 4");
    the last "N/5" or "N out of 5"; the whole reply or its last line being just a number.
    """
    if not isinstance(text, str) or not text.strip():
        return None
    for obj in reversed(_json_objects(text)):
        for key in _RATING_KEYS:
            if key in obj:
                return _to_rating(obj[key], low, high)
    for pattern in (_LABELLED, _OUT_OF_FIVE):
        matches = pattern.findall(text)
        if matches:
            return _to_rating(matches[-1], low, high)
    lines = [line for line in text.strip().splitlines() if line.strip()]
    for candidate in (text.strip(), lines[-1] if lines else ""):
        match = _BARE.fullmatch(candidate)
        if match:
            return _to_rating(match.group(1), low, high)
    return None


_YES = frozenset({"yes", "true", "complete", "y"})
_NO = frozenset({"no", "false", "incomplete", "n", "not complete"})
_VERDICT_WORD = r"(yes|no|true|false|incomplete|not\s+complete|complete)"
_LABELLED_VERDICT = re.compile(
    r"\b(?:answer|verdict|decision|complete|completeness|final(?:\s+answer)?)\b[\s*_`'\"]*[:=\-]"
    r"[\s*_`'\"]*" + _VERDICT_WORD + r"\b",
    re.IGNORECASE,
)
_VERDICT_KEYS = ("complete", "is_complete", "answer", "verdict", "completeness")


def _to_verdict(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = re.sub(r"\s+", " ", value.strip().strip(".!*_`'\"").lower())
        if word in _YES:
            return True
        if word in _NO:
            return False
    return None


def parse_yes_no(text: Any) -> bool | None:
    """A completeness checker's verdict: True (yes/complete), False (no/incomplete) or None.

    Tried in order: a JSON object with ``complete``/``answer``/``verdict``; the last labelled
    verdict ("Answer: yes", "Verdict: incomplete"); the last line being only a verdict word; the
    reply starting with yes/no.
    """
    if not isinstance(text, str) or not text.strip():
        return None
    for obj in reversed(_json_objects(text)):
        for key in _VERDICT_KEYS:
            if key in obj:
                return _to_verdict(obj[key])
    matches = _LABELLED_VERDICT.findall(text)
    if matches:
        return _to_verdict(matches[-1])
    lines = [line for line in text.strip().splitlines() if line.strip()]
    last = _to_verdict(lines[-1]) if lines else None
    if last is not None:
        return last
    first = re.match(r"[\s*_`'\"]*(yes|no)\b", text, re.IGNORECASE)
    return _to_verdict(first.group(1)) if first else None
