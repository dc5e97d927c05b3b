"""The service against hostile connections (what `slca serve-sim` runs: server_config's guarded
protocol): headers that never finish, idle and half-sent keep-alive requests, bodies that trickle in
or are never read, floods of connections, and the log lines all of these would cause."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import re
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from simulator_helpers import free_port, hang_up_mid_body

from slca_grpo.simulator import Simulator, SimulatorConfig, create_app
from slca_grpo.simulator.server import FD_RESERVE, connection_budget, server_config, throttled_server_logs
from slca_grpo.simulator.service import LOG_BURST, LogThrottle

# The server runs with the guarded protocol of `slca serve-sim` (server_config); the clients are raw
# sockets, so each can stop wherever an attacker would. Every wait polls against a deadline far
# beyond the timeouts under test, so a busy machine makes a test slower, never flaky.


@contextlib.contextmanager
def guarded_server(app: Any, **options: Any) -> Iterator[tuple[int, Any]]:
    """``app`` served as `slca serve-sim` serves it, on a free loopback port: (port, uvicorn.Server)."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(server_config(app, port=port, **options))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield port, server
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture
def sockets() -> Iterator[Any]:
    """``dial(port)``: a client socket connected to the server, closed after the test."""
    opened: list[socket.socket] = []

    def dial(port: int) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        opened.append(sock)
        return sock

    yield dial
    for sock in opened:
        sock.close()


def server_closed(sock: socket.socket, within: float) -> bool:
    """Whether the server closes ``sock`` (end of stream, or a reset) within ``within`` seconds;
    whatever it sends first is read and dropped."""
    deadline = time.monotonic() + within
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        sock.settimeout(min(0.25, left))
        try:
            if sock.recv(65536) == b"":
                return True
        except TimeoutError:
            continue
        except OSError:  # reset by the server
            return True


def count_closed(socks: list[socket.socket], at_least: int, within: float) -> int:
    """How many of ``socks`` the server has closed, polled until ``at_least`` are or time is up."""
    deadline = time.monotonic() + within
    closed: set[int] = set()
    for sock in socks:
        sock.setblocking(False)
    while True:
        for index, sock in enumerate(socks):
            if index in closed:
                continue
            try:
                if sock.recv(65536) == b"":
                    closed.add(index)
            except BlockingIOError:
                pass
            except OSError:
                closed.add(index)
        if len(closed) >= at_least or time.monotonic() > deadline:
            return len(closed)
        time.sleep(0.05)


def read_response(sock: socket.socket, within: float = 30.0) -> tuple[int, bytes, bytes]:
    """(status, head, body) of the next response on ``sock`` (one with a Content-Length)."""
    deadline = time.monotonic() + within
    data = b""
    while True:
        head, found, body = data.partition(b"\r\n\r\n")
        if found:
            length = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))
            if len(body) >= length:
                return int(head.split()[1]), head, body[:length]
        left = deadline - time.monotonic()
        assert left > 0, f"no complete response within {within} s: {data[:200]!r}"
        sock.settimeout(left)
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed before a complete response: {data[:200]!r}"
        data += chunk


def trickle_until_closed(sock: socket.socket, data: bytes, within: float) -> bool:
    """Send ``data`` (repeated) a byte every ~50 ms; whether the server closes the connection
    within ``within`` seconds. Each byte must not restart the server's clock."""
    deadline = time.monotonic() + within
    for byte in itertools.cycle(data):
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            return True
        if server_closed(sock, within=0.05):
            return True
        if time.monotonic() > deadline:
            return False
    return False  # never reached: the cycle is endless


HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: sim\r\n\r\n"


def test_a_client_that_never_finishes_its_headers_is_cut_off(sockets):
    app = create_app(Simulator(SimulatorConfig()), token="t")
    with guarded_server(app, header_timeout_s=1.0, keep_alive_s=120) as (port, _):
        silent = sockets(port)  # connects, sends nothing
        partial = sockets(port)
        partial.sendall(b"POST /v1/simulate HTTP/1.1\r\nHost: sim\r\nContent-Length: 10\r\n")
        slow = sockets(port)
        assert trickle_until_closed(slow, b"X-Slow: aaaa\r\n", within=60), "a byte every 50 ms kept it open"
        assert server_closed(silent, within=60) and server_closed(partial, within=60)
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200  # still serving


def test_kept_alive_connections_are_closed_when_idle_or_half_sending_the_next_request(sockets):
    with guarded_server(create_app(Simulator(SimulatorConfig())), header_timeout_s=120, keep_alive_s=0.5) as (port, _):
        idle = sockets(port)
        idle.sendall(HEALTHZ)
        assert read_response(idle)[0] == 200
        assert server_closed(idle, within=60)  # the keep-alive (0.5 s), not the header timeout (120 s)
    with guarded_server(create_app(Simulator(SimulatorConfig())), header_timeout_s=1.0, keep_alive_s=120) as (port, _):
        slow = sockets(port)
        slow.sendall(HEALTHZ)
        assert read_response(slow)[0] == 200
        slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: sim\r\n")  # the next head, never finished
        assert server_closed(slow, within=60)  # the header timeout (1 s), not the keep-alive (120 s)


