"""The one HTTP client behind every outbound call: the LLM judge and completeness checker, the
simulator's LLM backend, the simulator service client and the endpoint policy of evaluation.

Every attempt has a deadline: the whole reply, from sending to its last byte, within ``timeout_s``
(a server trickling bytes cannot hold a request longer), and a reply body is read as a stream and
refused past ``max_reply_bytes`` (a server cannot flood the process). Transport errors (refused
connections, timeouts, dropped connections, deadlines), HTTP 429 and 5xx, and replies the caller's
``parse`` marks as retryable are retried (tenacity) with jittered exponential backoff that honours
``Retry-After`` up to the cap; other 4xx and an oversized reply fail at once. At most
``concurrency`` requests are in flight per client and event loop. What still fails raises
:class:`RequestFailed` with the last reason; callers turn it into a failure verdict or an error
observation, never a crashed step.

Requests are async; the blocking methods run them on the shared background loop
(``slca_grpo.aio``), so the retry logic exists once and blocking callers share one pool.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json as jsonlib
import os
import random
import ssl
import threading
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from slca_grpo.aio import existing_background_loop, run_sync

T = TypeVar("T")

__all__ = ["HTTPClient", "RequestFailed", "RetryPolicy", "RetryableReply", "retry_after_seconds"]


class RequestFailed(RuntimeError):
    """No usable reply: a non-retryable status, or every attempt failed (``reason`` is the last)."""

    def __init__(self, reason: str, *, attempts: int = 1, status: int | None = None) -> None:
        super().__init__(reason if attempts == 1 else f"gave up after {attempts} attempts: {reason}")
        self.reason = reason
        self.attempts = attempts
        self.status = status


class RetryableReply(Exception):
    """Raised by a ``parse`` function (or internally) for a reply worth asking for again."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.backoff_s < 0 or self.max_backoff_s < 0:
            raise ValueError("max_retries, backoff_s and max_backoff_s must be >= 0")

    def delay(self, retry: int, retry_after: float | None = None, draw: Callable[[], float] = random.random) -> float:
        """Seconds before retry number ``retry`` (1, 2, ...): ``backoff_s · 2^(retry−1)``, capped,
        times a uniform draw in [0.5, 1); a ``Retry-After`` hint is a floor, also capped."""
        delay = min(self.max_backoff_s, self.backoff_s * 2 ** (retry - 1)) * (0.5 + draw() / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_backoff_s))
        return delay


def retry_after_seconds(response: httpx.Response) -> float | None:
    """The ``Retry-After`` header in seconds (None when absent or an HTTP date)."""
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def decode_json(response: httpx.Response) -> Any:
    """The default ``parse``: the JSON body; a 2xx body that is not JSON is worth another try."""
    try:
        return response.json()
    except ValueError:
        raise RetryableReply("response body is not JSON") from None


def _body(payload: Any) -> dict[str, Any]:
    # Serialised here rather than by httpx, which refuses NaN: model-written arguments may hold it.
    if payload is None:
        return {}
    content = jsonlib.dumps(payload, ensure_ascii=False).encode()
    return {"content": content, "headers": {"Content-Type": "application/json"}}


@functools.lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    # Building a CA context costs ~60 ms and async clients come and go with event loops: keep one.
    cafile = os.environ.get("SSL_CERT_FILE")
    if not cafile:
        try:
            import certifi

            cafile = certifi.where()
        except ImportError:  # pragma: no cover - certifi comes with httpx
            cafile = None
    return ssl.create_default_context(cafile=cafile)


# A chat completion is a few KB; a reply this large is a misbehaving server.
DEFAULT_MAX_REPLY_BYTES = 4 * 2**20

# Headers that describe the body as it came over the wire, not as it is kept (decoded, whole).
_WIRE_HEADERS = ("content-encoding", "content-length", "transfer-encoding")


