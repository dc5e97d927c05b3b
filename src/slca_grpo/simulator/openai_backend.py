"""The LLM backend: any OpenAI-compatible chat-completions endpoint plays the API server.

Prompt = the called tool's schema (dropped under the ``no_schema`` ablation) + the session so far
+ the request; the model must answer with the JSON body only. Transport failures, 5xx and 429 are
retried with exponential backoff (honouring ``Retry-After``); an answer that is not JSON or does
not match ``returns`` is re-asked once with the problem named. Requests go through the shared
chat-completions client (``slca_grpo.endpoints``). Failures become error results, never exceptions.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from slca_grpo.datatypes import ObservationError
from slca_grpo.endpoints import ChatClient, EndpointError
from slca_grpo.http_client import RetryableReply
from slca_grpo.simulator import errors as E
from slca_grpo.simulator.base import Backend, BackendRequest, BackendResult
from slca_grpo.simulator.checks import validate_value
from slca_grpo.simulator.config import OpenAIConfig
from slca_grpo.simulator.text import extract_json

# Bump when the prompt changes, so old cache entries are not replayed.
PROMPT_VERSION = "sgls-v1"
_HISTORY_ANSWER_CHARS = 1500

SYSTEM_PROMPT = (
    "You are the backend server of a software API. You receive one API request and reply with the "
    "exact response body the server returns: a single JSON value and nothing else (no prose, no "
    "markdown, no code fences, no explanations). Make the response realistic and specific: concrete "
    "names, ids, dates, numbers. Stay consistent with the API documentation, the request's arguments "
    "and everything earlier responses in this session established. If the request cannot succeed, "
    "return a realistic JSON error object instead."
)


class OpenAIBackend(Backend):
    name = "openai"
    is_async = True
    bounds_itself = True  # every request has its own deadline and retries (slca_grpo.http_client)

    def __init__(
        self,
        config: OpenAIConfig,
        seed: int = 0,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.config = config
        self.seed = seed
        self.client = ChatClient(config.endpoint(), transport=transport, sleep=sleep)
        self._lock = threading.Lock()
        self._counts = {"failures": 0, "reasks": 0, "invalid_answers": 0}

    @property
    def counters(self) -> dict[str, int]:
        """Requests sent and retries (the HTTP client's), failures, re-asks and unusable answers."""
        return {"requests": self.client.requests, "retries": self.client.retries, **self._counts}

    def cache_identity(self) -> dict[str, Any]:
        c = self.config
        return {
            "backend": self.name,
            "model": c.model,
            "prompt_version": PROMPT_VERSION,
            "no_schema": c.no_schema,
            "temperature": c.temperature,
        }

    def stats(self) -> dict[str, float]:
        return dict(self.counters)

    def _count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    # -- prompt ------------------------------------------------------------------------------

    def build_messages(self, request: BackendRequest) -> list[dict[str, str]]:
        spec = request.spec
        parts = [SYSTEM_PROMPT]
        if self.config.no_schema:
            parts.append(f"The endpoint called is `{spec.name}`.")
        else:
            doc = {k: spec.function[k] for k in ("name", "description", "parameters") if k in spec.function}
            parts.append("API documentation of the endpoint called:\n" + json.dumps(doc, ensure_ascii=False))
            if spec.returns is not None:
                parts.append(
                    "The response body must be valid against this JSON Schema:\n"
                    + json.dumps(spec.returns, ensure_ascii=False)
                )
        history = list(request.history)[-self.config.history_turns :] if self.config.history_turns else []
        if history:
            lines = []
            for i, (call, answer) in enumerate(history, 1):
                if len(answer) > _HISTORY_ANSWER_CHARS:
                    answer = answer[:_HISTORY_ANSWER_CHARS] + "…"
                lines.append(f"{i}. request: {json.dumps(call, ensure_ascii=False)}\n   response: {answer}")
            parts.append(
                "Earlier requests in this session and the responses given (oldest first):\n" + "\n".join(lines)
            )
        if request.target is not None and request.target.data:
            parts.append(
                f"Current state of the record this request refers to ({request.target.id_key}="
                f"{request.target.id_value}):\n" + json.dumps(request.target.data, ensure_ascii=False)
            )
        if request.related:
            parts.append("Other records this request refers to:\n" + json.dumps(request.related, ensure_ascii=False))
        call = {"name": spec.name, "arguments": request.call.arguments}
        user = "Request:\n" + json.dumps(call, ensure_ascii=False) + "\n\nReply with the JSON response body only."
        return [{"role": "system", "content": "\n\n".join(parts)}, {"role": "user", "content": user}]

    # -- answering ---------------------------------------------------------------------------

    async def agenerate(self, request: BackendRequest) -> BackendResult:
        messages = self.build_messages(request)
        validator = None if self.config.no_schema else request.spec.returns_validator
        problem: str | None = "no answer"
        for round_ in range(1 + self.config.max_reasks):
            try:
                content = await self._complete(messages)
            except EndpointError as exc:
                self._count("failures")
                return BackendResult(error=ObservationError(E.BACKEND_ERROR, str(exc)))
            data, problem = extract_json(content)
            if problem is None and validator is not None and not _is_api_error(data):
                problem = validate_value(validator, data)
                if problem is not None:
                    problem = f"the response does not match the response schema ({problem})"
            if problem is None:
                return BackendResult(text=json.dumps(data, ensure_ascii=False), data=data)
            if round_ < self.config.max_reasks:
                self._count("reasks")
                messages = [
                    *messages,
                    {"role": "assistant", "content": content},
                    {
                        "role": "user",
                        "content": f"That reply is invalid: {problem}. Reply again with "
                        "only the corrected JSON response body.",
                    },
                ]
        self._count("invalid_answers")
        return BackendResult(error=ObservationError(E.INVALID_RESPONSE, f"unusable simulator answer: {problem}"))

    async def _complete(self, messages: list[dict[str, str]]) -> str:
        payload = self.client.payload(messages, self.config.temperature)
        if self.config.send_seed:
            payload["seed"] = self.seed
        payload.update(self.config.extra_body)
        return await self.client.apost(payload, parse=_completion_content)

    async def aclose(self) -> None:
        """Close the client of the running loop."""
        await self.client.aclose()

    def close(self) -> None:
        """Close the client of the shared background loop; clients of other loops close with them."""
        self.client.close()


def _completion_content(response: httpx.Response) -> str:
    """The answer's text; a malformed or empty completion is worth asking for again."""
    try:
        content = response.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise RetryableReply("malformed completion payload") from None
    if not isinstance(content, str) or not content.strip():
        raise RetryableReply("empty completion")
    return content


def _is_api_error(data: Any) -> bool:
    """A JSON error body is a legitimate answer even when ``returns`` describes success."""
    return isinstance(data, dict) and "error" in data and len(data) <= 3
