"""compute_rewards (the trainer's entry point), RewardConfig and the ``slca score`` command."""

from __future__ import annotations

import argparse
import io
import json

import pytest
import torch
from tool_schemas import WEATHER_CALL, WEATHER_RESPONSE, function_tool, weather_tool

from slca_grpo.cli import rewards as commands
from slca_grpo.config import ConfigError, apply_overrides, from_dict, to_dict
from slca_grpo.datatypes import Task, ToolCall
from slca_grpo.rewards import (
    CompletenessChecker,
    CompletenessVerdict,
    ExecutionWeights,
    Judge,
    JudgeRequest,
    JudgeVerdict,
    RewardConfig,
    RuleJudge,
    UnknownRewardError,
    compute_rewards,
    hierr,
    list_rewards,
    rltr_reward,
    toolpo_rewards,
)

TOOLS = [weather_tool(), function_tool("get_news", {})]


def task(subset: str = "tool_call", task_id: str = "w") -> Task:
    return Task(
        id=task_id,
        messages=[{"role": "user", "content": "What's the weather in Paris?"}],
        tools=TOOLS,
        gold_calls=[[ToolCall("get_weather", {"city": "Paris"})]] if subset == "tool_call" else [],
        subset=subset,
    )


CALLED = f"{WEATHER_CALL}<tool_response>{WEATHER_RESPONSE}</tool_response>"  # the call and its response
TEXTS = [
    f"{CALLED}It is 22 degrees and sunny in Paris.",  # good, rule judge 5
    "It is sunny in Paris.",  # gate
    f"{CALLED}It is 30 degrees and raining in Paris.",  # invented, judge 1
    "<tool_call>{broken</tool_call>",  # format fails for RLTR, no tool response
]


class CountingJudge(Judge):
    def __init__(self, rating: int = 4) -> None:
        super().__init__()
        self.rating = rating
        self.batches: list[int] = []

    def _rate(self, request: JudgeRequest) -> JudgeVerdict:
        return JudgeVerdict.ok(self.rating)

    def _rate_many(self, requests):
        self.batches.append(len(requests))
        return super()._rate_many(requests)


def test_batch_matches_single_rollout_functions():
    tasks = [task()] * 4
    batch = compute_rewards(TEXTS, tasks, RuleJudge(), names=list_rewards())
    values = batch.as_dict()
    assert list(values) == list_rewards()
    for i, (text, t) in enumerate(zip(TEXTS, tasks)):
        single = hierr(text, t, RuleJudge())
        assert values["score"][i] == pytest.approx(single.score)
        assert values["tool"][i] == pytest.approx(single.r_tool)
        assert values["summary"][i] == pytest.approx(single.r_sum)
        assert values["no_call"][i] is single.no_call
        assert (values["success"][i], values["action"][i]) == toolpo_rewards(text, t)
        assert values["planner"][i] == pytest.approx(rltr_reward(text, t).planner)
    # hand values: rollout 0: R_tool 1 + R_sum (5−1)/4 = 2; rollout 1: gate −0.5;
    # rollout 2: 1 + (1−1)/4 = 1; rollout 3: R_tool 0 (fmt 0, F1 0, key/value 0, parallel 0), R_sum 0
    assert values["score"] == pytest.approx([2.0, -0.5, 1.0, 0.0])
    assert values["no_call"] == [False, True, False, False]
    assert values["planner"] == pytest.approx([1.0, 0.0, 1.0, -1.0])


def test_tensors_and_metrics():
    batch = compute_rewards(TEXTS, [task()] * 4, RuleJudge(), names=("score", "no_call", "planner"))
    tensors = batch.tensors()
    assert set(tensors) == {"score", "no_call", "planner"}
    assert tensors["score"].dtype == torch.float32 and tensors["no_call"].dtype == torch.bool
    assert torch.allclose(tensors["score"], torch.tensor([2.0, -0.5, 1.0, 0.0]))
    m = batch.metrics()
    assert m["reward/score"] == pytest.approx((2.0 - 0.5 + 1.0 + 0.0) / 4)
    assert m["reward/no_call_rate"] == 0.25
    assert m["reward/judge_rating"] == pytest.approx((5 + 1) / 2)
    assert m["reward/summary_reason/judged"] == 0.5
    assert m["reward/summary_reason/omission"] == 0.25
    assert m["reward/summary_reason/no_tool_response"] == 0.25
    assert m["reward/judge_requests"] == 2.0 and m["reward/judge_failures"] == 0.0
    assert m["reward/rltr_format_ok"] == 0.75 and m["reward/checker_verdicts"] == 6.0
    # 3 format-valid plans, 2 distinct (rollouts 0 and 2 make the same call) × N = 3
    assert "reward/success" not in m  # ToolPO not asked for
    assert all(isinstance(v, float) for v in m.values())