class HTTPClient:
    """POST/GET with timeouts, retries and bounded concurrency; async, with blocking wrappers; thread-safe.

    ``transport`` replaces the network (tests) and ``sleep`` the waits between attempts. ``stats``
    counts requests sent, retries and requests that failed.
    """

    def __init__(
        self,
        base_url: str = "",
        *,
        headers: dict[str, str] | None = None,
        timeout_s: float = 60.0,
        policy: RetryPolicy | None = None,
        concurrency: int = 16,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if max_reply_bytes < 1:
            raise ValueError(f"max_reply_bytes must be >= 1, got {max_reply_bytes}")
        self.max_reply_bytes = int(max_reply_bytes)
        self.base_url = base_url.rstrip("/")
        self.headers = dict(headers or {})
        self.timeout_s = timeout_s
        self.policy = policy or RetryPolicy()
        self.concurrency = max(1, int(concurrency))
        self._transport = transport
        self._sleep = sleep
        self._async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[httpx.AsyncClient, asyncio.Semaphore]]
        self._async = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self.stats = {"requests": 0, "retries": 0, "failures": 0}

    # -- clients -----------------------------------------------------------------------------

    def _client(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        # Async clients are bound to the loop that made them: one per running loop.
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._async.get(loop)
            if entry is None:
                limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
                client = httpx.AsyncClient(
                    transport=self._transport,
                    base_url=self.base_url,
                    headers=self.headers,
                    timeout=self.timeout_s,
                    limits=limits,
                    verify=_ssl_context(),
                )
                entry = self._async[loop] = (client, asyncio.Semaphore(self.concurrency))
            return entry

    def close(self) -> None:
        """Close the background loop's client (the blocking calls') and those of loops no longer running."""
        with self._lock:
            entries = list(self._async.items())
            self._async.clear()
        background = existing_background_loop()
        for loop, (client, _) in entries:
            if loop.is_closed():
                continue
            if not loop.is_running():
                loop.run_until_complete(client.aclose())
            elif loop is background and not _running_on(loop):
                try:
                    asyncio.run_coroutine_threadsafe(client.aclose(), loop).result(timeout=5)
                except concurrent.futures.TimeoutError:  # a loop this busy closes it with the process
                    pass

    async def aclose(self) -> None:
        """Close the client of the running loop (call it before a short-lived loop ends)."""
        with self._lock:
            entry = self._async.pop(asyncio.get_running_loop(), None)
        if entry is not None:
            await entry[0].aclose()

    # -- requests ----------------------------------------------------------------------------

    def _count(self, name: str) -> None:
        with self._lock:
            self.stats[name] += 1

    def _wait(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        hint = error.retry_after if isinstance(error, RetryableReply) else None
        return self.policy.delay(state.attempt_number, hint)

    def _interpret(self, response: httpx.Response, parse: Callable[[httpx.Response], T]) -> T:
        status = response.status_code
        if status == 429 or status >= 500:
            raise RetryableReply(f"HTTP {status}", retry_after_seconds(response))
        if status >= 400:
            raise RequestFailed(f"HTTP {status}: {response.text[:200]}", status=status)
        return parse(response)

    async def _exchange(self, client: httpx.AsyncClient, method: str, url: str, body: dict) -> httpx.Response:
        """One attempt: the reply read as a stream, at most ``max_reply_bytes`` of it (decoded)."""
        cap = self.max_reply_bytes
        too_big = f"reply body is over {cap:,} bytes (max_reply_bytes); refused"
        async with client.stream(method, url, **body) as response:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > cap and "content-encoding" not in response.headers:
                raise RequestFailed(too_big, status=response.status_code)
            chunks, size = [], 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > cap:
                    raise RequestFailed(too_big, status=response.status_code)
                chunks.append(chunk)
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _WIRE_HEADERS]
        return httpx.Response(response.status_code, headers=headers, content=b"".join(chunks), request=response.request)

    async def arequest(
        self, method: str, url: str, *, json: Any = None, parse: Callable[[httpx.Response], T] = decode_json
    ) -> T:
        """Send and return ``parse(response)``; ``RequestFailed`` when there is no usable reply."""
        (client, slots), body = self._client(), _body(json)  # serialised once, sent on every attempt
        retrying = AsyncRetrying(
            sleep=self._sleep,
            stop=stop_after_attempt(self.policy.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception_type(RetryableReply),
            before_sleep=lambda state: self._count("retries"),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    self._count("requests")
                    async with slots:  # waiting for a slot is not the server's time
                        try:
                            response = await asyncio.wait_for(self._exchange(client, method, url, body), self.timeout_s)
                        except asyncio.TimeoutError:
                            raise RetryableReply(f"Timeout: no complete reply within {self.timeout_s:g} s") from None
                        except httpx.TransportError as exc:
                            raise RetryableReply(f"{type(exc).__name__}: {exc}") from None
                    return self._interpret(response, parse)
        except RetryableReply as exc:
            self._count("failures")
            raise RequestFailed(str(exc), attempts=self.policy.max_retries + 1) from None
        except RequestFailed:
            self._count("failures")
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    def request(
        self, method: str, url: str, *, json: Any = None, parse: Callable[[httpx.Response], T] = decode_json
    ) -> T:
        """Blocking :meth:`arequest`, on the shared background loop."""
        return run_sync(self.arequest(method, url, json=json, parse=parse))

    async def apost(self, url: str, json: Any, *, parse: Callable[[httpx.Response], T] = decode_json) -> T:
        return await self.arequest("POST", url, json=json, parse=parse)

    def post(self, url: str, json: Any, *, parse: Callable[[httpx.Response], T] = decode_json) -> T:
        """Blocking :meth:`apost`."""
        return self.request("POST", url, json=json, parse=parse)

    def __enter__(self) -> HTTPClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _running_on(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
