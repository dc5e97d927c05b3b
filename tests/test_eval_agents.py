import json
import re

import pytest
import torch
from fake_openai import FakeReply, fake_openai  # noqa: F401  (fixture)
from scripted import ScriptedLM
from tool_schemas import weather_tool

from slca_grpo.chat import parse_tool_calls
from slca_grpo.cli import main
from slca_grpo.data.synthetic import generate_suite
from slca_grpo.datatypes import ToolCall
from slca_grpo.endpoints import EndpointConfig
from slca_grpo.eval.agent import AgentRequest
from slca_grpo.eval.hf_agent import HFChatAgent
from slca_grpo.eval.indomain import score_trajectories
from slca_grpo.eval.openai_agent import OpenAIChatAgent, to_api_messages
from slca_grpo.eval.policies import UnknownPolicySpec, resolve_model_agent
from slca_grpo.eval.text_loop import TaskOracleAgent, run_text_episodes
from slca_grpo.models.tokenizer import train_tokenizer
from slca_grpo.rewards.rule_judge import RuleJudge
from slca_grpo.rollout.environment import ToolEnvironment
from slca_grpo.simulator import SimulatorConfig, build_simulator

WEATHER = weather_tool()


def reply_with_calls(calls, content=None):
    message = {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": a}}
            for i, (n, a) in enumerate(calls)
        ],
    }
    return FakeReply.raw(json.dumps({"choices": [{"index": 0, "message": message}]}))


def test_openai_agent_native_mode_turns_tool_calls_into_a_hermes_block(fake_openai):
    fake_openai.push(
        reply_with_calls([("get_weather", '{"city": "Oslo"}'), ("get_weather", {"city": "Rome"})], "Checking.")
    )
    fake_openai.push("It is 3 degrees in Oslo and 20 in Rome.")
    agent = OpenAIChatAgent(EndpointConfig(fake_openai.url, "m", max_retries=0))
    request = AgentRequest(messages=[{"role": "user", "content": "Weather in Oslo and Rome?"}], tools=[WEATHER])
    text = agent.respond([request])[0]
    parsed = parse_tool_calls(text, ["get_weather"])
    assert parsed.calls == [ToolCall("get_weather", {"city": "Oslo"}), ToolCall("get_weather", {"city": "Rome"})]
    assert len(parsed.blocks) == 1 and text.startswith("Checking.")
    body = fake_openai.requests[0]
    assert body["tools"] == [WEATHER] and body["messages"] == [{"role": "user", "content": "Weather in Oslo and Rome?"}]
    # The follow-up turn sends the call back with ids and the results tied to them.
    follow = AgentRequest(
        messages=request.messages
        + [
            {"role": "assistant", "content": text},
            {"role": "tool", "content": "3C"},
            {"role": "tool", "content": "20C"},
        ],
        tools=[WEATHER],
    )
    assert agent.respond([follow])[0] == "It is 3 degrees in Oslo and 20 in Rome."
    sent = fake_openai.requests[1]["messages"]
    ids = [c["id"] for c in sent[1]["tool_calls"]]
    assert [m["tool_call_id"] for m in sent[2:]] == ids and len(set(ids)) == 2
    assert json.loads(sent[1]["tool_calls"][0]["function"]["arguments"]) == {"city": "Oslo"}


def test_openai_agent_failures_are_counted_not_raised(fake_openai):
    fake_openai.push(FakeReply.error(500), FakeReply.raw("not json"))
    agent = OpenAIChatAgent(EndpointConfig(fake_openai.url, "m", max_retries=0))
    requests = [AgentRequest(messages=[{"role": "user", "content": "hi"}], tools=[]) for _ in range(2)]
    assert agent.respond(requests) == ["", ""]
    assert agent.failures == 2


def test_openai_agent_prompt_mode_puts_tools_in_the_system_prompt(fake_openai):
    fake_openai.push('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>')
    agent = OpenAIChatAgent(EndpointConfig(fake_openai.url, "m", max_retries=0), mode="prompt")
    text = agent.respond([AgentRequest(messages=[{"role": "user", "content": "Oslo?"}], tools=[WEATHER])])[0]
    assert parse_tool_calls(text).calls == [ToolCall("get_weather", {"city": "Oslo"})]
    body = fake_openai.requests[0]
    assert "tools" not in body and "<tools>" in body["messages"][0]["content"]


def test_to_api_messages_accepts_structured_tool_calls():
    messages = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "a1", "name": "f", "arguments": {"k": 1}}]},
        {"role": "tool", "tool_call_id": "a1", "content": "ok"},
    ]
    out = to_api_messages(messages)
    assert out[1]["tool_calls"][0] == {
        "id": "a1",
        "type": "function",
        "function": {"name": "f", "arguments": '{"k": 1}'},
    }
    assert out[2] == {"role": "tool", "tool_call_id": "a1", "content": "ok"}


