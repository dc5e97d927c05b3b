"""The simulator as an HTTP service (FastAPI), shared by many rollout workers.

Endpoints: ``POST /v1/simulate``, ``POST /v1/simulate_batch``, ``POST /v1/sessions/{id}/reset``,
``GET /healthz`` (open), ``GET /metrics`` (Prometheus text). A bearer token, when set, guards all
but ``/healthz``; bodies beyond ``max_body_bytes`` get 413 (checked on Content-Length and on the
bytes actually received); a malformed request gets 400 naming the field. Simulation runs on worker
threads with a time budget per request (``request_timeout_s``): the event loop, and so ``/healthz``
and every other client, stays responsive while one request is slow, and a request whose budget
runs out gets error observations of kind ``over_budget``. The budget also travels into the worker
(budget.py), so the work itself stops and frees its thread. A client that goes away before its
body arrives is counted as a disconnect and logged in one line. Nothing a client sends can raise
out of a handler.

Connections are bounded by the server that runs it (``server.serve``, ``slca serve-sim``). Lines a
client can cause at will (disconnects) are rate-limited, so a flood cannot flood the log.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.requests import ClientDisconnect

from slca_grpo.datatypes import Observation, ToolCall
from slca_grpo.simulator import errors as E
from slca_grpo.simulator.budget import time_budget
from slca_grpo.simulator.core import Simulator
from slca_grpo.simulator.metrics import CONTENT_TYPE, ServiceMetrics

logger = logging.getLogger(__name__)

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_BATCH = 1024
DEFAULT_REQUEST_TIMEOUT_S = 30.0
MAX_SESSION_ID_CHARS = 256
MAX_JSON_DEPTH = 100
MAX_JSON_INT_DIGITS = 4300  # Python's own default limit, whatever the interpreter is set to
CLIENT_CLOSED_REQUEST = 499  # nginx's status for it; nobody is left to read the response
REQUEST_TIMEOUT = 408
# Lines of one kind logged per connection (refused, timed out, malformed, disconnected): at most
# LOG_BURST per LOG_PERIOD_S; the next one let through says how many were left out.
LOG_BURST = 5
LOG_PERIOD_S = 60.0
MAX_LOG_KINDS = 256


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def check_seconds(name: str, value: Any) -> float:
    """``value`` as seconds if it is a finite number > 0; ValueError naming ``name`` otherwise (NaN too)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number of seconds > 0, got {value!r}")
    return float(value)


