"""A time budget for simulated calls, checked by the work itself.

A Python thread cannot be stopped from outside, so a deadline kept only by the caller stops the
waiting, not the work: a runaway request would keep its worker thread (and its memory) after its
client got ``over_budget``. Instead the simulator's own loops (value generation, strings built from
patterns, every pattern match) call ``check_deadline()``, which raises ``OverBudget`` once the
budget in force is spent, so the work ends within milliseconds of its deadline.

The budget lives in a context variable: ``asyncio.to_thread`` and asyncio tasks copy it, and
nested budgets keep the earlier deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

# (monotonic deadline, why there is one); None: no budget in force.
Budget = tuple[float, str]
_BUDGET: ContextVar[Budget | None] = ContextVar("slca_simulator_budget", default=None)


class OverBudget(BaseException):
    """The time budget of the work in progress is spent.

    A ``BaseException``, like ``asyncio.CancelledError``: the ``except Exception`` handlers that
    turn a backend's or a schema's failure into an error observation must not swallow it; the
    simulator turns it into one observation of kind ``over_budget``.
    """


@contextlib.contextmanager
def time_budget(seconds: float | None, reason: str) -> Iterator[None]:
    """Work inside must end within ``seconds`` (None: no budget of its own); ``reason`` is the
    message of the ``OverBudget``. An enclosing budget that ends sooner stays in force."""
    if seconds is None:
        yield
        return
    deadline = time.monotonic() + seconds
    current = _BUDGET.get()
    if current is not None and current[0] <= deadline:
        yield
        return
    token = _BUDGET.set((deadline, reason))
    try:
        yield
    finally:
        _BUDGET.reset(token)


def budget_in_force() -> Budget | None:
    """The budget of the current context, to carry it where contexts are not copied."""
    return _BUDGET.get()


@contextlib.contextmanager
def carried_budget(budget: Budget | None) -> Iterator[None]:
    """Put a budget taken with ``budget_in_force()`` in force here (e.g. on another event loop)."""
    if budget is None:
        yield
        return
    with time_budget(budget[0] - time.monotonic(), budget[1]):
        yield


def seconds_left() -> float | None:
    """Seconds until the budget in force is spent (0 when it is; None: no budget)."""
    budget = _BUDGET.get()
    return None if budget is None else max(0.0, budget[0] - time.monotonic())


# Worker threads whose calls ran over their budget and have not returned: each holds a thread and
# its memory until it does, so at most this many are left running; past it a call is refused at once.
MAX_ABANDONED_WORKERS = 16
_abandoned: set[threading.Thread] = set()
_abandoned_lock = threading.Lock()


def abandoned_workers() -> int:
    """Worker threads left running by calls that ran over their budget and have not returned."""
    with _abandoned_lock:
        _abandoned.difference_update([t for t in _abandoned if not t.is_alive()])
        return len(_abandoned)


def run_within_budget(function: Callable[[], T]) -> T:
    """``function()`` in a worker thread, waited for until the budget in force is spent, then
    ``OverBudget``: for code that never checks the deadline itself (a plugin backend). The thread
    cannot be stopped and is left to finish on its own (a daemon, so it never holds the process);
    while ``MAX_ABANDONED_WORKERS`` such threads still run, a call is ``OverBudget`` at once, without
    a thread, so a backend that never returns cannot pile up threads."""
    left = seconds_left()
    if left is None:
        return function()
    if abandoned_workers() >= MAX_ABANDONED_WORKERS:
        raise OverBudget(
            f"{MAX_ABANDONED_WORKERS} earlier calls ran over their budget and have not returned; "
            "not started (the backend does not end its calls)"
        )
    outcome: dict[str, Any] = {}
    context = contextvars.copy_context()

    def work() -> None:
        try:
            outcome["value"] = context.run(function)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller as it is
            outcome["error"] = exc

    worker = threading.Thread(target=work, name="slca-budgeted-call", daemon=True)
    worker.start()
    worker.join(left)
    if worker.is_alive():
        with _abandoned_lock:
            _abandoned.add(worker)
        raise OverBudget(_BUDGET.get()[1])  # type: ignore[index]
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


async def await_within_budget(awaitable: Awaitable[T]) -> T:
    """``await awaitable``, cancelled when the budget in force is spent (then ``OverBudget``)."""
    left = seconds_left()
    if left is None:
        return await awaitable
    try:
        return await asyncio.wait_for(awaitable, left)
    except asyncio.TimeoutError:
        raise OverBudget(_BUDGET.get()[1]) from None  # type: ignore[index]


def check_deadline() -> None:
    """Raise ``OverBudget`` when the budget in force is spent; cheap enough for inner loops."""
    budget = _BUDGET.get()
    if budget is not None and time.monotonic() >= budget[0]:
        raise OverBudget(budget[1])
