"""The one endpoint layer: the ``openai:BASE_URL#MODEL`` grammar, its settings, and the chat client."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from slca_grpo.endpoints import (
    ChatClient,
    EndpointConfig,
    EndpointError,
    EndpointSpec,
    EndpointSpecError,
    completion_text,
    is_endpoint_spec,
    parse_endpoint_spec,
)
from slca_grpo.http_client import RetryableReply

EXPECTED = "expected openai:BASE_URL#MODEL, e.g. openai:http://localhost:8000/v1#Qwen/Qwen3-8B"


@pytest.mark.parametrize(
    "spec, base_url, model",
    [
        ("openai:http://localhost:8000/v1#Qwen/Qwen3-8B", "http://localhost:8000/v1", "Qwen/Qwen3-8B"),
        ("openai:https://api.example.com/v1#gpt-4o-mini", "https://api.example.com/v1", "gpt-4o-mini"),
        ("  openai:http://h:8000/v1/#m  ", "http://h:8000/v1", "m"),  # spaces and a trailing slash
        ("openai:http://h/v1/chat/completions#m", "http://h/v1", "m"),  # the full URL is fine too
        ("openai:http://h/v1/chat/completions/#m", "http://h/v1", "m"),
        ("OpenAI:http://h/v1#m", "http://h/v1", "m"),  # the prefix in any case
        ("openai: http://h/v1 # m ", "http://h/v1", "m"),
        ("openai:http://h/v1#a#b", "http://h/v1#a", "b"),  # the model is what follows the last '#'
        (
            "openai:http://10.0.0.2:30000#meta-llama/Llama-3.1-8B-Instruct",
            "http://10.0.0.2:30000",
            "meta-llama/Llama-3.1-8B-Instruct",
        ),
    ],
)
def test_good_specs(spec, base_url, model):
    assert parse_endpoint_spec(spec) == EndpointSpec(base_url, model)
    assert is_endpoint_spec(spec)


@pytest.mark.parametrize(
    "spec, problem",
    [
        ("", "it does not start with 'openai:'"),
        ("gpt-4o", "it does not start with 'openai:'"),
        ("http://localhost:8000/v1#m", "it does not start with 'openai:'"),
        ("anthropic:http://h#m", "it does not start with 'openai:'"),
        ("openai:http://localhost:8000/v1", "it names no model (add #MODEL after the URL)"),
        ("openai:http://h/v1#  ", "it names no model (add #MODEL after the URL)"),
        ("openai:localhost:8000#m", "'localhost:8000' is not an http(s) URL"),
        ("openai:ftp://h/v1#m", "'ftp://h/v1' is not an http(s) URL"),
        ("openai:#m", "'' is not an http(s) URL"),
        ("openai:http://#m", "'http:' is not an http(s) URL"),
    ],
)
def test_bad_specs_get_one_message_saying_what_is_wrong(spec, problem):
    with pytest.raises(EndpointSpecError) as error:
        parse_endpoint_spec(spec)
    assert str(error.value) == f"bad endpoint spec {spec!r}: {problem}; {EXPECTED}"
    assert isinstance(error.value, ValueError)


def test_the_offline_choice_is_accepted_and_named_in_the_message():
    assert parse_endpoint_spec("rule", offline="rule") is None
    assert parse_endpoint_spec(" schema ", offline="schema") is None
    with pytest.raises(EndpointSpecError) as error:
        parse_endpoint_spec("schema", offline="rule")
    assert str(error.value) == (
        "bad endpoint spec 'schema': it does not start with 'openai:'; "
        "expected 'rule' or openai:BASE_URL#MODEL, e.g. openai:http://localhost:8000/v1#Qwen/Qwen3-8B"
    )
    with pytest.raises(EndpointSpecError, match="it does not start with 'openai:'; expected openai:BASE_URL"):
        parse_endpoint_spec("rule")  # no offline choice: 'rule' is just another bad spec
    assert not is_endpoint_spec("rule") and not is_endpoint_spec(None)


def test_a_spec_prints_back_as_itself():
    text = "openai:http://localhost:8000/v1#Qwen/Qwen3-8B"
    assert str(parse_endpoint_spec(text)) == text


def test_endpoint_config_url_policy_and_checks():
    config = EndpointConfig("http://h/v1", "m", api_key="sk-x", max_retries=2, max_backoff_s=3.0)
    assert config.url == "http://h/v1/chat/completions"
    assert EndpointConfig("http://h/v1/chat/completions", "m").url == "http://h/v1/chat/completions"
    assert EndpointConfig("http://h/v1/", "m").url == "http://h/v1/chat/completions"
    policy = config.retry_policy
    assert (policy.max_retries, policy.backoff_s, policy.max_backoff_s) == (2, 0.5, 3.0)
    assert "sk-x" not in repr(config)  # keys stay out of logs
    with pytest.raises(ValueError, match="needs a base_url and a model name"):
        EndpointConfig("http://h/v1", "")
    with pytest.raises(ValueError, match="timeout_s must be > 0"):
        EndpointConfig("http://h/v1", "m", timeout_s=0)
    with pytest.raises(ValueError, match="max_retries and backoff_s >= 0"):
        EndpointConfig("http://h/v1", "m", max_retries=-1)


def test_completion_text_falls_back_to_reasoning_and_names_what_is_missing():
    def reply(**message):
        return {"choices": [{"message": message}]}

    assert completion_text(reply(content="Rating: 4")) == "Rating: 4"
    assert completion_text(reply(content="", reasoning_content="thought. Rating: 3")) == "thought. Rating: 3"
    assert completion_text(reply(content=None, reasoning="r")) == "r"
    with pytest.raises(EndpointError, match="empty completion"):
        completion_text(reply(content="  "))
    with pytest.raises(EndpointError, match="not a chat completion: missing 'choices'"):
        completion_text({})
    with pytest.raises(EndpointError, match="'message' is not an object"):
        completion_text({"choices": [{"message": "hi"}]})


def scripted(replies):
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return replies[min(len(seen), len(replies)) - 1]

    return httpx.MockTransport(handler), seen


def chat(content: str) -> httpx.Response:
    return httpx.Response(200, json={"choices": [{"message": {"role": "assistant", "content": content}}]})


def make_client(transport, **settings) -> tuple[ChatClient, list[float]]:
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    config = EndpointConfig("http://api.test/v1", "m", **{"backoff_s": 1.0, **settings})
    return ChatClient(config, transport=transport, sleep=sleep), sleeps


def test_the_blocking_wrappers_send_the_same_request_as_the_async_client():
    transport, seen = scripted([chat("hello")])
    client, _ = make_client(transport, api_key="sk-test", max_tokens=64)
    messages = [{"role": "user", "content": "hi"}]
    assert client.complete(messages, 0.3) == "hello"

    async def in_a_loop_of_its_own() -> str:
        try:
            return await client.acomplete(messages, 0.3)
        finally:
            await client.aclose()

    assert asyncio.run(in_a_loop_of_its_own()) == "hello"
    assert [str(r.url) for r in seen] == ["http://api.test/v1/chat/completions"] * 2
    assert seen[0].headers["authorization"] == "Bearer sk-test"
    assert (
        json.loads(seen[0].content)
        == json.loads(seen[1].content)
        == {
            "model": "m",
            "messages": messages,
            "temperature": 0.3,
            "max_tokens": 64,
        }
    )
    client.close()


def test_no_key_means_no_authorization_header_and_no_max_tokens():
    transport, seen = scripted([chat("ok")])
    client, _ = make_client(transport)
    assert client.post(client.payload([], 0.0)) == {"choices": [{"message": {"role": "assistant", "content": "ok"}}]}
    assert "authorization" not in seen[0].headers and "max_tokens" not in json.loads(seen[0].content)


def test_retries_and_failures_are_counted_and_become_endpoint_errors():
    transport, seen = scripted([httpx.Response(503), httpx.Response(429, headers={"Retry-After": "2"}), chat("x")])
    client, sleeps = make_client(transport, max_retries=2)
    assert client.complete([], 0.0) == "x"
    assert (client.requests, client.retries) == (3, 2) and 0.5 <= sleeps[0] < 1.0 and sleeps[1] >= 2.0

    transport, seen = scripted([httpx.Response(500)])
    client, _ = make_client(transport, max_retries=1)
    with pytest.raises(EndpointError, match="gave up after 2 attempts: HTTP 500"):
        client.complete([], 0.0)
    assert client.http.stats == {"requests": 2, "retries": 1, "failures": 1}

    transport, seen = scripted([httpx.Response(401, text="no key"), chat("unused")])
    client, _ = make_client(transport)
    with pytest.raises(EndpointError, match="HTTP 401: no key"):
        client.complete([], 0.0)
    assert len(seen) == 1

    transport, seen = scripted([httpx.Response(200, text="<html>"), chat("unused")])
    client, _ = make_client(transport)
    with pytest.raises(EndpointError, match="reply is not JSON"):
        client.complete([], 0.0)
    assert len(seen) == 1  # a 2xx body that is not JSON is not asked for again


def test_a_parser_may_ask_again():
    def content(response: httpx.Response) -> str:
        text = response.json()["choices"][0]["message"]["content"]
        if not text:
            raise RetryableReply("empty completion")
        return text

    transport, seen = scripted([chat(""), chat("second")])
    client, _ = make_client(transport)
    assert client.post(client.payload([], 0.0), parse=content) == "second" and client.retries == 1


def test_a_huge_bad_spec_is_named_cut_short_in_its_one_line_error():
    spec = "openai:ftp://" + "a" * 100_000 + "#m"
    with pytest.raises(EndpointSpecError) as caught:
        parse_endpoint_spec(spec)
    message = str(caught.value)
    assert len(message) < 600 and "\n" not in message
    assert message.startswith("bad endpoint spec 'openai:ftp://aaa") and "is not an http(s) URL" in message
