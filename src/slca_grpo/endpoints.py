"""OpenAI-compatible chat-completions endpoints (vLLM, SGLang, hosted APIs): the one spec grammar,
the one settings dataclass and the one client. The LLM judge, the completeness checker, the
simulator's LLM backend and the endpoint policy of evaluation use all three; τ²'s user simulator
(which talks through τ²'s litellm) and the sim-to-real recipe's ``--simulator`` use the grammar.
Where API keys come from is ``slca_grpo.keys``.

A spec is ``openai:BASE_URL#MODEL``: the prefix ``openai:`` (any case), an http(s) URL (a trailing
``/`` or ``/chat/completions`` is dropped), ``#``, and the model name as the server knows it
(everything after the last ``#``). Surrounding spaces are ignored. Where an offline choice exists
(``rule`` for judges, ``schema`` for the simulator) the caller names it and the parser accepts it.

The client is async; ``post`` and ``complete`` are blocking wrappers that run on the shared
background loop. Requests go through ``slca_grpo.http_client`` (timeouts, retries with jittered
backoff, bounded concurrency); what still fails raises :class:`EndpointError`.
"""

from __future__ import annotations

import asyncio
import reprlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload
from urllib.parse import urlparse

import httpx

from slca_grpo.aio import run_sync
from slca_grpo.http_client import DEFAULT_MAX_REPLY_BYTES, HTTPClient, RequestFailed, RetryPolicy

# The largest reply read from an endpoint whose answer is a verdict or one tool observation (the
# judge, the completeness checker, the simulator's LLM backend); a policy's completions may take
# DEFAULT_MAX_REPLY_BYTES (4 MiB).
SHORT_REPLY_BYTES = 2**20

T = TypeVar("T")

SPEC_PREFIX = "openai:"
SPEC_FORMAT = "openai:BASE_URL#MODEL"
SPEC_EXAMPLE = "openai:http://localhost:8000/v1#Qwen/Qwen3-8B"
CHAT_PATH = "/chat/completions"

__all__ = [
    "ChatClient",
    "EndpointConfig",
    "EndpointError",
    "EndpointSpec",
    "EndpointSpecError",
    "completion_text",
    "is_endpoint_spec",
    "json_reply",
    "parse_endpoint_spec",
]


class EndpointSpecError(ValueError):
    """A spec that is not ``openai:BASE_URL#MODEL`` (nor the caller's offline choice)."""


class EndpointError(RuntimeError):
    """The endpoint gave no usable reply (after retries where retrying made sense)."""


@dataclass(frozen=True)
class EndpointSpec:
    """Where a model is served: the base URL (without ``/chat/completions``) and its name there."""

    base_url: str
    model: str

    def __str__(self) -> str:
        return f"{SPEC_PREFIX}{self.base_url}#{self.model}"


def is_endpoint_spec(spec: str | None) -> bool:
    """Whether ``spec`` asks for an endpoint (starts with ``openai:``), well formed or not."""
    return (spec or "").strip().lower().startswith(SPEC_PREFIX)


@overload
def parse_endpoint_spec(spec: str) -> EndpointSpec: ...


@overload
def parse_endpoint_spec(spec: str, *, offline: str) -> EndpointSpec | None: ...


def parse_endpoint_spec(spec: str, *, offline: str | None = None) -> EndpointSpec | None:
    """The endpoint of ``openai:BASE_URL#MODEL``; None for the ``offline`` name, if the caller has one.

    Anything else raises :class:`EndpointSpecError` saying what is wrong and what to pass.
    """
    text = (spec or "").strip()
    if offline is not None and text == offline:
        return None
    if not is_endpoint_spec(text):
        raise _spec_error(spec, f"it does not start with {SPEC_PREFIX!r}", offline)
    url, sep, model = text[len(SPEC_PREFIX) :].rpartition("#")
    if not sep or not model.strip():
        raise _spec_error(spec, "it names no model (add #MODEL after the URL)", offline)
    url = url.strip().rstrip("/").removesuffix(CHAT_PATH).rstrip("/")
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise _spec_error(spec, f"{_QUOTE.repr(url)} is not an http(s) URL", offline)
    return EndpointSpec(base_url=url, model=model.strip())


# A spec is echoed in its error; a huge one (a pasted file, hostile input) is shown cut in the middle.
_QUOTE = reprlib.Repr()
_QUOTE.maxstring = 160


