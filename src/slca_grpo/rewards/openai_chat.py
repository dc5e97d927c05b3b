"""A chat-completions endpoint (vLLM, SGLang, hosted APIs) for the LLM judge, the LLM
completeness checker and the endpoint policy, on the shared HTTP client (``slca_grpo.http_client``).

Retried: transport errors, timeouts, HTTP 5xx and 429 (honouring ``Retry-After``, capped). Not
retried: other 4xx and replies that are not a chat completion (a deterministic server problem;
retrying would only add load).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from slca_grpo.http_client import HTTPClient, RequestFailed, RetryPolicy


class EndpointError(RuntimeError):
    """The endpoint gave no usable completion (after retries where retrying made sense)."""


def _json_reply(response: httpx.Response) -> Any:
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
    concurrency: int = 16
    http: HTTPClient = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.base_url or not self.model:
            raise ValueError("an OpenAI-compatible endpoint needs a base_url and a model name")
        if self.timeout_s <= 0 or self.max_retries < 0 or self.backoff_s < 0:
            raise ValueError("timeout_s must be > 0, max_retries and backoff_s >= 0")
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self.http = HTTPClient(
            headers=headers,
            timeout_s=self.timeout_s,
            policy=RetryPolicy(self.max_retries, self.backoff_s, self.backoff_max_s),
            concurrency=self.concurrency,
        )

    @property
    def url(self) -> str:
        base = self.base_url.rstrip("/")
        return base if base.endswith("/chat/completions") else base + "/chat/completions"

    @property
    def requests(self) -> int:
        """HTTP requests sent, retries included."""
        return self.http.stats["requests"]

    @property
    def retries(self) -> int:
        return self.http.stats["retries"]

    def payload(self, messages: list[dict[str, str]], temperature: float) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": temperature}
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        return body

    def post(self, body: dict[str, Any]) -> Any:
        """POST ``body`` and return the decoded JSON reply; EndpointError when there is none."""
        try:
            return self.http.post(self.url, body, parse=_json_reply)
        except RequestFailed as exc:
            raise EndpointError(str(exc)) from None

    async def apost(self, body: dict[str, Any]) -> Any:
        """Async twin of :meth:`post`."""
        try:
            return await self.http.apost(self.url, body, parse=_json_reply)
        except RequestFailed as exc:
            raise EndpointError(str(exc)) from None

    def complete(self, messages: list[dict[str, str]], temperature: float) -> str:
        """The completion text; raises EndpointError when there is none after retries."""
        return completion_text(self.post(self.payload(messages, temperature)))

    async def acomplete(self, messages: list[dict[str, str]], temperature: float) -> str:
        """Async twin of :meth:`complete`."""
        return completion_text(await self.apost(self.payload(messages, temperature)))

    def close(self) -> None:
        self.http.close()


class EndpointBacked:
    """What the LLM judge and the LLM completeness checker share: one endpoint, and batches run
    concurrently up to ``concurrency`` requests (the HTTP client's bound)."""

    endpoint: ChatEndpoint
    temperature: float

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
            concurrency=max(1, int(concurrency)),
        )
        self.temperature = temperature

    @property
    def concurrency(self) -> int:
        return self.endpoint.concurrency

    def close(self) -> None:
        self.endpoint.close()