def test_only_what_is_asked_is_computed():
    judge = CountingJudge()
    batch = compute_rewards(TEXTS, [task()] * 4, judge, names=("success", "action"))
    assert judge.calls == 0 and all(r.detail("hierr") is None and r.detail("rltr") is None for r in batch.records)
    assert compute_rewards(TEXTS, [task()] * 4, None, names=("planner",)).as_dict()["planner"][3] == -1.0
    with pytest.raises(KeyError):
        batch.records[0].value("score")


def test_judge_requests_go_through_one_deduplicated_rate_many():
    judge = CountingJudge(rating=4)
    texts = [TEXTS[0], TEXTS[0], TEXTS[2], TEXTS[1]]
    config = RewardConfig(toolpo_success="judge")
    batch = compute_rewards(texts, [task()] * 4, judge, config, names=list_rewards())
    # HierR: two distinct answers to judge (the duplicate is rated once; the gate asks nothing);
    # ToolPO judge mode reuses those two and adds the gate rollout's answer → one batch of 3
    assert judge.batches == [3] and judge.calls == 3
    assert batch.as_dict()["summary"] == [0.75, 0.75, 0.75, 0.0]
    # success by judge: rating 4 ≥ 4 everywhere
    assert batch.as_dict()["success"] == [1.0, 1.0, 1.0, 1.0]


def test_judge_failures_are_counted_in_the_batch():
    class Down(Judge):
        def _rate(self, request):
            raise ConnectionError("down")

    judge = Down()
    batch = compute_rewards(TEXTS, [task()] * 4, judge)
    assert batch.judge_failures == 2 and judge.failures == 2
    assert batch.as_dict()["summary"] == [0.0, 0.0, 0.0, 0.0]
    assert batch.metrics()["reward/judge_failure_rate"] == 1.0
    assert [r.detail("hierr").judge_failed for r in batch.records] == [True, False, True, False]


def test_checker_gets_one_batch_of_format_valid_plans():
    class Recording(CompletenessChecker):
        def __init__(self):
            super().__init__()
            self.batches = []

        def _check_many(self, requests, n):
            self.batches.append((len(requests), n))
            return [[CompletenessVerdict(True)] * n for _ in requests]

    checker = Recording()
    compute_rewards(TEXTS, [task()] * 4, None, RewardConfig(rltr_checks=2), names=("planner",), checker=checker)
    assert checker.batches == [(2, 2)]  # the broken rollout is not checked, the repeated plan once


def test_batch_input_errors():
    with pytest.raises(UnknownRewardError, match="unknown reward 'advantage'"):
        compute_rewards(TEXTS, [task()] * 4, RuleJudge(), names=("score", "advantage"))
    with pytest.raises(ValueError, match="4 texts for 3 tasks"):
        compute_rewards(TEXTS, [task()] * 3, RuleJudge())
    with pytest.raises(ValueError, match="need a judge"):
        compute_rewards(TEXTS, [task()] * 4, None)
    empty = compute_rewards([], [], None)
    assert len(empty) == 0 and empty.as_dict() == {n: [] for n in ("score", "tool", "summary", "no_call")}
    assert empty.tensors()["score"].shape == (0,)


def test_irrelevant_fix_in_batch():
    texts = [
        "Sorry, no available tool can look that up.",
        f"{CALLED}It is sunny in Paris.",
    ]
    off = compute_rewards(texts, [task("irrelevant")] * 2, CountingJudge(5)).as_dict()["summary"]
    on = compute_rewards(
        texts, [task("irrelevant")] * 2, CountingJudge(5), RewardConfig(irrelevant_fix=True)
    ).as_dict()["summary"]
    assert off == [0.0, 1.0] and on == [1.0, 0.0]


