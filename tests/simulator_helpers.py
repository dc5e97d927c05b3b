"""Shared pieces for the simulator tests: sample tools, a fake OpenAI server, a uvicorn runner."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from fake_openai import FakeOpenAIServer, FakeReply
from fake_openai import completion_body as completion  # noqa: F401  (re-exported for the tests)
from tool_schemas import STRING, function_tool  # noqa: F401  (STRING re-exported for the tests)


def tool(
    name: str,
    properties: dict[str, Any],
    required: list[str] | None = None,
    *,
    returns: dict[str, Any] | None = None,
    description: str = "",
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A tool schema that always has a description (empty unless given), as the simulator tests want."""
    return function_tool(name, properties, required, description=description, returns=returns, extra=extra)


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


# -- a scripted OpenAI-compatible server (the shared fake server of fake_openai.py) ---------------------------

Reply = tuple[int, Any, float]  # (status, body: dict or raw str, delay in seconds)


class FakeChatServer(FakeOpenAIServer):
    """The shared fake server driven by a script: one reply per request, the last one repeating
    (or a function of the request body and its index)."""

    def __init__(self, script: list[Reply] | Callable[[dict[str, Any], int], Reply]) -> None:
        self.script = script
        super().__init__(reply_fn=self._scripted)

    @property
    def base_url(self) -> str:
        return self.url

    def _scripted(self, body: dict[str, Any]) -> FakeReply:
        index = len(self.requests) - 1  # the request being answered is already recorded
        if callable(self.script):
            status, payload, delay = self.script(body, index)
        else:
            status, payload, delay = self.script[min(index, len(self.script) - 1)]
        raw = payload if isinstance(payload, str) else json.dumps(payload)
        return FakeReply(status=status, raw_body=raw, delay_s=delay)


# -- uvicorn in a thread ------------------------------------------------------------------------


@contextlib.contextmanager
def running_app(app: Any) -> Iterator[str]:
    """Serve an ASGI app on a free localhost port in a thread; yields its base URL."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", access_log=False, lifespan="off")
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


async def hang_up_mid_body(app: Any, token: str | None = None) -> list[dict]:
    """Drive the ASGI app as a server would for a client that sends half a body and leaves; the
    messages the app sent back."""
    incoming = [
        {"type": "http.request", "body": b'{"tools": [', "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[dict] = []

    async def receive() -> dict:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    headers = [(b"content-type", b"application/json")]
    if token:
        headers.insert(0, (b"authorization", f"Bearer {token}".encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/simulate",
        "raw_path": b"/v1/simulate",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8765),
    }
    await app(scope, receive, send)
    return sent