def check_count(name: str, value: Any, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` if it is an integer in [minimum, maximum]; ValueError naming ``name`` otherwise."""
    too_big = maximum is not None and isinstance(value, int) and value > maximum
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum or too_big:
        bound = f"from {minimum} to {maximum}" if maximum is not None else f">= {minimum}"
        raise ValueError(f"{name} must be an integer {bound}, got {value!r}")
    return value


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def create_app(
    simulator: Simulator,
    *,
    token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_batch: int = DEFAULT_MAX_BATCH,
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
) -> FastAPI:
    """A FastAPI app serving ``simulator``; ``token`` None or "" means no authentication.

    ``request_timeout_s`` bounds the simulation of one request and, separately, how long its body
    may take to arrive (past it: 408, and the connection is closed)."""
    request_timeout_s = check_seconds("request_timeout_s", request_timeout_s)
    check_count("max_body_bytes", max_body_bytes)
    check_count("max_batch", max_batch)
    app = FastAPI(title="slca-grpo tool simulator", docs_url=None, redoc_url=None, openapi_url=None)
    metrics = ServiceMetrics()
    expected = token.encode() if token else None
    app.state.simulator = simulator
    app.state.metrics = metrics
    throttle = LogThrottle()  # a client can cause these lines at will: a flood of them is left out

    def authorized(request: Request) -> bool:
        if expected is None:
            return True
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), expected)

    async def handle(
        request: Request,
        endpoint: str,
        work: Callable[[Request], Awaitable[Response]],
        *,
        public: bool = False,
    ) -> Response:
        start = time.perf_counter()
        try:
            if not public and not authorized(request):
                response = _error(401, "missing or wrong bearer token")
                response.headers["WWW-Authenticate"] = "Bearer"
            else:
                response = await work(request)
        except HttpError as exc:
            response = _error(exc.status, exc.message)
            if exc.status == REQUEST_TIMEOUT:  # what is left of the body is not wanted: no reuse
                response.headers["Connection"] = "close"
        except ClientDisconnect:  # the client's business, not a server error: one line, no traceback
            log_throttled(
                logger,
                throttle,
                ("disconnect", endpoint),
                logging.WARNING,
                "simulator service: the client disconnected before its %s request arrived",
                endpoint,
            )
            metrics.observe_disconnect(endpoint)
            return Response(status_code=CLIENT_CLOSED_REQUEST)
        except Exception:  # never let a request take the server down
            log_throttled(
                logger,
                throttle,
                ("unexpected", endpoint),
                logging.ERROR,
                "simulator service: unexpected error on %s",
                endpoint,
                exc_info=True,
            )
            response = _error(500, "internal error")
        metrics.observe_request(endpoint, response.status_code, time.perf_counter() - start)
        return response

    def record(observation: Observation) -> dict[str, Any]:
        metrics.observe_observation(observation.error.kind if observation.error else None)
        return {
            "observation": observation.text,
            "error": observation.error.to_dict() if observation.error else None,
            "cached": observation.cached,
            "latency_ms": round(observation.latency_ms, 4),
        }

    async def bounded(work: Callable[..., Any], *args: Any, count: int) -> list[Observation]:
        # Off the event loop, with a deadline. The worker carries the same deadline and stops at its
        # next checkpoint; only a backend that never checks (a plugin sleeping) keeps its thread.
        message = f"the simulator spent more than {request_timeout_s:g} s on this request"
        deadline = time.monotonic() + request_timeout_s
        try:
            result = await asyncio.wait_for(
                asyncio.to_thread(_run_until, deadline, message, work, *args), timeout=request_timeout_s
            )
        except asyncio.TimeoutError:  # the builtin TimeoutError from Python 3.11 on
            return [E.error_observation(E.OVER_BUDGET, message) for _ in range(count)]
        return result if isinstance(result, list) else [result]

    async def read_body(request: Request) -> Any:
        # A body that trickles in (a byte now and then) would hold its connection for ever.
        try:
            return await asyncio.wait_for(_read_json(request, max_body_bytes), timeout=request_timeout_s)
        except asyncio.TimeoutError:
            raise HttpError(
                REQUEST_TIMEOUT, f"the request body did not arrive within {request_timeout_s:g} s"
            ) from None

    async def simulate(request: Request) -> Response:
        call, tools, session_id = _parse_item(await read_body(request), "body")
        (observation,) = await bounded(simulator.simulate, call, tools, session_id, count=1)
        return _json(record(observation))

    async def simulate_batch(request: Request) -> Response:
        body = await read_body(request)
        items = body.get("requests") if isinstance(body, dict) else body
        if not isinstance(items, list):
            raise HttpError(400, "body must be a list of requests or an object with a 'requests' list")
        if len(items) > max_batch:
            raise HttpError(400, f"at most {max_batch} requests per batch, got {len(items)}")
        parsed = [_parse_item(item, f"requests[{i}]") for i, item in enumerate(items)]
        observations = await bounded(simulator.simulate_many, parsed, count=len(parsed))
        return _json({"results": [record(o) for o in observations]})

    async def reset(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        return _json({"session_id": session_id, "reset": simulator.reset_session(session_id)})

    async def healthz(request: Request) -> Response:
        return _json({"status": "ok", "backend": simulator.backend.name, "sessions": len(simulator.sessions)})

    async def metrics_text(request: Request) -> Response:
        text = metrics.render(simulator.stats.to_dict(), len(simulator.sessions))
        return Response(content=text, media_type=CONTENT_TYPE)

    # Plain Starlette routes: the handlers read and check the body themselves, so FastAPI's
    # dependency and validation layers would only add time to every request.
    routes = (
        ("/v1/simulate", "/v1/simulate", simulate, "POST", False),
        ("/v1/simulate_batch", "/v1/simulate_batch", simulate_batch, "POST", False),
        ("/v1/sessions/{session_id}/reset", "/v1/sessions/{id}/reset", reset, "POST", False),
        ("/healthz", "/healthz", healthz, "GET", True),
        ("/metrics", "/metrics", metrics_text, "GET", False),
    )
    for path, label, work, method, public in routes:

        async def endpoint(
            request: Request, _label: str = label, _work: Any = work, _public: bool = public
        ) -> Response:
            return await handle(request, _label, _work, public=_public)

        app.add_route(path, endpoint, methods=[method])
    return app


def _run_until(deadline: float, reason: str, work: Callable[..., Any], *args: Any) -> Any:
    """``work(*args)`` under a budget ending at ``deadline`` (time spent queued for a thread counts)."""
    with time_budget(deadline - time.monotonic(), reason):
        return work(*args)


async def _read_json(request: Request, limit: int) -> Any:
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise HttpError(400, "invalid Content-Length header")
        if int(declared) > limit:
            raise HttpError(413, f"request body exceeds {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise HttpError(413, f"request body exceeds {limit} bytes")
    if not body:
        raise HttpError(400, "request body is empty; expected a JSON object")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise HttpError(400, "request body is not UTF-8 text") from None
    return _strict_json(text, "request body")


def _strict_json(text: str, what: str) -> Any:
    """``text`` parsed as strict JSON; HttpError 400 naming ``what`` for anything else."""
    try:
        # RFC 8259: JSON between systems is UTF-8, and NaN/Infinity are not JSON.
        data = json.loads(text, parse_constant=_refuse_constant, parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        raise HttpError(400, f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise HttpError(400, f"{what} is nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:  # NaN/Infinity, integers beyond the digit limit
        raise HttpError(400, f"{what} is not valid JSON: {exc}") from None
    if _too_deep(data, MAX_JSON_DEPTH):
        raise HttpError(400, f"{what} is nested deeper than {MAX_JSON_DEPTH} levels")
    return data


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _bounded_int(digits: str) -> int:
    if len(digits) - digits.startswith("-") > MAX_JSON_INT_DIGITS:
        raise ValueError(f"an integer has more than {MAX_JSON_INT_DIGITS} digits")
    return int(digits)


def _too_deep(data: Any, limit: int) -> bool:
    stack = [(data, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(node, dict):
            stack.extend((value, depth + 1) for value in node.values())
        elif isinstance(node, list):
            stack.extend((value, depth + 1) for value in node)
    return False


def _parse_item(obj: Any, where: str) -> tuple[ToolCall, list[Any], str | None]:
    """Check the request envelope; what the policy put in the call is the simulator's to judge."""
    if not isinstance(obj, dict):
        raise HttpError(400, f"{where} must be a JSON object with 'tools', 'call' and optional 'session_id'")
    if "tools" not in obj:
        raise HttpError(400, f"{where}.tools is required (a list of tool schemas)")
    tools = obj["tools"]
    if not isinstance(tools, list):
        raise HttpError(400, f"{where}.tools must be a list of tool schemas, got {type(tools).__name__}")
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise HttpError(400, f"{where}.tools[{i}] must be an object, got {type(tool).__name__}")
    call = obj.get("call")
    if not isinstance(call, dict):
        raise HttpError(400, f"{where}.call is required and must be an object with 'name' and 'arguments'")
    name = call.get("name")
    if not isinstance(name, str):
        raise HttpError(400, f"{where}.call.name must be a string")
    arguments = call.get("arguments", call.get("parameters", {}))
    if isinstance(arguments, str):  # some clients send arguments as JSON text, OpenAI-style
        arguments = _strict_json(arguments, f"{where}.call.arguments (a JSON string)") if arguments.strip() else {}
    session_id = obj.get("session_id")
    if session_id is not None and (not isinstance(session_id, str) or len(session_id) > MAX_SESSION_ID_CHARS):
        raise HttpError(
            400, f"{where}.session_id must be a string of at most {MAX_SESSION_ID_CHARS} characters or null"
        )
    return ToolCall(name=name, arguments=arguments if arguments is not None else {}), tools, session_id


def _json(payload: Any, status: int = 200) -> Response:
    return Response(content=json.dumps(payload, ensure_ascii=False), status_code=status, media_type="application/json")


def _error(status: int, message: str) -> Response:
    return _json({"error": message}, status)


# -- log lines a client can cause: rate-limited ---------------------------------------------------


class LogThrottle:
    """At most ``burst`` log lines of one kind per ``period_s``; the first line let through after
    some were left out says how many."""

    def __init__(
        self, burst: int = LOG_BURST, period_s: float = LOG_PERIOD_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.burst = burst
        self.period_s = period_s
        self._clock = clock
        self._lock = threading.Lock()
        self._kinds: dict[Hashable, list[float]] = {}  # kind -> [window start, lines let through, left out]

    def admit(self, kind: Hashable) -> int | None:
        """None: leave this line out; else how many lines of this kind were left out before it."""
        now = self._clock()
        with self._lock:
            window = self._kinds.get(kind)
            if window is not None and now - window[0] < self.period_s:
                if window[1] < self.burst:
                    window[1] += 1
                    return 0
                window[2] += 1
                return None
            if window is None and len(self._kinds) >= MAX_LOG_KINDS:
                self._kinds = {k: w for k, w in self._kinds.items() if now - w[0] < self.period_s}
                if len(self._kinds) >= MAX_LOG_KINDS:
                    return None
            self._kinds[kind] = [now, 1, 0]
            return int(window[2]) if window is not None else 0


def log_throttled(
    log: logging.Logger, throttle: LogThrottle, kind: Hashable, level: int, message: str, *args: Any, **kwargs: Any
) -> None:
    """``log.log(level, message, *args)`` unless ``throttle`` leaves this kind of line out."""
    if not log.isEnabledFor(level):
        return
    left_out = throttle.admit(kind)
    if left_out is None:
        return
    if left_out:
        message, args = message + " (and %d more like it, not logged)", (*args, left_out)
    log.log(level, message, *args, **kwargs)