def test_hf_agent_answers_one_turn_and_stops_at_the_call():
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    tokenizer = train_tokenizer([call + " sunny Paris weather"] * 20, vocab_size=400)
    model = ScriptedLM(tokenizer, lambda prompt, turn: call + " trailing text that must not appear")
    agent = HFChatAgent(model, tokenizer, max_new_tokens=100)
    texts = agent.respond([AgentRequest(messages=[{"role": "user", "content": "Paris?"}], tools=[WEATHER])] * 3)
    assert texts == [call] * 3
    answer = HFChatAgent(ScriptedLM(tokenizer, lambda p, t: "sunny<|im_end|>"), tokenizer)
    assert answer.respond([AgentRequest(messages=[{"role": "user", "content": "Paris?"}], tools=[])]) == ["sunny"]


def test_hf_agent_samples_under_bf16_autocast_only_when_asked():
    import functools

    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    tokenizer = train_tokenizer([call + " sunny Paris weather"] * 20, vocab_size=400)
    for bf16 in (False, True):
        model = ScriptedLM(tokenizer, lambda prompt, turn: call)
        seen = []
        original = model.forward

        @functools.wraps(original)
        def forward(*args, _original=original, _seen=seen, **kwargs):
            _seen.append(torch.is_autocast_enabled("cpu"))
            return _original(*args, **kwargs)

        model.forward = forward
        agent = HFChatAgent(model, tokenizer, max_new_tokens=100, bf16=bf16)
        assert agent.respond([AgentRequest(messages=[{"role": "user", "content": "Paris?"}], tools=[WEATHER])]) == [
            call
        ]
        assert seen and set(seen) == {bf16}


def test_oracle_through_the_text_loop_scores_exact_calls():
    tasks = generate_suite(seed=3, n_train=0, n_test=30).test
    simulator = build_simulator(SimulatorConfig(backend="schema"))
    trajectories = run_text_episodes(TaskOracleAgent(tasks), tasks, ToolEnvironment(simulator), max_turns=4)
    items, summary, _ = score_trajectories(trajectories, tasks, RuleJudge())
    callers = [i for i in items if i["kind"] != "irrelevant"]
    assert callers and all(i["name_f1"] == 1.0 and i["arg_match"] == 1.0 and i["redundant_calls"] == 0 for i in callers)
    assert all(i["calls"] == 0 and not i["no_call"] for i in items if i["kind"] == "irrelevant")
    assert summary["name_f1"] == 1.0
    # Every gold call was answered by its fixture, never by the simulator.
    assert simulator.stats.calls == 0


def test_oracle_without_reference_answers_states_the_tool_facts():
    import dataclasses

    from slca_grpo.eval.text_loop import grounded_answer

    # Not seed 4: its test split has a get_local_time answer "utc offset: -08:00", whose "-08" the rule judge
    # counts as an invented number (it knows the response's numbers unsigned), a judge quirk, not the oracle's.
    tasks = [dataclasses.replace(t, reference_answer=None) for t in generate_suite(seed=5, n_train=0, n_test=24).test]
    simulator = build_simulator(SimulatorConfig(backend="schema"))
    trajectories = run_text_episodes(TaskOracleAgent(tasks), tasks, ToolEnvironment(simulator), max_turns=4)
    items, summary, _ = score_trajectories(trajectories, tasks, RuleJudge())
    callers = [i for i in items if i["kind"] != "irrelevant"]
    assert callers and all(i["r_sum"] >= 0.75 for i in callers), [i["r_sum"] for i in callers]
    assert grounded_answer(
        ['{"city": "Oslo", "temperature": 3.5, "ok": true, "items": [{"id": "A-1"}]}', "plain text"]
    ) == ("Here is what I found. city: Oslo; temperature: 3.5; id: A-1. The tool answered: plain text")
    assert grounded_answer([]) == "I have no tool results to report."


def test_policy_specs_are_checked(tmp_path):
    with pytest.raises(UnknownPolicySpec, match="not a checkpoint folder"):
        resolve_model_agent("hf:/definitely/missing")
    run = tmp_path / "run"
    for step in ("step-000007", "step-000015"):
        (run / "checkpoints" / step / "model").mkdir(parents=True)
        (run / "checkpoints" / step / "model" / "config.json").write_text("{}")
        (run / "checkpoints" / step / "state.pt").write_bytes(b"")
    expected = f"its checkpoints are step-000015, step-000007 (newest first): use {run}/checkpoints/step-000015/model"
    with pytest.raises(UnknownPolicySpec, match=re.escape(f"{run} is not a model folder (no config.json); {expected}")):
        resolve_model_agent(f"hf:{run}")
    with pytest.raises(UnknownPolicySpec, match="openai:BASE_URL#MODEL"):
        resolve_model_agent("openai:http://localhost:1")
    with pytest.raises(UnknownPolicySpec, match="unknown policy spec"):
        resolve_model_agent("claude")