# --- RewardConfig -----------------------------------------------------------------------------


def test_reward_config_defaults_and_validation():
    config = RewardConfig()
    w = config.weights
    assert (w.fmt, w.name, w.key, w.value, w.parallel) == (0.10, 0.25, 0.15, 0.20, 0.30)
    assert w.total == pytest.approx(1.0)
    assert (config.omission_penalty, config.min_answer_chars, config.irrelevant_fix) == (-0.5, 10, False)
    assert (config.rltr_checks, config.rltr_repeat_penalty, config.rltr_error_penalty, config.rltr_format_penalty) == (
        3,
        -0.1,
        -0.2,
        -1.0,
    )
    assert config.toolpo_success == "gold"
    assert from_dict(RewardConfig, {"weights": {"fmt": 0.5}}).weights == ExecutionWeights(fmt=0.5)
    for bad in ({"weights": {"fmt": -1}}, {"weights": {"format": 1}}):
        with pytest.raises(ConfigError):
            from_dict(RewardConfig, bad)
    for bad in (
        dict(weights={"fmt": 0.5}),  # a plain mapping only through the loader
        dict(toolpo_success="oracle"),
        dict(rltr_checks=0),
        dict(min_answer_chars=-1),
        dict(omission_penalty=float("nan")),
        dict(toolpo_judge_threshold=6),
    ):
        with pytest.raises(ConfigError):
            RewardConfig(**bad)
    assert from_dict(RewardConfig, to_dict(config)) == config
    with pytest.raises(ConfigError, match="unknown setting"):
        from_dict(RewardConfig, {"gamma": 1})


def test_reward_config_with_project_config_loader():
    config = from_dict(RewardConfig, {"weights": {"parallel": 0.5}, "irrelevant_fix": True})
    assert config.weights.parallel == 0.5 and config.irrelevant_fix
    config = apply_overrides(config, ["weights.fmt=0.2", "toolpo_success=judge"])
    assert config.weights.fmt == 0.2 and config.toolpo_success == "judge"
    with pytest.raises(ConfigError):
        apply_overrides(config, ["toolpo_success=oracle"])


# --- slca score ------------------------------------------------------------------------------


def run_cli(argv, monkeypatch=None, stdin=None):
    parser = argparse.ArgumentParser(prog="slca")
    commands.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    return args.func(args)


def test_score_command(tmp_path, capsys, monkeypatch):
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("\n".join(json.dumps(task(task_id=i).to_dict()) for i in ("a", "b")) + "\n")
    text_file = tmp_path / "response.txt"
    text_file.write_text(TEXTS[0])
    assert run_cli(["score", "--task", str(tasks_file), "--id", "b", "--text", str(text_file)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["task_id"] == "b"
    assert out["hierr"]["score"] == pytest.approx(2.0) and out["hierr"]["rating"] == 5
    assert out["toolpo"] == {"success": 1.0, "action": 1.0} and out["rltr"]["planner"] == 1.0
    assert out["judge"] == {"kind": "rule", "calls": 1, "failures": 0}

    single = tmp_path / "task.json"
    single.write_text(json.dumps(task().to_dict()))
    assert run_cli(["score", "--task", str(single), "--text", "-"], monkeypatch, stdin=TEXTS[1]) == 0
    assert json.loads(capsys.readouterr().out)["hierr"]["no_call"] is True


def test_score_command_errors(tmp_path, capsys):
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("\n".join(json.dumps(task(task_id=i).to_dict()) for i in ("a", "b")) + "\n")
    text_file = tmp_path / "r.txt"
    text_file.write_text("x")
    assert run_cli(["score", "--task", str(tasks_file), "--text", str(text_file)]) == 2
    assert "choose one with --id" in capsys.readouterr().err
    assert run_cli(["score", "--task", str(tasks_file), "--id", "zz", "--text", str(text_file)]) == 2
    assert "no task with id 'zz'" in capsys.readouterr().err
    assert run_cli(["score", "--task", str(tmp_path / "missing.json"), "--text", str(text_file)]) == 2
    assert run_cli(["score", "--task", str(tasks_file), "--id", "a", "--text", str(text_file), "--judge", "gpt"]) == 2
    assert "bad endpoint spec 'gpt'" in capsys.readouterr().err
