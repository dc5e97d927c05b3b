"""What the recipe's tests need, and no more: an OpenAI-compatible endpoint that only fails (the
package's tests have a full fake server in tests/fake_openai.py; these tests do not import from
tests/)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class _AlwaysUnavailable(BaseHTTPRequestHandler):
    """Every request: HTTP 503 with an OpenAI-style error body."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:  # noqa: N802 (http.server naming)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        payload = b'{"error": {"message": "server error"}}'
        try:
            self.send_response(503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default 5 drops bursts of connects (a 1 s SYN retry)


@pytest.fixture
def failing_endpoint() -> Iterator[str]:
    """The ``/v1`` base URL of a local endpoint that answers every request with HTTP 503."""
    server = _Server(("127.0.0.1", 0), _AlwaysUnavailable)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield f"http://{host}:{port}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