def test_eval_indomain_cli_writes_reports(tmp_path, capsys):
    assert (
        main(
            ["eval", "indomain", "--policy", "oracle", "--tasks", "synthetic", "--limit", "12", "--out", str(tmp_path)]
        )
        == 0
    )
    for name in ("per_item.jsonl", "summary.json", "report.md", "metrics.png"):
        assert (tmp_path / name).stat().st_size > 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["n"] == 12 and summary["name_f1"] == 1.0
    capsys.readouterr()
    # The folder holds an evaluation now: another is refused before any work, unless --force.
    written = (tmp_path / "summary.json").read_bytes()
    assert main(["eval", "indomain", "--policy", "oracle", "--tasks", "synthetic", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"error: --out {tmp_path} already holds a run (summary.json, report.md); add --force to replace it, "
        "or use another folder\n"
    )
    assert (tmp_path / "summary.json").read_bytes() == written
    command = ["eval", "indomain", "--tasks", "synthetic", "--limit", "3", "--out", str(tmp_path), "--force"]
    assert main([*command, "--policy", "nope"]) == 2
    assert "unknown policy spec" in capsys.readouterr().err
    assert main([*command, "--policy", "oracle"]) == 0
    assert json.loads((tmp_path / "summary.json").read_text())["n"] == 3


def test_eval_indomain_writes_a_new_folder_by_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["eval", "indomain", "--policy", "oracle", "--tasks", "synthetic", "--limit", "2"]) == 0
    (made,) = (tmp_path / "runs" / "eval-indomain").iterdir()
    assert made.name.startswith("oracle-") and (made / "summary.json").is_file()


def test_token_counts_reach_the_in_domain_metrics(fake_openai):
    tasks = generate_suite(seed=5, n_train=0, n_test=3).test
    body = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "I cannot help with that, sorry."}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57},
    }
    for _ in tasks:
        fake_openai.push(FakeReply.raw(json.dumps(body)))
    agent = OpenAIChatAgent(EndpointConfig(fake_openai.url, "m", max_retries=0, concurrency=1))
    simulator = build_simulator(SimulatorConfig(backend="schema"))
    trajectories = run_text_episodes(agent, tasks, ToolEnvironment(simulator), max_turns=2)
    assert [t.counters["generated_tokens"] for t in trajectories] == [7, 7, 7]
    items, summary, _ = score_trajectories(trajectories, tasks, RuleJudge())
    assert summary["generated_tokens"] == 7.0


def test_eval_indomain_samples_each_task_several_times_in_fresh_sessions(tmp_path, capsys):
    out = tmp_path / "sampled"
    command = ["eval", "indomain", "--tasks", "synthetic", "--limit", "4", "--samples", "3", "--temperature", "1"]
    assert main([*command, "--policy", "oracle", "--out", str(out)]) == 0
    items = [json.loads(line) for line in (out / "per_item.jsonl").read_text().splitlines()]
    assert [item["sample"] for item in items] == [0] * 4 + [1] * 4 + [2] * 4
    assert [item["task_id"] for item in items[4:8]] == [item["task_id"] for item in items[:4]]
    summary = json.loads((out / "summary.json").read_text())
    # Every sample's calls ran in their own simulator sessions, so each scores as the first did.
    assert summary["n"] == 12 and summary["name_f1"] == 1.0 and summary["success@0.9"] == 1.0
    assert (summary["samples"], summary["temperature"], summary["seed"]) == (3, 1.0, 0)
    assert "3 samples a task at temperature 1" in (out / "report.md").read_text()


def test_eval_indomain_samples_a_local_model_reproducibly_from_its_seed(tmp_path):
    command = ["eval", "indomain", "--policy", "reader", "--tasks", "synthetic", "--limit", "1"]
    command += ["--samples", "2", "--temperature", "1", "--max-new-tokens", "48", "--max-turns", "1"]

    def responses(name: str, seed: str) -> list[str]:
        assert main([*command, "--seed", seed, "--out", str(tmp_path / name)]) == 0
        return [json.loads(line)["response"] for line in (tmp_path / name / "per_item.jsonl").read_text().splitlines()]

    first = responses("a", "0")
    assert len(first) == 2 and first[0] != first[1]  # two draws, not one greedy episode twice
    assert responses("b", "0") == first
    assert responses("c", "1") != first


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--samples", "0"], "--samples must be between 1 and 64, got 0"),
        (["--samples", "1000000", "--temperature", "1"], "--samples must be between 1 and 64, got 1000000"),
        (["--limit", "0"], "--limit must be >= 1 (leave it out for every task), got 0"),
        (["--max-turns", "0"], "--max-turns must be >= 1, got 0"),
        (["--batch-size", "0"], "--batch-size must be >= 1, got 0"),
        (["--samples", "2"], "--samples 2 needs --temperature above 0"),
        (["--temperature", "0.001"], "--temperature must be 0 (greedy) or between 0.01 and 100, got 0.001"),
        (["--temperature", "nan"], "--temperature must be 0 (greedy) or between 0.01 and 100, got nan"),
        (["--temperature", "-1"], "--temperature must be 0 (greedy) or between 0.01 and 100, got -1.0"),
    ],
)
def test_eval_indomain_refuses_bad_sampling_flags_before_any_work(tmp_path, capsys, flags, message):
    out = tmp_path / "out"
    command = ["eval", "indomain", "--policy", "reader", "--tasks", "synthetic", "--limit", "1", "--out", str(out)]
    assert main([*command, *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not out.exists()
