"""Shared pieces for the simulator tests: sample tools, a fake OpenAI server, a uvicorn runner."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def tool(
    name: str,
    properties: dict[str, Any],
    required: list[str] | None = None,
    *,
    returns: dict[str, Any] | None = None,
    description: str = "",
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    if extra:
        parameters.update(extra)
    function: dict[str, Any] = {"name": name, "description": description, "parameters": parameters}
    if returns is not None:
        function["returns"] = returns
    return {"type": "function", "function": function}


STRING = {"type": "string"}

ORDER_TOOLS = [
    tool(
        "create_order",
        {"customer_id": STRING, "product_id": STRING, "quantity": {"type": "integer", "minimum": 1}},
        ["customer_id", "product_id"],
        description="Place an order for a product.",
    ),
    tool("get_order", {"order_id": STRING}, ["order_id"], description="Look up an order by id."),
    tool("cancel_order", {"order_id": STRING}, ["order_id"], description="Cancel an order."),
    tool("update_order", {"order_id": STRING, "shipping_address": STRING}, ["order_id"]),
    tool("delete_order", {"order_id": STRING}, ["order_id"]),
]

BOOKING_RETURNS = {
    "type": "object",
    "properties": {
        "booking_id": {"type": "string", "pattern": "^BK-[0-9]{6}$"},
        "hotel": {"type": "string"},
        "check_in": {"type": "string", "format": "date"},
        "nights": {"type": "integer", "minimum": 1, "maximum": 30},
        "status": {"type": "string", "enum": ["CONFIRMED", "CANCELED", "PENDING"]},
        "total_price": {"type": "number", "minimum": 0},
    },
    "required": ["booking_id", "status"],
    "additionalProperties": False,
}
BOOKING_TOOLS = [
    tool(
        "book_hotel",
        {
            "hotel": STRING,
            "check_in": {"type": "string", "format": "date"},
            "nights": {"type": "integer", "minimum": 1},
        },
        ["hotel", "check_in"],
        returns=BOOKING_RETURNS,
    ),
    tool("get_booking", {"booking_id": STRING}, ["booking_id"], returns=BOOKING_RETURNS),
    tool("cancel_booking", {"booking_id": STRING}, ["booking_id"], returns=BOOKING_RETURNS),
]

WEATHER_RETURNS = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "temperature": {"type": "number", "minimum": -60, "maximum": 60},
        "condition": {"type": "string", "enum": ["sunny", "cloudy", "rain", "snow"]},
        "humidity": {"type": "integer", "minimum": 0, "maximum": 100},
        "observed_at": {"type": "string", "format": "date-time"},
    },
    "required": ["city", "temperature", "condition"],
}
WEATHER_TOOL = tool(
    "get_weather",
    {
        "city": STRING,
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
    },
    ["city"],
    returns=WEATHER_RETURNS,
    extra={"additionalProperties": False},
)
SEARCH_TOOL = tool(
    "search_hotels", {"city": STRING, "max_price": {"type": "number"}, "limit": {"type": "integer"}}, ["city"]
)
ALL_TOOLS = [*ORDER_TOOLS, *BOOKING_TOOLS, WEATHER_TOOL, SEARCH_TOOL]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- a scripted OpenAI-compatible server --------------------------------------------------------

Reply = tuple[int, Any, float]  # (status, body: dict or raw str, delay in seconds)


def completion(content: str) -> dict[str, Any]:
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
    }


class FakeChatServer:
    """Answers POST /v1/chat/completions from a script (one reply per request, last one repeats)."""

    def __init__(self, script: list[Reply] | Callable[[dict[str, Any], int], Reply]) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    index = len(server.requests)
                    server.requests.append(body)
                    server.headers.append(dict(self.headers))
                status, payload, delay = server._reply(body, index)
                if delay:
                    time.sleep(delay)
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def _reply(self, body: dict[str, Any], index: int) -> Reply:
        if callable(self.script):
            return self.script(body, index)
        return self.script[min(index, len(self.script) - 1)]

    def __enter__(self) -> FakeChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# -- uvicorn in a thread ------------------------------------------------------------------------


@contextlib.contextmanager
def running_app(app: Any) -> Iterator[str]:
    """Serve an ASGI app on a free localhost port in a thread; yields its base URL."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="error", access_log=False, lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
