"""The shared HTTP client: retries, backoff, Retry-After, failures and the concurrency bound; the blocking
methods are the async ones run on the shared background loop."""

from __future__ import annotations

import asyncio
import json
import math
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from slca_grpo.http_client import HTTPClient, RequestFailed, RetryableReply, RetryPolicy


def scripted(replies):
    """A transport answering from ``replies`` in order (an exception instance is raised)."""
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        reply = replies[min(len(seen), len(replies)) - 1]
        if isinstance(reply, Exception):
            raise reply
        return reply

    return handler, seen


def recorder(sleeps: list[float]):
    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    return sleep


def client(handler, sleeps, **policy) -> HTTPClient:
    return HTTPClient(
        "http://api.test",
        headers={"Authorization": "Bearer t"},
        policy=RetryPolicy(**{"max_retries": 3, "backoff_s": 1.0, "max_backoff_s": 8.0, **policy}),
        transport=httpx.MockTransport(handler),
        sleep=recorder(sleeps),
    )


@given(retry=st.integers(1, 12), draw=st.floats(0, 0.999), hint=st.none() | st.floats(0, 100))
def test_the_backoff_is_capped_jittered_exponential_with_retry_after_as_a_floor(retry, draw, hint):
    policy = RetryPolicy(backoff_s=0.5, max_backoff_s=8.0)
    delay = policy.delay(retry, hint, draw=lambda: draw)
    base = min(8.0, 0.5 * 2 ** (retry - 1))
    assert delay == pytest.approx(max(base * (0.5 + draw / 2), min(hint, 8.0) if hint is not None else 0.0))
    assert 0 <= delay <= 8.0


def test_server_errors_rate_limits_and_transport_errors_are_retried_then_succeed():
    handler, seen = scripted(
        [
            httpx.Response(500, text="boom"),
            httpx.Response(429, headers={"Retry-After": "3"}),
            httpx.ConnectError("refused"),
            httpx.Response(200, json={"ok": True}),
        ]
    )
    sleeps: list[float] = []
    http = client(handler, sleeps)
    assert http.post("/v1/x", {"a": 1}) == {"ok": True}
    assert len(seen) == 4 and http.stats == {"requests": 4, "retries": 3, "failures": 0}
    assert 0.5 <= sleeps[0] < 1.0  # retry 1: 1 s × [0.5, 1)
    assert sleeps[1] >= 3.0  # Retry-After: 3 is a floor
    assert 2.0 <= sleeps[2] < 4.0  # retry 3: 4 s × [0.5, 1)
    assert seen[0].headers["authorization"] == "Bearer t" and json.loads(seen[0].content) == {"a": 1}


def test_client_errors_fail_at_once_and_exhausted_retries_name_the_last_reason():
    handler, seen = scripted([httpx.Response(401, text="no key")])
    http = client(handler, [])
    with pytest.raises(RequestFailed, match="HTTP 401: no key") as error:
        http.post("/x", {})
    assert error.value.status == 401 and len(seen) == 1 and http.stats["failures"] == 1

    handler, seen = scripted([httpx.Response(503)])
    http = client(handler, [], max_retries=2)
    with pytest.raises(RequestFailed, match="gave up after 3 attempts: HTTP 503"):
        http.post("/x", {})
    assert len(seen) == 3 and http.stats == {"requests": 3, "retries": 2, "failures": 1}


def test_a_parser_decides_which_bodies_are_worth_another_try():
    handler, seen = scripted([httpx.Response(200, text="<html>"), httpx.Response(200, json={"v": 2})])
    assert client(handler, []).post("/x", {}) == {"v": 2} and len(seen) == 2  # default: not JSON → retry

    def strict(response):
        if "v" not in response.json():
            raise ValueError("no v")  # not retryable: propagates as it is
        return response.json()["v"]

    handler, seen = scripted([httpx.Response(200, json={}), httpx.Response(200, json={"v": 3})])
    with pytest.raises(ValueError, match="no v"):
        client(handler, []).post("/x", {}, parse=strict)
    assert len(seen) == 1

    def wants_more(response):
        if response.json().get("v") is None:
            raise RetryableReply("empty")
        return response.json()["v"]

    handler, seen = scripted([httpx.Response(200, json={}), httpx.Response(200, json={"v": 4})])
    assert client(handler, []).post("/x", {}, parse=wants_more) == 4


def test_payloads_with_nan_from_model_output_are_still_sent():
    handler, seen = scripted([httpx.Response(200, json={})])
    client(handler, []).post("/x", {"value": math.nan, "city": "Zürich"})
    assert b"NaN" in seen[0].content and "Zürich".encode() in seen[0].content


