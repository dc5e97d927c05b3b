"""Typed configuration of the simulator (one part of the run config, see docs/simulator.md)."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Any

from slca_grpo.config import ConfigError
from slca_grpo.endpoints import SHORT_REPLY_BYTES, EndpointConfig
from slca_grpo.keys import SIMULATOR_KEY_ENV, resolve_api_key


@dataclass
class OpenAIConfig:
    """An OpenAI-compatible chat-completions endpoint (vLLM, SGLang, a hosted API)."""

    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = ""
    api_key: str | None = None  # falls back to $SLCA_SIM_API_KEY, then $OPENAI_API_KEY
    temperature: float = 0.6  # the paper's simulator temperature
    max_tokens: int = 1024
    timeout_s: float = 60.0
    max_retries: int = 3
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    concurrency: int = 32
    no_schema: bool = False  # the paper's "w/o SGLS" ablation: no tool schema in the prompt
    max_reasks: int = 1  # re-asks after an answer that is not JSON or does not match `returns`
    history_turns: int = 8  # earlier calls of the session shown in the prompt
    send_seed: bool = True  # pass the simulator seed as `seed` (turn off for servers that reject it)
    extra_body: dict[str, Any] = field(default_factory=dict)  # e.g. chat_template_kwargs

    def resolved_api_key(self) -> str | None:
        return resolve_api_key(self.api_key, env=(SIMULATOR_KEY_ENV,))

    def endpoint(self) -> EndpointConfig:
        """The connection settings, with the key resolved."""
        return EndpointConfig(
            self.base_url,
            self.model,
            api_key=self.resolved_api_key(),
            timeout_s=self.timeout_s,
            max_retries=self.max_retries,
            backoff_s=self.backoff_s,
            max_backoff_s=self.max_backoff_s,
            concurrency=self.concurrency,
            max_tokens=self.max_tokens,
            max_reply_bytes=SHORT_REPLY_BYTES,
        )


@dataclass
class ErrorInjectionConfig:
    """Rates of injected failures; each call draws once, so the rates add up (≤ 1)."""

    timeout_rate: float = 0.0
    server_error_rate: float = 0.0
    rate_limit_rate: float = 0.0
    empty_result_rate: float = 0.0

    @property
    def total(self) -> float:
        return self.timeout_rate + self.server_error_rate + self.rate_limit_rate + self.empty_result_rate


@dataclass
class SimulatorConfig:
    backend: str = "schema"  # a registered backend: schema, openai, or one a plugin registers
    seed: int = 0
    cache_path: str | None = None  # SQLite file; None = no cache
    session_ttl_s: float = 3600.0
    max_sessions: int = 10_000
    max_observation_tokens: int | None = 2048  # the paper's tool-response limit; None = no limit
    # Seconds of the simulator's own work per call (checks, and the whole call for a synchronous
    # backend such as `schema`); past it the work stops and the call gets `over_budget`. None = none.
    call_budget_s: float | None = 30.0
    errors: ErrorInjectionConfig = field(default_factory=ErrorInjectionConfig)
    openai: OpenAIConfig = field(default_factory=OpenAIConfig)
    backend_options: dict[str, Any] = field(default_factory=dict)  # settings of a plugin backend

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ConfigError naming the first bad field (again after fields were changed)."""
        # Which names exist is checked when the backend is built: a plugin may register it later.
        if not isinstance(self.backend, str) or not self.backend.strip():
            raise ConfigError(f"backend must name a registered simulator backend, got {self.backend!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ConfigError(f"seed must be an integer, got {self.seed!r}")
        if self.cache_path is not None and os.path.isdir(self.cache_path):
            raise ConfigError(f"cache_path {self.cache_path!r} is a directory; give the SQLite file's path")
        # Written `not x > 0` rather than `x <= 0`: every comparison with NaN is False, so NaN would
        # pass `x <= 0` (and a NaN time-to-live breaks session expiry).
        if not self.session_ttl_s > 0:
            raise ConfigError(f"session_ttl_s must be > 0, got {self.session_ttl_s}")
        if not self.max_sessions >= 1:
            raise ConfigError(f"max_sessions must be >= 1, got {self.max_sessions}")
        if self.call_budget_s is not None and not self.call_budget_s > 0:  # also catches NaN
            raise ConfigError(f"call_budget_s must be > 0 or None, got {self.call_budget_s}")
        if self.max_observation_tokens is not None and not self.max_observation_tokens >= 16:
            raise ConfigError(f"max_observation_tokens must be >= 16 or None, got {self.max_observation_tokens}")
        for f in dataclasses.fields(ErrorInjectionConfig):
            rate = getattr(self.errors, f.name)
            if not 0.0 <= rate <= 1.0:
                raise ConfigError(f"errors.{f.name} must be in [0, 1], got {rate}")
        if self.errors.total > 1.0 + 1e-9:
            raise ConfigError(f"errors rates add up to {self.errors.total:.3f} > 1")
        o = self.openai
        if self.backend == "openai" and not o.model:
            raise ConfigError("openai.model is required for the openai backend")
        if not (o.max_retries >= 0 and o.max_reasks >= 0 and o.concurrency >= 1 and o.timeout_s > 0):
            raise ConfigError(
                "openai needs max_retries >= 0, max_reasks >= 0, concurrency >= 1 and timeout_s > 0, got "
                f"{o.max_retries}, {o.max_reasks}, {o.concurrency} and {o.timeout_s}"
            )
        if not (o.temperature >= 0 and math.isfinite(o.temperature)):
            raise ConfigError(f"openai.temperature must be a finite number >= 0, got {o.temperature}")
        for name in ("backoff_s", "max_backoff_s"):
            value = getattr(o, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ConfigError(f"openai.{name} must be a finite number >= 0, got {value}")

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        if data["openai"].get("api_key"):
            data["openai"]["api_key"] = "***"  # never written next to a run's outputs
        return data


@dataclass
class SimulatorServiceConfig:
    """A shared simulator service for a training run (the `simulator_service` section)."""

    # A running `slca serve-sim` (e.g. "http://127.0.0.1:8765"); empty: the simulator runs in
    # process from the `simulator` section. The bearer token comes from $SLCA_SIM_TOKEN, never
    # from a config file.
    url: str = ""
    timeout_s: float = 60.0
    max_retries: int = 3
    # Retries wait backoff_s · 2^(retry−1), capped at max_backoff_s, times a draw in [0.5, 1).
    backoff_s: float = 0.25
    max_backoff_s: float = 5.0
    batch_size: int = 256  # calls per request
    concurrency: int = 64  # requests in flight at once

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"url must be an http(s) URL, got {self.url!r}")
        if not self.timeout_s > 0 or self.max_retries < 0 or self.batch_size < 1 or self.concurrency < 1:
            raise ConfigError(
                "timeout_s must be > 0, max_retries >= 0, batch_size and concurrency >= 1, got "
                f"{self.timeout_s}, {self.max_retries}, {self.batch_size} and {self.concurrency}"
            )
        if not 0 <= self.backoff_s <= self.max_backoff_s:
            raise ConfigError(
                f"backoff_s and max_backoff_s must satisfy 0 <= backoff_s <= max_backoff_s, got "
                f"{self.backoff_s} and {self.max_backoff_s}"
            )
