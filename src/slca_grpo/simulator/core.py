"""The in-process simulator.

One call: checks → session → error injection → cache → backend → session update → truncation.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from slca_grpo.aio import run_sync
from slca_grpo.config import ConfigError
from slca_grpo.datatypes import Observation, ObservationError, ToolCall
from slca_grpo.registry import Registry
from slca_grpo.simulator import errors as E
from slca_grpo.simulator.base import Backend, BackendRequest, BackendResult, BatchItem
from slca_grpo.simulator.budget import (
    OverBudget,
    await_within_budget,
    budget_in_force,
    carried_budget,
    check_deadline,
    run_within_budget,
    time_budget,
)
from slca_grpo.simulator.cache import ResponseCache
from slca_grpo.simulator.checks import ToolChecker, ToolSpec
from slca_grpo.simulator.config import SimulatorConfig
from slca_grpo.simulator.injection import ErrorInjector
from slca_grpo.simulator.openai_backend import OpenAIBackend
from slca_grpo.simulator.schema_backend import SchemaBackend
from slca_grpo.simulator.sessions import Resolution, SessionState, SessionStore
from slca_grpo.simulator.text import TokenCounter, approx_token_count, truncate_middle_to_tokens
from slca_grpo.simulator.words import canonical_json, digest

CACHE_KEY_VERSION = 1
_MAX_SESSIONLESS_COUNTERS = 100_000


@dataclass
class SimulatorStats:
    """Counters since the simulator was built (``Simulator.stats``)."""

    calls: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    backend_calls: int = 0
    injected: int = 0
    truncated: int = 0
    errors: Counter[str] = field(default_factory=Counter)  # error observations by kind

    @property
    def backend_errors(self) -> int:
        return self.errors[E.BACKEND_ERROR] + self.errors[E.INVALID_RESPONSE]

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "cache_misses": self.cache_misses,
            "backend_calls": self.backend_calls,
            "backend_errors": self.backend_errors,
            "injected": self.injected,
            "truncated": self.truncated,
            "errors": dict(self.errors),
        }


@dataclass
class _Pending:
    request: BackendRequest
    cache_key: str | None
    cached_text: str | None
    state: SessionState | None
    call_dict: dict[str, Any]
    start: float


BackendFactory = Callable[[SimulatorConfig], Backend]
# Every simulator backend by name: the built-ins and the plugins' (:func:`register_backend`).
SIMULATOR_BACKENDS: Registry[BackendFactory] = Registry("simulator backend")


def register_backend(name: str, *, replace: bool = False) -> Callable[[BackendFactory], BackendFactory]:
    """Decorator registering ``factory(config: SimulatorConfig) -> Backend`` as ``simulator.backend: name``.

    The factory reads what it needs from the config (``seed``, and ``backend_options`` for settings
    of its own).
    """

    def decorator(factory: BackendFactory) -> BackendFactory:
        SIMULATOR_BACKENDS.add(name, factory, origin=getattr(factory, "__module__", "") or "", replace=replace)
        return factory

    return decorator


def unregister_backend(name: str) -> None:
    SIMULATOR_BACKENDS.remove(name)


def list_backends() -> list[str]:
    return SIMULATOR_BACKENDS.names()


@register_backend("schema")
def _schema_backend(config: SimulatorConfig) -> Backend:
    return SchemaBackend(config.seed)


@register_backend("openai")
def _openai_backend(config: SimulatorConfig) -> Backend:
    return OpenAIBackend(config.openai, config.seed)


def make_backend(config: SimulatorConfig) -> Backend:
    """The backend ``config.backend`` names (a ConfigError naming the key if none is registered)."""
    if config.backend not in SIMULATOR_BACKENDS:
        raise ConfigError(
            f"simulator.backend: unknown backend {config.backend!r}; registered: {', '.join(list_backends())}"
        )
    backend = SIMULATOR_BACKENDS.get(config.backend)(config)
    if not isinstance(backend, Backend):
        raise TypeError(f"backend factory {config.backend!r} returned {type(backend).__name__}, not a Backend")
    return backend


class Simulator:
    """Answers tool calls without real APIs. Thread-safe; never raises on bad calls or tools."""

    def __init__(
        self,
        config: SimulatorConfig | None = None,
        *,
        backend: Backend | None = None,
        count_tokens: TokenCounter | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config or SimulatorConfig()
        if backend is None:
            self.config.validate()
        self.backend = backend or make_backend(self.config)
        self.cache = ResponseCache(self.config.cache_path) if self.config.cache_path else None
        self.sessions = SessionStore(self.config.session_ttl_s, self.config.max_sessions, clock)
        self.injector = ErrorInjector(self.config.errors, self.config.seed)
        self.checker = ToolChecker()
        self.count_tokens = count_tokens or approx_token_count
        self.stats = SimulatorStats()
        self._identity = canonical_json(self.backend.cache_identity())
        self._lock = threading.Lock()
        self._sessionless: OrderedDict[str, int] = OrderedDict()

    # -- public API --------------------------------------------------------------------------

    def simulate(
        self, call: ToolCall | dict[str, Any], tools: list[dict[str, Any]], session_id: str | None = None
    ) -> Observation:
        """One call's observation."""
        if self.backend.is_async:
            # The background loop does not share this thread's context: carry a caller's budget.
            return run_sync(self._carrying(budget_in_force(), call, tools, session_id))
        start = time.perf_counter()
        try:
            with self._call_budget():
                pending = self._prepare(call, tools, session_id)
                if isinstance(pending, Observation):
                    return pending
                result = None if pending.cached_text is not None else self._generate_safely(pending.request)
            return self._finish(pending, result)
        except OverBudget as exc:
            return self._done(E.error_observation(E.OVER_BUDGET, str(exc)), start)

    async def asimulate(
        self, call: ToolCall | dict[str, Any], tools: list[dict[str, Any]], session_id: str | None = None
    ) -> Observation:
        if not self.backend.is_async:
            return self.simulate(call, tools, session_id)
        start = time.perf_counter()
        try:
            # The budget covers the checks; a backend that bounds itself (the openai one: its network
            # waits have their own timeouts) runs outside it, any other is cut off when it is spent.
            with self._call_budget():
                pending = self._prepare(call, tools, session_id)
            if isinstance(pending, Observation):
                return pending
            result = None
            if pending.cached_text is None:
                if self.backend.bounds_itself:
                    result = await self._agenerate_safely(pending.request)
                else:
                    with self._call_budget():
                        result = await await_within_budget(self._agenerate_safely(pending.request))
            return self._finish(pending, result)
        except OverBudget as exc:  # a caller's budget (the service's) ran out during the exchange
            return self._done(E.error_observation(E.OVER_BUDGET, str(exc)), start)

    async def _carrying(self, budget: Any, call: Any, tools: Any, session_id: str | None) -> Observation:
        with carried_budget(budget):
            return await self.asimulate(call, tools, session_id)

    def _call_budget(self) -> Any:
        seconds = self.config.call_budget_s
        reason = f"the simulator spent more than {seconds:g} s on this call (call_budget_s)" if seconds else ""
        return time_budget(seconds, reason)

    def simulate_many(self, items: Sequence[BatchItem]) -> list[Observation]:
        """A batch of calls; calls of one session run in order, sessions run concurrently."""
        if self.backend.is_async:
            return run_sync(self.asimulate_many(items))
        return [
            self.simulate(*unpacked) if isinstance(unpacked, tuple) else unpacked
            for unpacked in map(_unpack, enumerate(items))
        ]

    async def asimulate_many(self, items: Sequence[BatchItem]) -> list[Observation]:
        if not self.backend.is_async:
            return self.simulate_many(items)
        unpacked = [_unpack(pair) for pair in enumerate(items)]
        results: list[Observation | None] = [u if isinstance(u, Observation) else None for u in unpacked]
        groups: dict[str, list[int]] = {}
        for i, u in enumerate(unpacked):
            if isinstance(u, tuple):
                groups.setdefault(u[2] if u[2] is not None else f"\x00{i}", []).append(i)

        async def run_group(indices: list[int]) -> None:
            for i in indices:
                call, tools, session_id = unpacked[i]  # type: ignore[misc]
                results[i] = await self.asimulate(call, tools, session_id)

        await asyncio.gather(*(run_group(ix) for ix in groups.values()))
        return [r for r in results if r is not None]

    def reset_session(self, session_id: str) -> bool:
        """Forget a session's state; True when it existed."""
        return self.sessions.reset(session_id)

    def close(self) -> None:
        self.backend.close()
        if self.cache is not None:
            self.cache.close()

    def __enter__(self) -> Simulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- pipeline ----------------------------------------------------------------------------

    def _prepare(self, call: Any, tools: Any, session_id: str | None) -> _Pending | Observation:
        start = time.perf_counter()
        with self._lock:
            self.stats.calls += 1
        check_deadline()  # the rest of a batch whose budget is spent stops here
        call = _coerce_call(call)
        checked = self.checker.check(call, tools)
        if not isinstance(checked, ToolSpec):
            return self._done(checked, start)
        spec = checked
        call_dict = {"name": spec.name, "arguments": call.arguments}
        try:
            call_key = canonical_json(call_dict)
        except (TypeError, ValueError) as exc:
            return self._done(
                E.error_observation(E.INVALID_ARGUMENTS, f"Arguments are not JSON: {exc}", tool=spec.name),
                start,
            )
        state = None
        resolution = Resolution()
        history: tuple[tuple[dict[str, Any], str], ...] = ()
        if session_id is not None:
            session_id = str(session_id)
            with self.sessions.lock:
                state = self.sessions.get(session_id)
                index = state.next_call_index()
                state_digest = state.digest
                resolution = state.resolve(spec.intent, call.arguments, spec.name)
                history = tuple(state.history)
        else:
            index = self._sessionless_index(call_key)
            state_digest = ""
        kind, detail = self.injector.draw(session_id or "", call_key, index)
        if kind is not None:
            with self._lock:
                self.stats.injected += 1
            return self._done(ErrorInjector.observation(kind, spec.name, detail), start)
        if resolution.deleted is not None:
            gone = resolution.deleted
            message = f"{spec.intent.entity.replace('_', ' ').capitalize()} {gone.id_value} not found."
            return self._done(E.error_observation(E.NOT_FOUND, message, status=404, tool=spec.name), start)
        if resolution.conflict is not None:
            return self._done(E.error_observation(E.CONFLICT, resolution.conflict, status=409, tool=spec.name), start)
        cache_key = cached_text = None
        if self.cache is not None:
            cache_key = digest(
                canonical_json(
                    {
                        "v": CACHE_KEY_VERSION,
                        "tool": spec.name,
                        "tool_digest": spec.digest,
                        "call": call_key,
                        "state": state_digest,
                        "backend": self._identity,
                        "seed": self.config.seed,
                    }
                )
            )
            cached_text = self.cache.get(cache_key)
        request = BackendRequest(
            call=ToolCall(spec.name, call.arguments),
            spec=spec,
            state_digest=state_digest,
            history=history,
            target=resolution.target,
            related=resolution.related,
        )
        return _Pending(request, cache_key, cached_text, state, call_dict, start)

    def _generate_safely(self, request: BackendRequest) -> BackendResult:
        try:
            if self.backend.bounds_itself:
                return _checked(self.backend.generate(request))
            # A backend that never checks the deadline (a plugin's) is waited for until the budget is
            # spent, then the call is over_budget (OverBudget passes the handler below).
            return _checked(run_within_budget(lambda: self.backend.generate(request)))
        except (Exception, SystemExit) as exc:  # a backend bug (sys.exit too) must not end the run
            return BackendResult(error=_backend_crash(exc))

    async def _agenerate_safely(self, request: BackendRequest) -> BackendResult:
        try:
            return _checked(await self.backend.agenerate(request))
        except (Exception, SystemExit) as exc:  # a backend bug (sys.exit too) must not end the run
            return BackendResult(error=_backend_crash(exc))

    def _finish(self, pending: _Pending, result: BackendResult | None) -> Observation:
        if result is None:
            text = pending.cached_text or ""
            with self._lock:
                self.stats.cache_hits += 1
            data = _parse(text)
            cached = True
        else:
            with self._lock:
                self.stats.backend_calls += 1
                if self.cache is not None:
                    self.stats.cache_misses += 1
            if result.error is not None:
                return self._done(E.error_observation(result.error.kind, result.error.message), pending.start)
            text, data, cached = result.text, result.data, False
            if pending.cache_key is not None and self.cache is not None:
                stored = self.cache.put(pending.cache_key, text)
                if stored != text:  # another process answered first: replay its answer
                    text, data = stored, _parse(stored)
        if pending.state is not None:
            with self.sessions.lock:
                pending.state.record(pending.call_dict, pending.request.spec.intent, text, data, pending.request.target)
        shown = truncate_middle_to_tokens(text, self.config.max_observation_tokens, self.count_tokens)
        if shown is not text:
            with self._lock:
                self.stats.truncated += 1
        return self._done(Observation(text=shown, cached=cached), pending.start)

    def _done(self, observation: Observation, start: float) -> Observation:
        observation.latency_ms = (time.perf_counter() - start) * 1000.0
        if observation.error is not None:
            with self._lock:
                self.stats.errors[observation.error.kind] += 1
        return observation

    def _sessionless_index(self, call_key: str) -> int:
        """Calls without a session count per distinct call, so a retry draws afresh."""
        with self._lock:
            index = self._sessionless.get(call_key, 0)
            self._sessionless[call_key] = index + 1
            self._sessionless.move_to_end(call_key)
            if len(self._sessionless) > _MAX_SESSIONLESS_COUNTERS:
                self._sessionless.popitem(last=False)
        return index


