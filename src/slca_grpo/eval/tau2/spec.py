"""Specs given on the command line: the user-simulator LLM (``openai:URL#MODEL``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

USER_LLM_FORMAT = "openai:URL#MODEL"
USER_LLM_EXAMPLE = "openai:http://localhost:8000/v1#Qwen/Qwen2.5-72B-Instruct"
DEFAULT_USER_TEMPERATURE = 0.0  # τ²'s default for its user simulator


class SpecError(ValueError):
    """A spec string that cannot be understood; the message says what is wrong and what to pass."""


@dataclass(frozen=True)
class UserLLMSpec:
    """An OpenAI-compatible chat endpoint that plays τ²'s LLM user through litellm."""

    base_url: str
    model: str
    api_key: str = "EMPTY"
    temperature: float = DEFAULT_USER_TEMPERATURE
    extra_args: dict[str, Any] = field(default_factory=dict)

    @property
    def litellm_model(self) -> str:
        # litellm's ``openai/`` prefix sends the request to ``api_base`` with the OpenAI protocol,
        # whatever the model is called on that server.
        return f"openai/{self.model}"

    def litellm_args(self) -> dict[str, Any]:
        return {
            "api_base": self.base_url,
            "api_key": self.api_key,
            "temperature": self.temperature,
            **self.extra_args,
        }

    def describe(self) -> str:
        return f"openai:{self.base_url}#{self.model}"


def parse_user_llm(spec: str, api_key: str | None = None) -> UserLLMSpec:
    """Parse ``openai:URL#MODEL``; the key comes from ``api_key`` or ``$OPENAI_API_KEY`` (else ``EMPTY``)."""
    text = (spec or "").strip()
    provider, sep, rest = text.partition(":")
    if not sep or provider.lower() != "openai":
        raise SpecError(f"user LLM spec {spec!r} is not of the form {USER_LLM_FORMAT} (e.g. {USER_LLM_EXAMPLE})")
    url, sep, model = rest.rpartition("#")
    if not sep or not model.strip():
        raise SpecError(f"user LLM spec {spec!r} names no model: add '#MODEL' after the URL")
    url = url.strip().removesuffix("/chat/completions").rstrip("/")
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise SpecError(f"user LLM spec {spec!r}: {url!r} is not an http(s) URL")
    key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "EMPTY")
    return UserLLMSpec(base_url=url, model=model.strip(), api_key=key or "EMPTY")


# τ²'s CLI defaults (tau2.config): steps and tool errors per simulation, the seed of the trial seeds.
DEFAULT_MAX_STEPS = 200
DEFAULT_MAX_ERRORS = 10
DEFAULT_SEED = 300


@dataclass(frozen=True)
class RunSettings:
    """How a τ² run is driven: limits per simulation, trial seeds, concurrency, retries."""

    max_steps: int = DEFAULT_MAX_STEPS
    max_errors: int = DEFAULT_MAX_ERRORS
    seed: int = DEFAULT_SEED
    concurrency: int = 1
    max_batch: int | None = None
    max_retries: int = 3
