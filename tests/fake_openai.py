"""A small OpenAI-compatible chat-completions server for tests, run on a thread on localhost.

Replies come from a queue of canned replies (FIFO), else from a reply function, else a default.
A reply can be a plain string (the assistant content) or a ``FakeReply`` describing a status code,
a delay, headers or a raw (possibly non-JSON) body. Every request body is recorded.

Usage in a test module::

    from fake_openai import FakeReply, fake_openai  # noqa: F401  (fake_openai is a fixture)

    def test_x(fake_openai):
        fake_openai.push("Rating: 4", FakeReply.error(500))
        judge = OpenAIJudge(EndpointConfig(fake_openai.url, "fake-model"))
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class FakeReply:
    content: str | None = None
    status: int = 200
    delay_s: float = 0.0
    raw_body: str | None = None  # sent verbatim instead of a chat completion
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def text(cls, content: str, delay_s: float = 0.0) -> FakeReply:
        return cls(content=content, delay_s=delay_s)

    @classmethod
    def error(cls, status: int = 500, body: str = '{"error": {"message": "server error"}}') -> FakeReply:
        return cls(status=status, raw_body=body)

    @classmethod
    def rate_limited(cls, retry_after: float | None = 0) -> FakeReply:
        headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
        return cls(status=429, raw_body='{"error": {"message": "rate limited"}}', headers=headers)

    @classmethod
    def raw(cls, body: str, status: int = 200) -> FakeReply:
        return cls(status=status, raw_body=body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default 5 drops bursts of connects (a 1 s SYN retry)


ReplyFn = Callable[[dict[str, Any]], "FakeReply | str"]


def completion_body(content: str, model: str = "fake-model") -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class FakeOpenAIServer:
    """Thread-run server; ``url`` is the ``/v1`` base URL to give a client."""

    def __init__(self, reply_fn: ReplyFn | None = None, default: FakeReply | str | None = None) -> None:
        self.reply_fn = reply_fn
        self.default = default
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._queue: deque[FakeReply | str] = deque()
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def push(self, *replies: FakeReply | str) -> None:
        with self._lock:
            self._queue.extend(replies)

    def start(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next_reply(self, body: dict[str, Any]) -> FakeReply:
        with self._lock:
            queued = self._queue.popleft() if self._queue else None
        reply: FakeReply | str | None = queued
        if reply is None and self.reply_fn is not None:
            reply = self.reply_fn(body)
        if reply is None:
            reply = self.default if self.default is not None else FakeReply.error(500, '{"error": "no canned reply"}')
        return FakeReply.text(reply) if isinstance(reply, str) else reply

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_unparsed": raw.decode("utf-8", "replace")}
                with server._lock:
                    server.requests.append(body)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    if not self.path.rstrip("/").endswith("/chat/completions"):
                        reply = FakeReply.error(404, '{"error": "not found"}')
                    else:
                        reply = server._next_reply(body)
                    if reply.delay_s:
                        time.sleep(reply.delay_s)
                    if reply.raw_body is not None:
                        payload = reply.raw_body.encode()
                    else:
                        payload = json.dumps(completion_body(reply.content or "", body.get("model", "?"))).encode()
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass
                finally:
                    with server._lock:
                        server.in_flight -= 1

        return Handler


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    """A started fake server with an empty queue; stopped after the test."""
    with FakeOpenAIServer() as server:
        yield server
