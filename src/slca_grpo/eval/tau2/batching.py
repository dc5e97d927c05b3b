"""Batch agent turns across concurrent τ² simulations.

τ²'s orchestrator asks for one assistant turn at a time. Running several simulations in threads
and collecting their pending turns lets a :class:`~slca_grpo.eval.agent.ChatAgent` (say a local
model) answer them in one ``respond`` call. A single dispatcher thread owns the agent, so agents
need not be thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from slca_grpo.eval.agent import AgentRequest, ChatAgent


class AgentOutputError(RuntimeError):
    """The agent's ``respond`` broke its contract (wrong number of texts, not a list)."""


def checked_respond(agent: ChatAgent, requests: list[AgentRequest]) -> list[Any]:
    """``agent.respond(requests)``, checked to give one answer per request."""
    texts = agent.respond(requests)
    if not isinstance(texts, (list, tuple)):
        raise AgentOutputError(
            f"agent {getattr(agent, 'name', agent)!r} returned {type(texts).__name__}, expected a list of strings"
        )
    if len(texts) != len(requests):
        raise AgentOutputError(
            f"agent {getattr(agent, 'name', agent)!r} returned {len(texts)} texts for {len(requests)} requests"
        )
    return list(texts)


def respond_one(agent: ChatAgent, request: AgentRequest) -> Any:
    """One turn without batching."""
    return checked_respond(agent, [request])[0]


@dataclass
class _Slot:
    request: AgentRequest
    done: threading.Event = field(default_factory=threading.Event)
    text: Any = None
    error: BaseException | None = None


class AgentBatcher:
    """Collects turns from worker threads and answers them in batches.

    A batch goes out as soon as every active simulation is waiting for its agent (or ``max_batch``
    turns are pending); otherwise after ``max_wait_s`` from the first pending turn, so a simulation
    waiting on a slow user LLM does not hold the others back.
    """

    def __init__(self, agent: ChatAgent, max_batch: int = 8, max_wait_s: float = 0.05) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        self.agent = agent
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.batch_sizes: list[int] = []
        self._pending: list[_Slot] = []
        self._active = 0
        self._closed = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._dispatch_loop, name="tau2-agent-batcher", daemon=True)
        self._thread.start()

    def respond(self, request: AgentRequest) -> Any:
        """Called from a simulation thread: blocks until this turn's text is ready."""
        slot = _Slot(request)
        with self._cond:
            if self._closed:
                raise RuntimeError("the agent batcher is closed")
            self._pending.append(slot)
            self._cond.notify_all()
        slot.done.wait()
        if slot.error is not None:
            raise slot.error
        return slot.text

    @contextmanager
    def simulation(self) -> Iterator[None]:
        """Mark a simulation active for its lifetime, so batches know how many turns to expect."""
        with self._cond:
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()

    def __enter__(self) -> AgentBatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ready(self, deadline: float) -> bool:
        if not self._pending:
            return False
        wanted = min(self.max_batch, max(self._active, 1))
        return len(self._pending) >= wanted or time.monotonic() >= deadline or self._closed

    def _dispatch_loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:  # closed and drained
                    return
                deadline = time.monotonic() + self.max_wait_s
                while not self._ready(deadline):
                    self._cond.wait(max(deadline - time.monotonic(), 0.0))
                batch = self._pending[: self.max_batch]
                del self._pending[: self.max_batch]
            self._answer(batch)

    def _answer(self, batch: list[_Slot]) -> None:
        self.batch_sizes.append(len(batch))
        try:
            texts = checked_respond(self.agent, [slot.request for slot in batch])
        except BaseException as exc:  # noqa: BLE001 - handed to every waiting simulation
            for slot in batch:
                slot.error = exc
                slot.done.set()
            return
        for slot, text in zip(batch, texts, strict=True):
            slot.text = text
            slot.done.set()