def build_simulator(
    config: SimulatorConfig | None = None,
    *,
    count_tokens: TokenCounter | None = None,
    backend: Backend | None = None,
) -> Simulator:
    """A simulator for ``config`` (validated); ``count_tokens`` sets the truncation tokenizer."""
    return Simulator(config, backend=backend, count_tokens=count_tokens)


def _coerce_call(call: Any) -> ToolCall:
    if isinstance(call, ToolCall):
        return call
    if isinstance(call, dict):
        arguments = call.get("arguments", call.get("parameters"))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except (ValueError, RecursionError):  # not JSON, too deep, an integer past Python's limit
                pass  # left a string: the checks answer "Arguments must be a JSON object"
        name = call.get("name")
        return ToolCall(name=name, arguments={} if arguments is None else arguments)  # type: ignore[arg-type]
    return ToolCall(name=None, arguments={})  # type: ignore[arg-type]


def _unpack(pair: tuple[int, Any]) -> tuple[Any, Any, str | None] | Observation:
    index, item = pair
    if isinstance(item, dict) and "call" in item:
        return item["call"], item.get("tools") or [], item.get("session_id")
    if isinstance(item, (tuple, list)) and len(item) in (2, 3):
        return item[0], item[1], item[2] if len(item) == 3 else None
    return E.error_observation(E.INVALID_ARGUMENTS, f"batch item {index} must be (call, tools[, session_id])")


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None


class WrongResultType(TypeError):
    pass


def _checked(result: Any) -> BackendResult:
    """A backend's answer, which must be a BackendResult (a plugin may return anything)."""
    if not isinstance(result, BackendResult):
        raise WrongResultType(f"generate returned {type(result).__name__}, not BackendResult")
    return result


def _backend_crash(exc: BaseException) -> Any:
    return ObservationError(E.BACKEND_ERROR, f"simulator backend failed: {type(exc).__name__}: {exc}")
