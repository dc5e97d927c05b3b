"""The seams: what a backend implements and what any simulator (local or remote) offers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from slca_grpo.aio import run_sync
from slca_grpo.datatypes import Observation, ObservationError, ToolCall
from slca_grpo.simulator.checks import ToolSpec
from slca_grpo.simulator.sessions import Target

# A batch item: (call, tools) or (call, tools, session_id).
BatchItem = tuple[Any, ...]


@dataclass(frozen=True)
class BackendRequest:
    """Everything a backend may use to answer one call that passed the checks."""

    call: ToolCall
    spec: ToolSpec
    state_digest: str  # the session's history digest before this call ("" without a session)
    history: Sequence[tuple[dict[str, Any], str]] = ()  # earlier (call, answer) pairs, oldest first
    target: Target | None = None  # the record the call names by id, when known
    related: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class BackendResult:
    """An answer (JSON text and its parsed value) or an error."""

    text: str = ""
    data: Any = None
    error: ObservationError | None = None


class Backend:
    """Answers calls. Override ``generate`` (sync backends) or ``agenerate`` (async ones).

    The defaults call each other, so a subclass that overrides neither is refused when it is
    defined, not when its first call recurses.
    """

    name: str = "backend"
    is_async: bool = False
    # True when the backend keeps within the simulator's call budget by itself (it checks the
    # deadline as it works, or its waits have their own timeouts). Others (plugin backends by
    # default) are cut off from outside when the budget is spent: the call is ``over_budget``.
    bounds_itself: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.generate is Backend.generate and cls.agenerate is Backend.agenerate:
            raise TypeError(f"{cls.__name__} must override Backend.generate (sync) or Backend.agenerate (async)")

    def cache_identity(self) -> dict[str, Any]:
        """What, beside the call and the session, decides the answer (goes into the cache key)."""
        return {"backend": self.name}

    def generate(self, request: BackendRequest) -> BackendResult:
        return run_sync(self.agenerate(request))

    async def agenerate(self, request: BackendRequest) -> BackendResult:
        return self.generate(request)

    def stats(self) -> dict[str, float]:
        return {}

    def close(self) -> None:
        """Release connections; the backend may not be used afterwards."""


@runtime_checkable
class SimulatorLike(Protocol):
    """What rollout code holds: the in-process ``Simulator`` or a ``SimulatorClient``."""

    def simulate(self, call: ToolCall, tools: list[dict[str, Any]], session_id: str | None = None) -> Observation: ...

    async def asimulate(
        self, call: ToolCall, tools: list[dict[str, Any]], session_id: str | None = None
    ) -> Observation: ...

    def simulate_many(self, items: Sequence[BatchItem]) -> list[Observation]: ...

    async def asimulate_many(self, items: Sequence[BatchItem]) -> list[Observation]: ...

    def reset_session(self, session_id: str) -> bool: ...

    def close(self) -> None: ...
