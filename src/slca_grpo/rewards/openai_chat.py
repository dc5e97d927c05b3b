"""A minimal OpenAI-compatible chat-completions client with retries (vLLM, SGLang, hosted APIs).

Retried, with exponential backoff: connection errors, timeouts and other transport errors, HTTP
5xx and 429 (honouring ``Retry-After``, capped). Not retried: other 4xx and replies that are not
a chat completion (a deterministic server problem; retrying would only add load).
"""

from __future__ import annotations

import asyncio
import os
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

RETRY_STATUS = frozenset({429, 500, 502, 503, 504}) | frozenset(range(505, 600))


class EndpointError(RuntimeError):
    """The endpoint gave no usable completion (after retries where retrying made sense)."""


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: fall back to our own backoff
        return None


def completion_text(data: Any) -> str:
    """The assistant text of a chat-completion body; reasoning models that leave ``content`` empty
    fall back to their ``reasoning_content``."""
    try:
        message = data["choices"][0]["message"]
    except (KeyError, IndexError, TypeError) as exc:
        raise EndpointError(f"reply is not a chat completion: missing {exc}") from None
    if not isinstance(message, dict):
        raise EndpointError("reply is not a chat completion: 'message' is not an object")
    for key in ("content", "reasoning_content", "reasoning"):
        text = message.get(key)
        if isinstance(text, str) and text.strip():
            return text
    raise EndpointError("empty completion")


@dataclass
class ChatEndpoint:
    """One model behind an OpenAI-compatible ``/chat/completions`` URL."""

    base_url: str
    model: str
    api_key: str | None = None
    timeout_s: float = 60.0
    max_retries: int = 4
    backoff_s: float = 0.5
    backoff_max_s: float = 8.0
    max_tokens: int | None = None
    requests: int = 0  # HTTP requests sent, retries included
    retries: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.base_url or not self.model:
            raise ValueError("an OpenAI-compatible endpoint needs a base_url and a model name")
        if self.timeout_s <= 0 or self.max_retries < 0 or self.backoff_s < 0:
            raise ValueError("timeout_s must be > 0, max_retries and backoff_s >= 0")

    @property
    def url(self) -> str:
        base = self.base_url.rstrip("/")
        return base if base.endswith("/chat/completions") else base + "/chat/completions"

    @property
    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def payload(self, messages: list[dict[str, str]], temperature: float) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": temperature}
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        return body

    def _delay(self, attempt: int, hint: float | None) -> float:
        backoff = min(self.backoff_max_s, self.backoff_s * (2**attempt))
        return min(self.backoff_max_s, hint) if hint is not None else backoff

    def _count(self, retry: bool) -> None:
        with self._lock:
            self.requests += 1
            if retry:
                self.retries += 1

    def _interpret(self, response: httpx.Response) -> Any:
        if response.status_code in RETRY_STATUS:
            raise _Retryable(f"HTTP {response.status_code}", _retry_after(response))
        if response.status_code >= 400:
            raise EndpointError(f"HTTP {response.status_code}: {response.text[:200]}")
        try:
            return response.json()
        except ValueError:
            raise EndpointError(f"reply is not JSON: {response.text[:200]!r}") from None

    def post(self, client: httpx.Client, body: dict[str, Any]) -> Any:
        """POST ``body`` and return the decoded JSON reply; raises EndpointError when there is none
        after retries."""
        last = "no attempt"
        for attempt in range(self.max_retries + 1):
            self._count(retry=attempt > 0)
            try:
                return self._interpret(client.post(self.url, json=body, headers=self.headers))
            except httpx.TransportError as exc:  # connect errors, timeouts, dropped connections
                last, hint = f"{type(exc).__name__}: {exc}", None
            except _Retryable as exc:
                last, hint = str(exc), exc.retry_after
            if attempt < self.max_retries:
                time.sleep(self._delay(attempt, hint))
        raise EndpointError(f"gave up after {self.max_retries + 1} attempts: {last}")

    async def apost(self, client: httpx.AsyncClient, body: dict[str, Any]) -> Any:
        """Async twin of :meth:`post`."""
        last = "no attempt"
        for attempt in range(self.max_retries + 1):
            self._count(retry=attempt > 0)
            try:
                return self._interpret(await client.post(self.url, json=body, headers=self.headers))
            except httpx.TransportError as exc:
                last, hint = f"{type(exc).__name__}: {exc}", None
            except _Retryable as exc:
                last, hint = str(exc), exc.retry_after
            if attempt < self.max_retries:
                await asyncio.sleep(self._delay(attempt, hint))
        raise EndpointError(f"gave up after {self.max_retries + 1} attempts: {last}")

    def complete(self, client: httpx.Client, messages: list[dict[str, str]], temperature: float) -> str:
        """The completion text; raises EndpointError when there is none after retries."""
        return completion_text(self.post(client, self.payload(messages, temperature)))

    async def acomplete(self, client: httpx.AsyncClient, messages: list[dict[str, str]], temperature: float) -> str:
        """Async twin of :meth:`complete`."""
        return completion_text(await self.apost(client, self.payload(messages, temperature)))


