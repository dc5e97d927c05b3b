"""``slca serve-sim``'s server: the service app (``service.create_app``) under uvicorn, with its
connections bounded. A connection's request headers must arrive within ``header_timeout_s`` of it
opening (or of the first byte of a later request on a kept-alive one), an idle kept-alive
connection is closed after ``keep_alive_s``, a body must arrive within the request budget (else
408), and at most ``max_connections`` are open at once: past it the connection that has waited
longest without a request in progress is closed to admit the new one, or the new one when there is
none such. The lines a client can cause on every connection (refusals, time-outs, malformed
requests, failed accepts) are rate-limited, so a flood of connections cannot flood the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from slca_grpo.simulator.core import Simulator
from slca_grpo.simulator.service import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_REQUEST_TIMEOUT_S,
    LogThrottle,
    check_count,
    check_seconds,
    create_app,
    is_loopback,
    log_throttled,
)

logger = logging.getLogger(__name__)

DEFAULT_HEADER_TIMEOUT_S = 10.0
DEFAULT_KEEP_ALIVE_S = 5.0
DEFAULT_MAX_CONNECTIONS = 1024
MAX_BACKLOG = 2048  # uvicorn's default listen backlog
MIN_BACKLOG = 128
FD_RESERVE = 256  # file descriptors kept for everything but connections: the cache, pipes, logs


class ThrottledLogFilter(logging.Filter):
    """A logger filter: the lines of one kind (logger, level and first line of the message
    template) pass at most ``LOG_BURST`` times per ``LOG_PERIOD_S``."""

    def __init__(self, throttle: LogThrottle | None = None) -> None:
        super().__init__()
        self.throttle = throttle or LogThrottle()

    def filter(self, record: logging.LogRecord) -> bool:
        kind = (record.name, record.levelno, str(record.msg).partition("\n")[0][:200])
        left_out = self.throttle.admit(kind)
        if left_out is None:
            return False
        if left_out:
            try:
                text = record.getMessage()
            except Exception:  # a malformed record is logging's to report, as it would have been
                return True
            record.msg, record.args = "%s (and %d more like it, not logged)", (text, left_out)
        return True


# uvicorn logs a malformed request ("Invalid HTTP request received.") or an unsupported upgrade on
# every connection, and asyncio logs each failed accept(): all of them a client can repeat at will.
SERVER_LOGGERS = ("uvicorn.error", "asyncio")


@contextlib.contextmanager
def throttled_server_logs(names: tuple[str, ...] = SERVER_LOGGERS) -> Iterator[ThrottledLogFilter]:
    """Rate-limit the lines of the server's loggers ``names`` while the block runs."""
    log_filter = ThrottledLogFilter()
    loggers = [logging.getLogger(name) for name in names]
    for each in loggers:
        each.addFilter(log_filter)
    try:
        yield log_filter
    finally:
        for each in loggers:
            each.removeFilter(log_filter)


# -- connections: none slow, none idle for long, never too many -----------------------------------