def _spec_error(spec: str, problem: str, offline: str | None) -> EndpointSpecError:
    choices = f"{offline!r} or {SPEC_FORMAT}" if offline is not None else SPEC_FORMAT
    return EndpointSpecError(
        f"bad endpoint spec {_QUOTE.repr(spec)}: {problem}; expected {choices}, e.g. {SPEC_EXAMPLE}"
    )


@dataclass(frozen=True)
class EndpointConfig:
    """One model behind an OpenAI-compatible endpoint, and how to talk to it.

    Retries wait ``backoff_s · 2^(retry−1)``, capped at ``max_backoff_s``, times a draw in [0.5, 1);
    at most ``concurrency`` requests are in flight per event loop.
    """

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 60.0
    max_retries: int = 3
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    concurrency: int = 16
    max_tokens: int | None = None
    # The largest reply body read (a chat completion is a few KB): each kind of endpoint sets its own.
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES

    def __post_init__(self) -> None:
        if not self.base_url or not self.model:
            raise ValueError("an OpenAI-compatible endpoint needs a base_url and a model name")
        if self.timeout_s <= 0 or self.max_retries < 0 or self.backoff_s < 0:
            raise ValueError("timeout_s must be > 0, max_retries and backoff_s >= 0")
        if self.max_reply_bytes < 1:
            raise ValueError(f"max_reply_bytes must be >= 1, got {self.max_reply_bytes}")

    @property
    def url(self) -> str:
        """The ``/chat/completions`` URL."""
        base = self.base_url.rstrip("/")
        return base if base.endswith(CHAT_PATH) else base + CHAT_PATH

    @property
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(self.max_retries, self.backoff_s, self.max_backoff_s)


def json_reply(response: httpx.Response) -> Any:
    """The decoded body; a 2xx body that is not JSON is a server problem that retrying will not fix."""
    try:
        return response.json()
    except ValueError:
        raise EndpointError(f"reply is not JSON: {response.text[:200]!r}") from None


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


class ChatClient:
    """``POST {base_url}/chat/completions`` for one :class:`EndpointConfig`.

    ``transport`` replaces the network and ``sleep`` the waits between attempts (tests).
    """

    def __init__(
        self,
        config: EndpointConfig,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.config = config
        self.http = HTTPClient(
            headers={"Authorization": f"Bearer {config.api_key}"} if config.api_key else {},
            timeout_s=config.timeout_s,
            policy=config.retry_policy,
            concurrency=config.concurrency,
            max_reply_bytes=config.max_reply_bytes,
            transport=transport,
            sleep=sleep,
        )

    @property
    def model(self) -> str:
        return self.config.model

    @property
    def concurrency(self) -> int:
        return self.http.concurrency

    @property
    def requests(self) -> int:
        """HTTP requests sent, retries included."""
        return self.http.stats["requests"]

    @property
    def retries(self) -> int:
        return self.http.stats["retries"]

    def payload(self, messages: list[dict[str, Any]], temperature: float) -> dict[str, Any]:
        """The request body: model, messages, temperature, and ``max_tokens`` when the config sets it."""
        body: dict[str, Any] = {"model": self.config.model, "messages": messages, "temperature": temperature}
        if self.config.max_tokens is not None:
            body["max_tokens"] = self.config.max_tokens
        return body

    async def apost(self, body: dict[str, Any], parse: Callable[[httpx.Response], T] = json_reply) -> T:
        """POST ``body`` and return ``parse(reply)``; EndpointError when there is no usable reply.

        ``parse`` may raise ``RetryableReply`` for a reply worth asking for again.
        """
        try:
            return await self.http.apost(self.config.url, body, parse=parse)
        except RequestFailed as exc:
            raise EndpointError(str(exc)) from None

    async def acomplete(self, messages: list[dict[str, Any]], temperature: float) -> str:
        """The completion text; EndpointError when there is none after retries."""
        return completion_text(await self.apost(self.payload(messages, temperature)))

    def post(self, body: dict[str, Any], parse: Callable[[httpx.Response], T] = json_reply) -> T:
        """Blocking :meth:`apost`."""
        return run_sync(self.apost(body, parse))

    def complete(self, messages: list[dict[str, Any]], temperature: float) -> str:
        """Blocking :meth:`acomplete`."""
        return run_sync(self.acomplete(messages, temperature))

    async def aclose(self) -> None:
        """Close the client of the running loop."""
        await self.http.aclose()

    def close(self) -> None:
        """Close the blocking calls' client; clients of other loops close with :meth:`aclose` or their loop."""
        self.http.close()
