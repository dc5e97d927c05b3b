"""Word helpers for reading tool and field names (``getStockPrice``, ``search_hotels``)."""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, TypeVar

T = TypeVar("T")

_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")

# Words ending in "s" that are already singular (or have no useful singular).
_SINGULAR_S = frozenset(
    "news status series species address business analysis bus gas class glass pass access"
    " process basis campus canvas bonus census chess corpus crisis diagnosis lens plus alias"
    " this its is was has yes always previous various famous kudos sms gps".split()
)


@lru_cache(maxsize=8192)
def split_words(name: str) -> tuple[str, ...]:
    """Lower-case words of a snake, camel, kebab or dotted name: ``getStockPrice`` → get stock price."""
    return tuple(w.lower() for w in _WORD.findall(name))


@lru_cache(maxsize=8192)
def snake(name: str) -> str:
    return "_".join(split_words(name))


@lru_cache(maxsize=8192)
def singular(word: str) -> str:
    """Naive English singular, good enough for tool and field names."""
    if len(word) <= 3 or word in _SINGULAR_S or not word.endswith("s") or word.endswith("ss"):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "zzes", "sses")):
        return word[:-2]
    if word.endswith(("us", "is")):
        return word
    return word[:-1]


def plural(word: str) -> str:
    if word.endswith("s") and singular(word) != word:
        return word
    if word.endswith("y") and len(word) > 1 and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "ch", "sh", "z")):
        return word + "es"
    return word + "s"


def canonical_json(value: Any) -> str:
    """Stable JSON text: sorted keys, no whitespace, UTF-8 kept (the basis of every digest).
    NaN and Infinity raise ValueError: they are not JSON, and would be echoed into answers."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return h.hexdigest()


class DetRng:
    """A seeded generator that only relies on ``Random.random()``.

    ``random()`` is the one method Python promises to keep stable across versions for a given
    seed, so every draw here is built on it: the same seed gives the same values everywhere.
    """

    __slots__ = ("_random",)

    def __init__(self, *parts: object) -> None:
        seed = int.from_bytes(hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()[:8], "big")
        self._random = random.Random(seed).random

    def random(self) -> float:
        return self._random()

    def below(self, n: int) -> int:
        return min(int(self._random() * n), n - 1) if n > 0 else 0

    def randint(self, low: int, high: int) -> int:
        return low + self.below(high - low + 1) if high >= low else low

    def uniform(self, low: float, high: float) -> float:
        return low + (high - low) * self._random()

    def chance(self, p: float) -> bool:
        return self._random() < p

    def choice(self, items: Sequence[T]) -> T:
        return items[self.below(len(items))]

    def sample(self, items: Sequence[T], k: int) -> list[T]:
        pool = list(items)
        picked = []
        for _ in range(min(k, len(pool))):
            picked.append(pool.pop(self.below(len(pool))))
        return picked