def guarded_h11_protocol(
    *,
    header_timeout_s: float,
    keep_alive_s: float,
    busy_timeout_s: float,
    max_connections: int,
) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, with every phase of a connection under a deadline and a bound on how
    many are open (uvicorn's own has no deadline for a request's headers, so a client holding
    partial headers keeps its connection, and its file descriptor, for ever):

    - waiting for a request's headers: ``header_timeout_s`` from the connection opening, or from
      the first byte of a later request on a kept-alive connection; bytes trickling in do not
      restart the clock;
    - idle between requests: ``keep_alive_s``;
    - a request in progress (body, simulation, response): ``busy_timeout_s``;
    - after the response, a client still sending a body nobody reads, or not reading its response
      while the connection closes: ``header_timeout_s``.

    At the deadline the connection is dropped at once (``abort``: a client that reads nothing cannot
    hold it open by leaving the response unread). With ``max_connections`` open, a new connection
    closes the one that has been waiting longest for a request (or idle, or sending a body after its
    response), or, when there is none such, is itself closed at once. Each kind of these events is
    logged at a throttled rate."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    check_seconds("header_timeout_s", header_timeout_s)
    check_seconds("keep_alive_s", keep_alive_s)
    check_seconds("busy_timeout_s", busy_timeout_s)
    check_count("max_connections", max_connections)
    throttle = LogThrottle()
    # Connections a newcomer may displace: those waiting for a request, idle, or still sending a
    # body after their response. Not one with a request in progress, nor one flushing its response
    # before it closes (that ends by itself, and aborting it could cut the response short).
    evictable = ("head", "idle", "drain")
    reasons = {
        "head": (logging.WARNING, "closed a connection whose request headers did not arrive within %g s"),
        "idle": (logging.DEBUG, "closed a keep-alive connection idle for %g s"),
        "busy": (logging.WARNING, "closed a connection whose request was not done within %g s"),
        "drain": (logging.WARNING, "closed a connection still sending a request body %g s after its response"),
        "closing": (logging.WARNING, "dropped a connection whose response was not read within %g s"),
    }

    class GuardedH11Protocol(H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            state = self.server_state
            waiting = getattr(state, "slca_waiting", None)
            if waiting is None:  # one per server: the connections with no request in progress, oldest first
                waiting = state.slca_waiting = {}
            self._waiting: dict[GuardedH11Protocol, None] = waiting
            self._phase: tuple[str, object] | None = None
            self._deadline: asyncio.TimerHandle | None = None
            self._responses = 0
            self._gone = False  # refused, evicted or timed out: dropped, its connection_lost to come

        def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
            if len(self.connections) >= max_connections and not self._evict_oldest_waiting():
                self._gone = True
                self.transport = transport  # type: ignore[assignment]
                log_throttled(
                    logger,
                    throttle,
                    "refused",
                    logging.WARNING,
                    "simulator service: refused a connection: %d connections are open, each with a request "
                    "in progress or closing (max_connections)",
                    len(self.connections),
                )
                transport.abort()  # type: ignore[attr-defined]
                return
            super().connection_made(transport)  # type: ignore[arg-type]
            self._watch()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_clock()
            self._waiting.pop(self, None)
            if self.flow is None:  # refused before uvicorn set the connection up
                return
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._watch()

        def on_response_complete(self) -> None:
            self._responses += 1
            super().on_response_complete()
            self._watch()

        def timeout_keep_alive_handler(self) -> None:
            super().timeout_keep_alive_handler()
            self._watch()  # uvicorn's close waits for the response to be read: bound that too

        def _watch(self) -> None:
            """Put the connection's current phase under its deadline (kept while the phase lasts)."""
            if self._gone or self.transport is None:
                return
            cycle = self.cycle
            phase: tuple[str, object]
            if self.transport.is_closing():
                phase, seconds = ("closing", None), header_timeout_s
            elif cycle is not None and not cycle.response_complete:
                phase, seconds = ("busy", cycle), busy_timeout_s
            elif self.conn.their_state is h11.IDLE and self.conn.our_state is h11.IDLE:
                if self._responses == 0 or self.conn.trailing_data[0]:
                    phase, seconds = ("head", None), header_timeout_s
                else:
                    phase, seconds = ("idle", None), keep_alive_s
            else:
                phase, seconds = ("drain", None), header_timeout_s
            if phase == self._phase:
                return
            self._phase = phase
            self._stop_clock()
            self._deadline = self.loop.call_later(seconds, self._expire, phase[0], seconds)
            self._waiting.pop(self, None)
            if phase[0] in evictable:
                self._waiting[self] = None

        def _stop_clock(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _drop(self) -> None:
            self._gone = True
            self._stop_clock()
            self._waiting.pop(self, None)
            self.transport.abort()

        def _expire(self, phase: str, seconds: float) -> None:
            self._deadline = None
            if self._gone:
                return
            level, reason = reasons[phase]
            log_throttled(logger, throttle, phase, level, "simulator service: " + reason, seconds)
            self._drop()

        def _evict_oldest_waiting(self) -> bool:
            """Close the connection that has waited longest with no request in progress; False: none."""
            while self._waiting:
                victim = next(iter(self._waiting))
                del self._waiting[victim]
                if victim._gone or victim.transport is None:
                    continue
                self.connections.discard(victim)  # its connection_lost comes on a later turn of the loop
                victim._drop()
                log_throttled(
                    logger,
                    throttle,
                    "evicted",
                    logging.WARNING,
                    "simulator service: closed the connection waiting longest to admit a new one "
                    "(%d connections open: max_connections)",
                    max_connections,
                )
                return True
            return False

    GuardedH11Protocol.__qualname__ = GuardedH11Protocol.__name__
    return GuardedH11Protocol


def _backlog(max_connections: int) -> int:
    return min(MAX_BACKLOG, max(MIN_BACKLOG, max_connections))


def _descriptors_needed(max_connections: int) -> int:
    # asyncio accepts up to `backlog` connections in one turn, each holding a descriptor before the
    # protocol can close it, and a dropped one holds its descriptor until the next turn.
    return max_connections + 2 * _backlog(max_connections) + FD_RESERVE


def _descriptor_limit(wanted: int) -> int | None:
    """The soft limit on open files, first raised towards ``wanted`` where the hard limit allows
    (None: no limit, or no way to know)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    if soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        if target > soft:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
                soft = target
            except (OSError, ValueError):
                pass
    return soft


def connection_budget(max_connections: int | None) -> tuple[int, int]:
    """(max_connections, listen backlog) that fit this process's limit on open files, raising the
    soft limit where the hard one allows. None: ``DEFAULT_MAX_CONNECTIONS``, fewer where the limit
    is lower; an explicit number that does not fit is a ValueError."""
    if max_connections is not None:
        check_count("max_connections", max_connections)
    wanted = DEFAULT_MAX_CONNECTIONS if max_connections is None else max_connections
    limit = _descriptor_limit(_descriptors_needed(wanted))
    if limit is None or _descriptors_needed(wanted) <= limit:
        return wanted, _backlog(wanted)
    if max_connections is not None:
        raise ValueError(
            f"max_connections={max_connections} needs about {_descriptors_needed(max_connections)} open files, "
            f"but this process may open {limit} (ulimit -n): lower max_connections or raise the limit"
        )
    fitting = wanted
    while fitting > 16 and _descriptors_needed(fitting) > limit:
        fitting = fitting * 3 // 4
    if _descriptors_needed(fitting) > limit:
        raise ValueError(
            f"this process may open only {limit} files (ulimit -n); the service needs about "
            f"{_descriptors_needed(fitting)}: raise the limit"
        )
    logger.warning(
        "simulator service: at most %d connections at once (not %d): this process may open %d files (ulimit -n)",
        fitting,
        wanted,
        limit,
    )
    return fitting, _backlog(fitting)


def server_config(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S,
    keep_alive_s: float = DEFAULT_KEEP_ALIVE_S,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    backlog: int | None = None,
    log_level: str = "warning",
) -> Any:
    """The ``uvicorn.Config`` that serves ``app`` with the guarded protocol (``guarded_h11_protocol``).

    A request in progress may take the body's time, the simulation's and some slack: its connection
    is dropped after ``2 * request_timeout_s + header_timeout_s``. WebSocket upgrades are off (an
    upgraded connection would leave the protocol's bounds)."""
    import uvicorn

    check_count("port", port, 1, 65535)
    request_timeout_s = check_seconds("request_timeout_s", request_timeout_s)
    header_timeout_s = check_seconds("header_timeout_s", header_timeout_s)
    keep_alive_s = check_seconds("keep_alive_s", keep_alive_s)
    check_count("max_connections", max_connections)
    protocol = guarded_h11_protocol(
        header_timeout_s=header_timeout_s,
        keep_alive_s=keep_alive_s,
        busy_timeout_s=2 * request_timeout_s + header_timeout_s,
        max_connections=max_connections,
    )
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol,
        ws="none",
        timeout_keep_alive=keep_alive_s,  # type: ignore[arg-type]  # a float works: it goes to call_later
        backlog=_backlog(max_connections) if backlog is None else backlog,
        log_level=log_level,
        access_log=False,
        server_header=False,
    )


def serve(
    simulator: Simulator,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    allow_no_token: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S,
    keep_alive_s: float = DEFAULT_KEEP_ALIVE_S,
    max_connections: int | None = None,
    log_level: str = "warning",
) -> None:
    """Run the service until interrupted (blocking). Every setting is checked before anything
    starts (ValueError naming it). ``max_connections`` None: ``DEFAULT_MAX_CONNECTIONS``, fewer where
    the limit on open files is lower (the soft limit is raised towards the hard one first)."""
    import uvicorn

    check_count("port", port, 1, 65535)
    check_seconds("header_timeout_s", header_timeout_s)
    check_seconds("keep_alive_s", keep_alive_s)
    if max_connections is not None:
        check_count("max_connections", max_connections)
    if not token and not is_loopback(host) and not allow_no_token:
        raise ValueError(
            f"refusing to serve on non-loopback host {host!r} without a token "
            "(set --token / $SLCA_SIM_TOKEN, or pass --allow-no-token)"
        )
    app = create_app(simulator, token=token, max_body_bytes=max_body_bytes, request_timeout_s=request_timeout_s)
    connections, backlog = connection_budget(max_connections)
    config = server_config(
        app,
        host=host,
        port=port,
        request_timeout_s=request_timeout_s,
        header_timeout_s=header_timeout_s,
        keep_alive_s=keep_alive_s,
        max_connections=connections,
        backlog=backlog,
        log_level=log_level,
    )
    server = uvicorn.Server(config)
    with throttled_server_logs():
        try:
            server.run()
        except KeyboardInterrupt:  # as uvicorn.run: Ctrl-C ends the service quietly
            pass
    if not server.started:
        raise SystemExit(3)  # uvicorn's STARTUP_FAILURE, as uvicorn.run exits