def test_async_requests_retry_and_never_exceed_the_concurrency_bound():
    in_flight = peak = 0
    calls = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak, calls
        calls += 1
        if calls == 1:
            return httpx.Response(502)
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return httpx.Response(200, json={"n": json.loads(request.content)["n"]})

    sleeps: list[float] = []
    http = HTTPClient(
        "http://api.test",
        concurrency=3,
        policy=RetryPolicy(max_retries=2, backoff_s=0.5),
        transport=httpx.MockTransport(handler),
        sleep=recorder(sleeps),
    )

    async def main():
        try:
            return await asyncio.gather(*(http.apost("/x", {"n": n}) for n in range(10)))
        finally:
            await http.aclose()

    replies = asyncio.run(main())
    assert [r["n"] for r in replies] == list(range(10))
    assert peak == 3 and http.stats["retries"] == 1 and len(sleeps) == 1


def test_blocking_calls_share_one_bound_across_threads_and_close_releases_the_pool():
    in_flight = peak = 0
    lock = threading.Lock()

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        await asyncio.sleep(0.02)
        with lock:
            in_flight -= 1
        return httpx.Response(200, json=json.loads(request.content))

    http = HTTPClient("http://api.test", concurrency=2, transport=httpx.MockTransport(handler))
    with ThreadPoolExecutor(max_workers=6) as pool:
        replies = list(pool.map(lambda n: http.post("/x", {"n": n}), range(6)))
    assert [r["n"] for r in replies] == list(range(6)) and peak == 2
    assert http.stats == {"requests": 6, "retries": 0, "failures": 0}
    http.close()  # the background loop's client: closed from this thread without deadlock
    assert http.post("/x", {"n": 7}) == {"n": 7}  # and a fresh one is made on the next call


class Trickle(httpx.AsyncByteStream):
    """A body of ``chunks`` pieces of ``size`` bytes with no Content-Length, ``pause`` seconds apart;
    ``sent`` counts the pieces read."""

    def __init__(self, chunks: int, size: int, pause: float = 0.0) -> None:
        self.chunks, self.size, self.pause, self.sent = chunks, size, pause, 0

    async def __aiter__(self):
        for _ in range(self.chunks):
            if self.pause:
                await asyncio.sleep(self.pause)
            self.sent += 1
            yield b"x" * self.size


def test_a_reply_body_past_the_cap_is_refused_while_it_streams_not_after():
    body = Trickle(chunks=1000, size=1024)  # 1 MB, no Content-Length
    handler, seen = scripted([httpx.Response(200, stream=body)])
    http = HTTPClient("http://api.test", max_reply_bytes=10_000, transport=httpx.MockTransport(handler))
    with pytest.raises(RequestFailed, match=r"reply body is over 10,000 bytes \(max_reply_bytes\)"):
        http.post("/v1", {"a": 1})
    assert body.sent <= 11 and len(seen) == 1  # stopped at the cap, and not asked again
    assert http.stats["failures"] == 1


def test_a_declared_length_past_the_cap_is_refused_before_reading_and_a_reply_under_it_parses():
    body = Trickle(chunks=3, size=10)
    huge = httpx.Response(200, headers={"Content-Length": str(10**10)}, stream=body)
    handler, _ = scripted([huge])
    http = HTTPClient("http://api.test", max_reply_bytes=1000, transport=httpx.MockTransport(handler))
    with pytest.raises(RequestFailed, match="over 1,000 bytes"):
        http.post("/v1", {})
    assert body.sent == 0
    handler, _ = scripted([httpx.Response(200, json={"ok": "y" * 900})])
    assert HTTPClient("http://api.test", max_reply_bytes=1000, transport=httpx.MockTransport(handler)).post(
        "/v1", {}
    ) == {"ok": "y" * 900}


def test_a_reply_that_trickles_past_the_deadline_is_retried_then_fails_whatever_each_chunk_takes():
    # Each piece comes well within the timeout; the whole reply would take 2 s against a 0.2 s deadline.
    bodies = [Trickle(chunks=40, size=10, pause=0.05) for _ in range(2)]
    handler, seen = scripted([httpx.Response(200, stream=body) for body in bodies])
    http = HTTPClient(
        "http://api.test",
        timeout_s=0.2,
        policy=RetryPolicy(max_retries=1, backoff_s=0.0),
        transport=httpx.MockTransport(handler),
    )
    with pytest.raises(RequestFailed, match=r"gave up after 2 attempts: Timeout: no complete reply within 0.2 s"):
        http.post("/v1", {})
    assert len(seen) == 2 and all(body.sent < 40 for body in bodies)
    assert http.stats == {"requests": 2, "retries": 1, "failures": 1}


def test_the_reply_cap_must_be_positive():
    with pytest.raises(ValueError, match="max_reply_bytes must be >= 1"):
        HTTPClient("http://api.test", max_reply_bytes=0)
