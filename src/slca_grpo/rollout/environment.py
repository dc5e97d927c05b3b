"""The tool side of a rollout: task fixtures first, then the simulator.

A task may carry ``metadata["fixtures"]``: recorded responses for its gold calls (the synthetic
suite writes them, so two-step tasks can refer to values step 1 returned). A call that matches a
fixture gets that response; every other call goes to the simulator, in-process or over HTTP.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slca_grpo.chat.parser import ToolCallBlock
from slca_grpo.datatypes import Observation, ObservationError, Task, ToolCall
from slca_grpo.value_match import loose_equal

if TYPE_CHECKING:
    from slca_grpo.simulator.base import SimulatorLike


@dataclass(frozen=True)
class CallRequest:
    call: ToolCall
    task: Task
    session_id: str


def malformed_turn_observation(kind: str, message: str) -> Observation:
    """What the policy sees for its own malformed turn (bad block, too many calls), before any tool
    runs; tool-side failures come from ``slca_grpo.simulator.errors``."""
    payload = {"error": {"type": kind, "message": message}}
    return Observation(text=json.dumps(payload), error=ObservationError(kind, message))


def invalid_block_observation(block: ToolCallBlock) -> Observation:
    """What the policy sees for a block the parser rejected, so it can learn to fix its format."""
    return malformed_turn_observation(f"invalid_tool_call/{block.status.value}", block.error or "invalid tool call")


def plan_block_calls(block: ToolCallBlock, max_parallel_calls: int) -> tuple[list[ToolCall], list[Observation | None]]:
    """The calls a turn's block makes, and one observation slot per result: a ready error
    observation (malformed block, too many parallel calls) or None for a call to execute.

    Calls to unknown tools are executed: the simulator answers them with its own error."""
    if not block.is_executable:
        return [], [invalid_block_observation(block)]
    too_many = malformed_turn_observation("too_many_calls", f"at most {max_parallel_calls} parallel calls per turn")
    calls = list(block.calls)
    return calls, [None if index < max_parallel_calls else too_many for index in range(len(calls))]


def _fixture_matches(fixture: dict[str, Any], call: ToolCall) -> bool:
    if fixture.get("name") != call.name:
        return False
    expected = fixture.get("arguments") or {}
    return all(key in call.arguments and loose_equal(call.arguments[key], value) for key, value in expected.items())


def find_fixture(task: Task, call: ToolCall) -> str | None:
    for fixture in task.metadata.get("fixtures") or ():
        if isinstance(fixture, dict) and _fixture_matches(fixture, call):
            response = fixture.get("response")
            return response if isinstance(response, str) else json.dumps(response)
    return None


class ToolEnvironment:
    def __init__(self, simulator: SimulatorLike, *, use_fixtures: bool = True):
        """``simulator``: the in-process ``Simulator`` or a ``SimulatorClient``; only its batched
        ``simulate_many`` / ``asimulate_many`` are called."""
        self.simulator = simulator
        self.use_fixtures = use_fixtures
        self.fixture_hits = 0
        self.simulator_calls = 0

    def execute(self, requests: Sequence[CallRequest]) -> list[Observation]:
        """Observations for a batch of calls, in order; simulator calls run as one batch."""
        results, pending = self._fixtures(requests)
        if pending:
            start = time.perf_counter()
            observations = self.simulator.simulate_many(self._items(requests, pending))
            self._fill(results, pending, observations, start)
        return [r for r in results if r is not None]

    async def aexecute(self, requests: Sequence[CallRequest]) -> list[Observation]:
        """``execute`` for a caller inside an event loop: the simulator's ``asimulate_many``."""
        results, pending = self._fixtures(requests)
        if pending:
            start = time.perf_counter()
            observations = await self.simulator.asimulate_many(self._items(requests, pending))
            self._fill(results, pending, observations, start)
        return [r for r in results if r is not None]

    def _fixtures(self, requests: Sequence[CallRequest]) -> tuple[list[Observation | None], list[int]]:
        """Observations of the calls a fixture answers, and the indices left for the simulator."""
        results: list[Observation | None] = [None] * len(requests)
        pending: list[int] = []
        for index, request in enumerate(requests):
            fixture = find_fixture(request.task, request.call) if self.use_fixtures else None
            if fixture is not None:
                self.fixture_hits += 1
                results[index] = Observation(text=fixture, cached=True, latency_ms=0.0)
            else:
                pending.append(index)
        return results, pending

    @staticmethod
    def _items(requests: Sequence[CallRequest], pending: list[int]) -> list[tuple[ToolCall, list[dict[str, Any]], str]]:
        return [(requests[i].call, requests[i].task.tools, requests[i].session_id) for i in pending]

    def _fill(
        self, results: list[Observation | None], pending: list[int], observations: list[Observation], start: float
    ) -> None:
        self.simulator_calls += len(pending)
        elapsed_ms = (time.perf_counter() - start) * 1000.0
        for i, observation in zip(pending, observations):
            if not observation.latency_ms:
                observation.latency_ms = elapsed_ms / len(pending)
            results[i] = observation
