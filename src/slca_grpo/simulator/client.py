"""``SimulatorClient``: the simulator service over HTTP, with the in-process simulator's interface.

Requests go through the shared HTTP client (``slca_grpo.http_client``): transport errors, 5xx and
429 are retried with jittered exponential backoff; anything still failing becomes an error
observation of kind ``backend_error`` (never an exception), so rollout code treats a remote
simulator exactly like a local one.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import httpx

from slca_grpo.aio import run_sync
from slca_grpo.datatypes import Observation, ObservationError, ToolCall
from slca_grpo.http_client import HTTPClient, RequestFailed, RetryPolicy
from slca_grpo.keys import SIMULATOR_TOKEN_ENV
from slca_grpo.simulator import errors as E
from slca_grpo.simulator.base import BatchItem
from slca_grpo.simulator.config import SimulatorServiceConfig
from slca_grpo.simulator.text import TokenCounter, approx_token_count, truncate_middle_to_tokens

TOKEN_ENV = SIMULATOR_TOKEN_ENV
# A batch of up to 256 observations, each cut to the observation budget, fits well within this.
SERVICE_MAX_REPLY_BYTES = 64 * 2**20


class _Failure(Exception):
    """A reply the client cannot use (after retries, or malformed)."""


class SimulatorClient:
    """A client of ``service.url``; the token is ``token``, else ``$SLCA_SIM_TOKEN``.
    ``max_observation_tokens`` re-truncates observations here (``count_tokens`` counts them);
    ``transport`` replaces the network (tests)."""

    def __init__(
        self,
        service: SimulatorServiceConfig,
        *,
        token: str | None = None,
        max_observation_tokens: int | None = None,
        count_tokens: TokenCounter | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not service.url:
            raise ValueError("a simulator client needs the service's url (simulator_service.url)")
        self.base_url = service.url.rstrip("/")
        token = token if token is not None else os.environ.get(TOKEN_ENV)
        self.max_retries = service.max_retries
        self.batch_size = service.batch_size
        self.max_observation_tokens = max_observation_tokens
        self.count_tokens = count_tokens or approx_token_count
        self.http = HTTPClient(
            self.base_url,
            headers={"Authorization": f"Bearer {token}"} if token else {},
            timeout_s=service.timeout_s,
            policy=RetryPolicy(service.max_retries, service.backoff_s, service.max_backoff_s),
            concurrency=service.concurrency,
            max_reply_bytes=SERVICE_MAX_REPLY_BYTES,
            transport=transport,  # blocking calls too: they run on the shared background loop
        )
        self._lock = threading.Lock()
        self._failures = 0

    @property
    def counters(self) -> dict[str, int]:
        """Requests sent and retries (the HTTP client's), and observations that are failures."""
        return {
            "requests": self.http.stats["requests"],
            "retries": self.http.stats["retries"],
            "failures": self._failures,
        }

    # -- simulator interface -----------------------------------------------------------------

    async def asimulate(
        self, call: ToolCall | dict[str, Any], tools: list[dict[str, Any]], session_id: str | None = None
    ) -> Observation:
        start = time.perf_counter()
        payload = _request_payload(call, tools, session_id)
        if isinstance(payload, Observation):
            return payload
        try:
            body = await self._post("/v1/simulate", payload)
        except _Failure as exc:
            return self._failure(exc, start)
        return self._observation(body, start)

    async def asimulate_many(self, items: Sequence[BatchItem]) -> list[Observation]:
        start = time.perf_counter()
        payloads = [_item_payload(i, item) for i, item in enumerate(items)]
        chunks = list(_chunks(payloads, self.batch_size))

        async def send(chunk: list[Any]) -> Any:
            sendable = [p for p in chunk if not isinstance(p, Observation)]
            if not sendable:
                return {"results": []}
            try:
                return await self._post("/v1/simulate_batch", {"requests": sendable})
            except _Failure as exc:
                return exc

        bodies = await asyncio.gather(*(send(c) for c in chunks))
        results: list[Observation] = []
        for chunk, body in zip(chunks, bodies, strict=True):
            results.extend(self._merge(chunk, body, start))
        return results

    # Blocking forms: the same requests, run on the shared background loop.

    def simulate(
        self, call: ToolCall | dict[str, Any], tools: list[dict[str, Any]], session_id: str | None = None
    ) -> Observation:
        return run_sync(self.asimulate(call, tools, session_id))

    def simulate_many(self, items: Sequence[BatchItem]) -> list[Observation]:
        return run_sync(self.asimulate_many(items))

    def reset_session(self, session_id: str) -> bool:
        try:
            body = run_sync(self._post(f"/v1/sessions/{quote(str(session_id), safe='')}/reset", {}))
        except _Failure:
            return False
        return bool(body.get("reset")) if isinstance(body, dict) else False

    def healthz(self) -> dict[str, Any]:
        return self.http.request("GET", "/healthz")

    def metrics(self) -> str:
        return self.http.request("GET", "/metrics", parse=lambda response: response.text)

    def close(self) -> None:
        self.http.close()

    async def aclose(self) -> None:
        await self.http.aclose()

    def __enter__(self) -> SimulatorClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport ---------------------------------------------------------------------------

    async def _post(self, path: str, payload: dict[str, Any]) -> Any:
        try:
            return await self.http.apost(path, payload)
        except RequestFailed as exc:
            raise _Failure(f"simulator service failed: {exc}") from None

    # -- decoding ----------------------------------------------------------------------------

    def _failure(self, exc: Exception, start: float) -> Observation:
        with self._lock:
            self._failures += 1
        obs = E.error_observation(E.BACKEND_ERROR, str(exc))
        obs.latency_ms = (time.perf_counter() - start) * 1000.0
        return obs

    def _observation(self, body: Any, start: float) -> Observation:
        if not isinstance(body, dict) or not isinstance(body.get("observation"), str):
            return self._failure(_Failure("malformed answer from the simulator service"), start)
        error = body.get("error")
        obs = Observation(
            text=body["observation"],
            error=ObservationError(str(error.get("kind")), str(error.get("message")))
            if isinstance(error, dict)
            else None,
            cached=bool(body.get("cached")),
            latency_ms=float(body["latency_ms"])
            if isinstance(body.get("latency_ms"), (int, float))
            else (time.perf_counter() - start) * 1000.0,
        )
        if self.max_observation_tokens is not None:
            obs.text = truncate_middle_to_tokens(obs.text, self.max_observation_tokens, self.count_tokens)
        return obs

    def _merge(self, chunk: list[Any], body: Any, start: float) -> list[Observation]:
        """Put the service's answers back in place among the items refused locally."""
        if isinstance(body, Exception):
            answers: list[Any] = [body] * len(chunk)
        else:
            answers = list(body.get("results", [])) if isinstance(body, dict) else []
        sent = iter(answers)
        out = []
        for item in chunk:
            if isinstance(item, Observation):
                out.append(item)
                continue
            answer = next(sent, None)
            if isinstance(answer, Exception):
                out.append(self._failure(answer, start))
            elif answer is None:
                out.append(self._failure(_Failure("the service returned fewer results than requests"), start))
            else:
                out.append(self._observation(answer, start))
        return out


def _request_payload(call: Any, tools: Any, session_id: str | None) -> dict[str, Any] | Observation:
    if isinstance(call, ToolCall):
        call_dict: Any = call.to_dict()
    elif isinstance(call, dict):
        call_dict = {"name": call.get("name"), "arguments": call.get("arguments", call.get("parameters", {}))}
    else:
        return E.error_observation(E.UNKNOWN_TOOL, "The call must be a ToolCall or a {name, arguments} object.")
    payload = {
        "tools": tools,
        "call": call_dict,
        "session_id": None if session_id is None else str(session_id),
    }
    try:
        json.dumps(payload)
    except (TypeError, ValueError) as exc:
        return E.error_observation(E.INVALID_ARGUMENTS, f"The call or tools are not JSON-serialisable: {exc}")
    return payload


def _item_payload(index: int, item: Any) -> dict[str, Any] | Observation:
    if isinstance(item, (tuple, list)) and len(item) in (2, 3):
        return _request_payload(item[0], item[1], item[2] if len(item) == 3 else None)
    return E.error_observation(E.INVALID_ARGUMENTS, f"batch item {index} must be (call, tools[, session_id])")


def _chunks(items: list[Any], size: int) -> Any:
    for i in range(0, len(items), size):
        yield items[i : i + size]
