"""Deterministic error injection: timeouts, server errors, rate limits and empty results.

Each call draws one number in [0, 1) from a hash of (seed, session, call, index of the call in its
session) — no global random state — so a run replays exactly, a retry of the same call (a later
index) draws afresh, and different episodes fail at different places.
"""

from __future__ import annotations

import hashlib
import json

from slca_grpo.datatypes import Observation
from slca_grpo.simulator import errors as E
from slca_grpo.simulator.config import ErrorInjectionConfig

_SERVER_ERRORS = (
    (500, "Internal Server Error", "The server encountered an unexpected condition. Please try again later."),
    (502, "Bad Gateway", "The upstream service returned an invalid response. Please retry."),
    (
        503,
        "Service Unavailable",
        "The service is temporarily unavailable due to maintenance or load. Please retry shortly.",
    ),
)


class ErrorInjector:
    def __init__(self, config: ErrorInjectionConfig, seed: int) -> None:
        self.seed = seed
        self._thresholds = []
        cumulative = 0.0
        for kind, rate in (
            (E.TIMEOUT, config.timeout_rate),
            (E.SERVER_ERROR, config.server_error_rate),
            (E.RATE_LIMITED, config.rate_limit_rate),
            (E.EMPTY_RESULT, config.empty_result_rate),
        ):
            if rate > 0:
                cumulative += rate
                self._thresholds.append((cumulative, kind))

    @property
    def enabled(self) -> bool:
        return bool(self._thresholds)

    def draw(self, session_key: str, call_key: str, index: int) -> tuple[str | None, float]:
        """The injected kind for this call (None = no error) and a second draw for its details."""
        if not self._thresholds:
            return None, 0.0
        h = hashlib.sha256(f"{self.seed}\x1f{session_key}\x1f{call_key}\x1f{index}".encode()).digest()
        u = int.from_bytes(h[:8], "big") / 2**64
        detail = int.from_bytes(h[8:16], "big") / 2**64
        for threshold, kind in self._thresholds:
            if u < threshold:
                return kind, detail
        return None, detail

    @staticmethod
    def observation(kind: str, tool: str, detail: float) -> Observation:
        """The error a real API would send for ``kind`` (text varies with ``detail``)."""
        if kind == E.TIMEOUT:
            seconds = (10, 30, 60)[int(detail * 3)]
            message = f"Gateway Timeout: the upstream service did not respond within {seconds} seconds."
            return E.error_observation(kind, message, status=504, retryable=True)
        if kind == E.SERVER_ERROR:
            status, title, explanation = _SERVER_ERRORS[int(detail * len(_SERVER_ERRORS))]
            return E.error_observation(kind, f"{title}: {explanation}", status=status, retryable=True)
        if kind == E.RATE_LIMITED:
            retry_after = 1 + int(detail * 5)
            message = f"Too Many Requests: rate limit exceeded for {tool}. Retry after {retry_after} seconds."
            return E.error_observation(kind, message, status=429, retry_after=retry_after, retryable=True)
        message = "No results found for the given parameters."
        text = json.dumps({"results": [], "total_results": 0, "message": message})
        return E.error_observation(E.EMPTY_RESULT, message, text=text)
