"""Hostile inputs to evaluation: an ``hf:`` checkpoint whose weights do not match its config, and an
``openai:`` endpoint that answers something other than chat completions."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from fake_openai import FakeReply, fake_openai  # noqa: F401  (fixture)

from slca_grpo.cli import main
from slca_grpo.endpoints import EndpointConfig
from slca_grpo.eval.agent import AgentRequest
from slca_grpo.eval.openai_agent import OpenAIChatAgent
from slca_grpo.eval.report import REQUESTS_KEY, check_request_failures
from slca_grpo.models import TinyModelConfig, build_tiny_model, save_model, train_tokenizer

HELLO = AgentRequest(messages=[{"role": "user", "content": "hi"}], tools=[])


def last_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    last = err.splitlines()[-1] if err else ""
    assert last.startswith("error: "), err
    return last


# --- hf: checkpoints ---------------------------------------------------------------------------


@pytest.fixture
def tiny_folder(tmp_path: Path) -> Path:
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call> sunny Paris weather'
    tokenizer = train_tokenizer([text] * 20, vocab_size=400)
    return save_model(build_tiny_model(tokenizer, TinyModelConfig(seed=1)), tokenizer, tmp_path / "model")


def test_eval_refuses_an_hf_checkpoint_with_more_layers_in_its_config_than_its_weights(tiny_folder, tmp_path, capsys):
    config = json.loads((tiny_folder / "config.json").read_text())
    config["num_hidden_layers"] = 3
    config.pop("layer_types", None)
    (tiny_folder / "config.json").write_text(json.dumps(config))
    out = tmp_path / "eval"
    command = ["eval", "indomain", "--policy", f"hf:{tiny_folder}", "--tasks", "synthetic", "--limit", "1"]
    assert main([*command, "--out", str(out)]) == 2
    line = last_error_line(capsys)
    assert line.startswith(f"error: model folder {tiny_folder}: its weights do not match its config.json: "), line
    assert "model.layers.2." in line
    assert not (out / "summary.json").exists()  # no scores from a model with random layers


def test_eval_refuses_an_hf_checkpoint_with_nan_weights(tiny_folder, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    path = tiny_folder / "model.safetensors"
    weights = {name: tensor.clone() for name, tensor in load_file(path).items()}
    weights["model.embed_tokens.weight"][5, 0] = float("nan")
    save_file(weights, path, metadata={"format": "pt"})
    command = ["eval", "indomain", "--policy", f"hf:{tiny_folder}", "--tasks", "synthetic", "--limit", "1"]
    assert main([*command, "--out", str(tmp_path / "eval")]) == 2
    assert last_error_line(capsys) == (
        f"error: model folder {tiny_folder}: its weights are not finite: model.embed_tokens.weight holds NaN "
        "(a diverged training run? use an earlier checkpoint)"
    )


# --- openai: endpoints -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("not json", "reply is not JSON"),
        ("[1, 2]", "no choices[0].message"),
        ('{"error": "overloaded"}', "no choices[0].message"),
        ('{"choices": []}', "no choices[0].message"),
        ('{"choices": [{"message": "hi"}]}', "its message is not an object"),
        ('{"choices": [{"message": {"role": "assistant"}}]}', "its message has no content"),
        ('{"choices": [{"message": {"content": 5}}]}', "its content is not text"),
        ('{"choices": [{"message": {"content": null, "tool_calls": {"a": 1}}}]}', "tool_calls is not a list"),
        ('{"choices": [{"message": {"content": null, "tool_calls": [{"function": "f"}]}}]}', "malformed tool call"),
    ],
)
def test_replies_that_are_not_chat_completions_are_counted_failures(fake_openai, body, error):
    fake_openai.push(FakeReply.raw(body), "fine")
    agent = OpenAIChatAgent(EndpointConfig(fake_openai.url, "m", max_retries=0))
    assert agent.respond([HELLO]) == [""]
    assert (agent.requests, agent.failures) == (1, 1)
    assert error in agent.first_error and "\n" not in agent.first_error
    assert agent.respond([HELLO]) == ["fine"]  # a good reply after it is no failure
    assert (agent.requests, agent.failures) == (2, 1) and error in agent.first_error


def test_empty_answers_and_text_parts_are_answers_not_failures(fake_openai):
    empty = {"choices": [{"message": {"role": "assistant", "content": ""}}]}
    parts = {"choices": [{"message": {"role": "assistant", "content": [{"type": "text", "text": "Sunny."}]}}]}
    fake_openai.push(FakeReply.raw(json.dumps(empty)), FakeReply.raw(json.dumps(parts)))
    agent = OpenAIChatAgent(EndpointConfig(fake_openai.url, "m", max_retries=0, concurrency=1))
    assert agent.respond([HELLO]) == [""] and agent.respond([HELLO]) == ["Sunny."]
    assert (agent.requests, agent.failures, agent.first_error) == (2, 0, None)


def test_request_failures_go_into_the_summary_and_stderr(tmp_path, capsys):
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"n": 3, "r_tool": 0.0}))
    oracle = SimpleNamespace(name="oracle")  # counts no requests: nothing recorded or said
    assert check_request_failures(oracle, summary) is None
    assert json.loads(summary.read_text()) == {"n": 3, "r_tool": 0.0} and capsys.readouterr().err == ""

    some = SimpleNamespace(name="openai:m", requests=3, failures=1, first_error="reply is not JSON: 'x'")
    assert check_request_failures(some, summary) is None
    assert capsys.readouterr().err == (
        "warning: 1 of 3 requests to openai:m failed (scored as empty answers); the first: reply is not JSON: 'x'\n"
    )
    assert json.loads(summary.read_text())[REQUESTS_KEY] == {
        "total": 3,
        "failed": 1,
        "first_error": "reply is not JSON: 'x'",
    }

    every = SimpleNamespace(name="openai:m", requests=3, failures=3, first_error="HTTP 500")
    message = check_request_failures(every, summary)
    assert message.startswith("every request to openai:m failed (3 of 3); the first: HTTP 500")
    assert str(tmp_path) in message and "\n" not in message
    assert capsys.readouterr().err == ""  # the caller exits with the message instead
    assert json.loads(summary.read_text())[REQUESTS_KEY]["failed"] == 3


def test_eval_indomain_exits_non_zero_when_every_request_failed(fake_openai, tmp_path, capsys):
    fake_openai.default = FakeReply.raw("<html>bad gateway</html>")
    out = tmp_path / "eval"
    command = ["eval", "indomain", "--policy", f"openai:{fake_openai.url}#m", "--tasks", "synthetic"]
    assert main([*command, "--limit", "2", "--max-turns", "1", "--out", str(out)]) == 1
    line = last_error_line(capsys)
    assert line.startswith("error: every request to openai:m failed (2 of 2); the first: reply is not JSON"), line
    record = json.loads((out / "summary.json").read_text())[REQUESTS_KEY]
    assert (record["total"], record["failed"]) == (2, 2) and "reply is not JSON" in record["first_error"]


def test_eval_indomain_warns_when_some_requests_failed(fake_openai, tmp_path, capsys):
    fake_openai.push("I cannot help with that.")
    fake_openai.default = FakeReply.raw('{"object": "error"}')
    out = tmp_path / "eval"
    command = ["eval", "indomain", "--policy", f"openai:{fake_openai.url}#m", "--tasks", "synthetic"]
    assert main([*command, "--limit", "2", "--max-turns", "1", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert (
        "warning: 1 of 2 requests to openai:m failed (scored as empty answers); the first: reply is not a chat" in err
    )
    assert json.loads((out / "summary.json").read_text())[REQUESTS_KEY]["failed"] == 1


def test_eval_bfcl_exits_non_zero_when_every_request_failed(fake_openai, tmp_path, capsys):
    pytest.importorskip("bfcl_eval", reason="needs the bfcl extra")
    fake_openai.default = FakeReply.raw("not json")
    out = tmp_path / "bfcl"
    command = ["eval", "bfcl", "--policy", f"openai:{fake_openai.url}#m", "--categories", "simple", "--limit", "2"]
    assert main([*command, "--out", str(out), "--no-progress"]) == 1
    assert last_error_line(capsys).startswith("error: every request to openai:m failed (2 of 2)")
    assert json.loads((out / "summary.json").read_text())[REQUESTS_KEY]["failed"] == 2
