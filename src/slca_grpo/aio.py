"""A private event loop in a daemon thread, so synchronous callers can run async code.

Async clients (httpx) are bound to the loop that made them; keeping one long-lived loop for all
synchronous calls keeps their connection pools alive between calls, and works even when the
caller itself is inside a running event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="slca-async-loop", daemon=True)
            thread.start()
            _loop = loop
        return _loop


def existing_background_loop() -> asyncio.AbstractEventLoop | None:
    """The background loop if one was started (never starts one)."""
    return _loop


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the background loop and wait for its result."""
    loop = background_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise RuntimeError("run_sync called from the background loop itself; await the async method instead")
    return asyncio.run_coroutine_threadsafe(coro, loop).result()