class EndpointClients:
    """Lazily created, reused HTTP clients for one endpoint: a sync client shared by threads, and
    a fresh async client per batch (async clients are bound to the event loop that made them)."""

    def __init__(self, endpoint: ChatEndpoint, concurrency: int) -> None:
        self.endpoint = endpoint
        self.concurrency = max(1, concurrency)
        self._client: httpx.Client | None = None
        self._ssl: ssl.SSLContext | None = None
        self._lock = threading.Lock()

    def _ssl_context(self) -> ssl.SSLContext:
        # Building a CA context costs ~60 ms; a batch creates a new async client, so keep one.
        if self._ssl is None:
            cafile = os.environ.get("SSL_CERT_FILE")
            if not cafile:
                try:
                    import certifi

                    cafile = certifi.where()
                except ImportError:  # pragma: no cover - certifi comes with httpx
                    cafile = None
            self._ssl = ssl.create_default_context(cafile=cafile)
        return self._ssl

    def _limits(self) -> httpx.Limits:
        return httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)

    @property
    def sync(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(
                    timeout=self.endpoint.timeout_s, limits=self._limits(), verify=self._ssl_context()
                )
            return self._client

    def new_async(self) -> httpx.AsyncClient:
        with self._lock:
            context = self._ssl_context()
        return httpx.AsyncClient(timeout=self.endpoint.timeout_s, limits=self._limits(), verify=context)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None


class EndpointBacked:
    """What the LLM judge and the LLM completeness checker share: one endpoint, pooled clients,
    and batches run concurrently up to ``concurrency`` requests."""

    endpoint: ChatEndpoint
    temperature: float
    concurrency: int

    def _init_endpoint(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        *,
        temperature: float,
        timeout_s: float,
        max_retries: int,
        concurrency: int,
        backoff_s: float,
        backoff_max_s: float,
        max_tokens: int | None,
    ) -> None:
        self.endpoint = ChatEndpoint(
            base_url=base_url,
            model=model,
            api_key=api_key,
            timeout_s=timeout_s,
            max_retries=max_retries,
            backoff_s=backoff_s,
            backoff_max_s=backoff_max_s,
            max_tokens=max_tokens,
        )
        self.temperature = temperature
        self.concurrency = max(1, int(concurrency))
        self._clients = EndpointClients(self.endpoint, self.concurrency)

    async def _bounded_gather(self, items: list[Any], call: Any) -> list[Any]:
        """``[await call(client, item) for item in items]``, at most ``concurrency`` at a time."""
        limit = asyncio.Semaphore(self.concurrency)

        async def one(client: httpx.AsyncClient, item: Any) -> Any:
            async with limit:
                return await call(client, item)

        async with self._clients.new_async() as client:
            return list(await asyncio.gather(*(one(client, item) for item in items)))

    def close(self) -> None:
        self._clients.close()
