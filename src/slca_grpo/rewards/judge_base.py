"""The judge interface (docs/method.md §4 preference reward): rate a final answer 1..5 or report a failure.

Every public entry point (``rate``, ``arate``, ``rate_many``) counts calls and failures and never
raises: a broken judge costs a step its summary reward, not the step itself.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

RATING_MIN, RATING_MAX = 1, 5

T = TypeVar("T")


@dataclass(frozen=True)
class JudgeRequest:
    """What a judge sees: the user question, the tool responses (possibly none) and the answer."""

    question: str
    tool_responses: tuple[str, ...]
    answer: str

    @classmethod
    def of(cls, item: JudgeRequest | Sequence[Any]) -> JudgeRequest:
        """A request from itself or a ``(question, tool_responses, answer)`` triple."""
        if isinstance(item, JudgeRequest):
            return item
        if isinstance(item, (tuple, list)) and len(item) == 3:
            question, responses, answer = item
            if isinstance(responses, str):  # one response, not its characters
                responses = (responses,)
            return cls(str(question), tuple(str(r) for r in (responses or ())), str(answer))
        raise TypeError(f"a judge item must be a JudgeRequest or (question, tool_responses, answer), got {item!r:.80}")


@dataclass(frozen=True)
class JudgeVerdict:
    """A rating in 1..5, or ``failed`` with the reason; ``raw`` keeps the judge's text for debugging."""

    rating: int | None
    failed: bool = False
    error: str | None = None
    raw: str | None = None

    @classmethod
    def ok(cls, rating: int, raw: str | None = None) -> JudgeVerdict:
        return cls(rating=rating, failed=False, error=None, raw=raw)

    @classmethod
    def failure(cls, error: str, raw: str | None = None) -> JudgeVerdict:
        return cls(rating=None, failed=True, error=error, raw=raw)


def _checked(verdict: Any) -> JudgeVerdict:
    """Turn anything a subclass returned into a well-formed verdict (out-of-range ratings fail)."""
    if not isinstance(verdict, JudgeVerdict):
        return JudgeVerdict.failure(f"judge returned {type(verdict).__name__}, not a JudgeVerdict")
    if verdict.failed:
        return verdict
    rating = verdict.rating
    if isinstance(rating, bool) or not isinstance(rating, int) or not RATING_MIN <= rating <= RATING_MAX:
        return JudgeVerdict.failure(f"rating {rating!r} is not an integer in {RATING_MIN}..{RATING_MAX}", verdict.raw)
    return verdict


class Judge(ABC):
    """Rates final answers. Subclasses implement ``_rate`` (and optionally ``_arate``/``_rate_many``)."""

    name: str = "judge"

    def __init__(self) -> None:
        self.calls = 0
        self.failures = 0
        self._counter_lock = threading.Lock()

    # -- what subclasses provide -------------------------------------------------------------
    @abstractmethod
    def _rate(self, request: JudgeRequest) -> JudgeVerdict:
        """Rate one request; may raise (the caller turns exceptions into failures)."""

    async def _arate(self, request: JudgeRequest) -> JudgeVerdict:
        return self._rate(request)

    def _rate_many(self, requests: Sequence[JudgeRequest]) -> list[JudgeVerdict]:
        return [self._guarded(self._rate, request) for request in requests]

    # -- public, counted, never raising ------------------------------------------------------
    def rate(self, question: str, tool_responses: Iterable[str], answer: str) -> JudgeVerdict:
        request = JudgeRequest.of((question, tool_responses, answer))
        return self._record(self._guarded(self._rate, request))

    async def arate(self, question: str, tool_responses: Iterable[str], answer: str) -> JudgeVerdict:
        request = JudgeRequest.of((question, tool_responses, answer))
        try:
            verdict = await self._arate(request)
        except Exception as exc:  # a judge failure never crashes a step
            verdict = JudgeVerdict.failure(f"{type(exc).__name__}: {exc}")
        return self._record(verdict)

    def rate_many(self, items: Iterable[JudgeRequest | Sequence[Any]]) -> list[JudgeVerdict]:
        """Rate a batch (concurrently where the judge can); one verdict per item, in order."""
        requests = [JudgeRequest.of(item) for item in items]
        if not requests:
            return []
        try:
            verdicts = list(self._rate_many(requests))
            if len(verdicts) != len(requests):
                raise RuntimeError(f"judge returned {len(verdicts)} verdicts for {len(requests)} requests")
        except Exception as exc:
            verdicts = [JudgeVerdict.failure(f"{type(exc).__name__}: {exc}")] * len(requests)
        return [self._record(v) for v in verdicts]

    def reset_counters(self) -> None:
        with self._counter_lock:
            self.calls = 0
            self.failures = 0

    def close(self) -> None:
        """Release network resources, if any."""

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers -------------------------------------------------------------------------------
    @staticmethod
    def _guarded(fn: Callable[[JudgeRequest], JudgeVerdict], request: JudgeRequest) -> JudgeVerdict:
        try:
            return fn(request)
        except Exception as exc:
            return JudgeVerdict.failure(f"{type(exc).__name__}: {exc}")

    def _record(self, verdict: Any) -> JudgeVerdict:
        checked = _checked(verdict)
        with self._counter_lock:
            self.calls += 1
            if checked.failed:
                self.failures += 1
        return checked