def test_a_body_that_trickles_in_gets_408_and_an_unread_body_cannot_hold_the_connection(sockets):
    app = create_app(Simulator(SimulatorConfig()), token="t", request_timeout_s=0.5)
    with guarded_server(app, request_timeout_s=10.0, header_timeout_s=1.0, keep_alive_s=120) as (port, _):
        slow = sockets(port)
        slow.sendall(
            b"POST /v1/simulate HTTP/1.1\r\nHost: sim\r\nAuthorization: Bearer t\r\n"
            b'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"tools": ['
        )
        status, head, body = read_response(slow)
        assert status == 408 and "did not arrive within 0.5 s" in json.loads(body)["error"]
        assert b"connection: close" in head.lower()
        assert server_closed(slow, within=60)
        # No token: 401 at once, the body unread; the client goes on sending it, a byte at a time.
        unread = sockets(port)
        unread.sendall(b"POST /v1/simulate HTTP/1.1\r\nHost: sim\r\nContent-Length: 100000\r\n\r\n{")
        assert read_response(unread)[0] == 401
        assert trickle_until_closed(unread, b" ", within=60), "a body nobody reads kept the connection open"


def test_a_flood_of_half_open_connections_neither_exhausts_the_server_nor_locks_out_healthz(sockets):
    with guarded_server(create_app(Simulator(SimulatorConfig())), header_timeout_s=120, max_connections=8) as (
        port,
        server,
    ):
        flood = []
        for _ in range(40):
            sock = sockets(port)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: sim\r\n")  # never finished
            flood.append(sock)
        # The newcomer closes the connection that has waited longest without a request, so the
        # health check is answered although every slot was taken by a half-sent request.
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=30).status_code == 200
        assert len(server.server_state.connections) <= 8
        assert count_closed(flood, at_least=32, within=60) >= 32


class Gate:
    """An ASGI app whose requests wait until the gate opens."""

    def __init__(self) -> None:
        self.inside = threading.Semaphore(0)
        self.opened = threading.Event()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                done = "lifespan.startup.complete" if message["type"] == "lifespan.startup" else None
                await send({"type": done or "lifespan.shutdown.complete"})
                if done is None:
                    return
        self.inside.release()
        while not self.opened.is_set():
            await asyncio.sleep(0.01)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_with_every_connection_busy_new_ones_are_closed_at_once_and_floods_log_a_few_lines(sockets):
    gate, collect = Gate(), Collect()
    ours, uvicorns = logging.getLogger("slca_grpo.simulator.server"), logging.getLogger("uvicorn.error")
    level = ours.level
    options = {"max_connections": 2, "header_timeout_s": 120, "request_timeout_s": 120, "keep_alive_s": 120}
    with guarded_server(gate, **options) as (port, _), throttled_server_logs():
        ours.setLevel(logging.WARNING)
        ours.addHandler(collect)
        uvicorns.addHandler(collect)  # after uvicorn configured its logging, which drops handlers
        try:
            busy = [sockets(port), sockets(port)]
            for sock in busy:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: sim\r\n\r\n")
            assert gate.inside.acquire(timeout=60) and gate.inside.acquire(timeout=60)
            refused = [sockets(port) for _ in range(30)]
            assert count_closed(refused, at_least=30, within=60) == 30
            gate.opened.set()
            assert [read_response(sock)[0] for sock in busy] == [200, 200]  # never dropped for newcomers
            for _ in range(30):  # uvicorn warns on each malformed request: throttled as well
                sock = sockets(port)
                sock.sendall(b"NOT AN HTTP REQUEST\r\n\r\n")
                assert server_closed(sock, within=60)
        finally:
            gate.opened.set()
            ours.removeHandler(collect)
            uvicorns.removeHandler(collect)
            ours.setLevel(level)
    messages = [record.getMessage() for record in collect.records]
    refusals = [m for m in messages if "refused a connection" in m]
    malformed = [m for m in messages if "Invalid HTTP request" in m]
    assert 1 <= len(refusals) <= LOG_BURST and 1 <= len(malformed) <= LOG_BURST, messages


def test_the_log_throttle_lets_a_few_lines_through_and_counts_the_rest():
    now = [0.0]
    throttle = LogThrottle(burst=3, period_s=10.0, clock=lambda: now[0])
    assert [throttle.admit("a") for _ in range(5)] == [0, 0, 0, None, None]
    assert throttle.admit("b") == 0  # each kind on its own
    now[0] = 10.0
    assert throttle.admit("a") == 2  # the next window's first line says how many were left out
    assert throttle.admit("a") == 0


def test_disconnect_lines_are_throttled_but_every_disconnect_is_counted(caplog):
    sim = Simulator(SimulatorConfig())
    app = create_app(sim)
    with caplog.at_level(logging.WARNING, logger="slca_grpo.simulator.service"):
        for _ in range(20):
            asyncio.run(hang_up_mid_body(app))
    lines = [r for r in caplog.records if r.name == "slca_grpo.simulator.service" and "disconnected" in r.getMessage()]
    assert len(lines) == LOG_BURST
    assert 'slca_sim_client_disconnects_total{endpoint="/v1/simulate"} 20' in app.state.metrics.render(
        sim.stats.to_dict(), 0
    )


def test_max_connections_must_fit_the_limit_on_open_files(monkeypatch):
    resource = pytest.importorskip("resource")
    limits = {"soft": 600, "hard": 600}

    def setrlimit(kind: int, value: tuple[int, int]) -> None:
        if value[0] > limits["hard"]:
            raise ValueError("not allowed to raise the limit past the hard one")
        limits["soft"] = value[0]

    monkeypatch.setattr(resource, "getrlimit", lambda kind: (limits["soft"], limits["hard"]))
    monkeypatch.setattr(resource, "setrlimit", setrlimit)
    with pytest.raises(ValueError, match=r"max_connections=1000 needs about \d+ open files.*ulimit -n"):
        connection_budget(1000)
    fitted, backlog = connection_budget(None)  # the default shrinks to fit
    assert 16 <= fitted < 1024 and fitted + 2 * backlog + FD_RESERVE <= 600
    limits.update(soft=1024, hard=1_000_000)  # a soft limit below what is needed is raised
    assert connection_budget(1000) == (1000, 1000) and limits["soft"] >= 3000 + FD_RESERVE
