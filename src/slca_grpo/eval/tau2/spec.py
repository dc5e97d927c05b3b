"""Specs given on the command line: the user-simulator LLM (``openai:BASE_URL#MODEL``, the grammar
of ``slca_grpo.endpoints``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from slca_grpo.endpoints import SPEC_EXAMPLE, SPEC_FORMAT, EndpointSpec, parse_endpoint_spec
from slca_grpo.keys import resolve_api_key

USER_LLM_FORMAT = SPEC_FORMAT
USER_LLM_EXAMPLE = SPEC_EXAMPLE
DEFAULT_USER_TEMPERATURE = 0.0  # τ²'s default for its user simulator
NO_KEY = "EMPTY"  # litellm wants some key even for servers that take none


@dataclass(frozen=True)
class UserLLMSpec:
    """An OpenAI-compatible chat endpoint that plays τ²'s LLM user through litellm."""

    base_url: str
    model: str
    api_key: str = field(default=NO_KEY, repr=False)
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
        return str(EndpointSpec(self.base_url, self.model))


def parse_user_llm(spec: str, api_key: str | None = None) -> UserLLMSpec:
    """Parse ``openai:BASE_URL#MODEL`` (``EndpointSpecError`` otherwise); the key is ``api_key``, else
    as ``slca_grpo.keys.resolve_api_key`` finds it ($OPENAI_API_KEY), else ``EMPTY``."""
    endpoint = parse_endpoint_spec(spec)
    key = api_key if api_key is not None else resolve_api_key()
    return UserLLMSpec(base_url=endpoint.base_url, model=endpoint.model, api_key=key or NO_KEY)


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
