"""ToolPO (R_succ, R_action) and RLTR planner rewards (docs/method.md §5), hand-computed."""

from __future__ import annotations

import json

import pytest
from tool_schemas import function_tool

from slca_grpo.chat import parse_tool_calls
from slca_grpo.datatypes import Task, ToolCall
from slca_grpo.rewards import (
    CompletenessChecker,
    CompletenessVerdict,
    Judge,
    JudgeRequest,
    JudgeVerdict,
    RewardConfig,
    RuleCompletenessChecker,
    rltr_reward,
    rule_complete,
    toolpo_rewards,
)
from slca_grpo.rewards.rltr import format_valid, is_error_observation

GOLD = [[ToolCall("get_weather", {"city": "Paris", "unit": "celsius"}), ToolCall("get_time", {"city": "Paris"})]]


def task(gold=GOLD, subset="tool_call") -> Task:
    return Task(
        id="t",
        messages=[{"role": "user", "content": "Weather and time in Paris?"}],
        tools=[function_tool(name, {}) for name in ("get_weather", "get_time", "get_news")],
        gold_calls=gold,
        subset=subset,
    )


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def response(*payloads: str) -> str:
    return "".join(f"<tool_response>\n{p}\n</tool_response>" for p in payloads)


ANSWER = "It is 22 degrees in Paris and the time is 14:05."
GOOD = (
    call("get_weather", city="Paris", unit="celsius") + call("get_time", city="Paris") + response("{}", "{}") + ANSWER
)


class FixedJudge(Judge):
    def __init__(self, rating: int | None) -> None:
        super().__init__()
        self.rating = rating

    def _rate(self, request: JudgeRequest) -> JudgeVerdict:
        return JudgeVerdict.failure("down") if self.rating is None else JudgeVerdict.ok(self.rating)


# --- ToolPO -----------------------------------------------------------------------------------


def test_toolpo_perfect_response():
    assert toolpo_rewards(GOOD, task()) == (1.0, 1.0)


def test_toolpo_action_strict_one_to_one():
    text = call("get_time", city="paris", tz="CET") + call("get_weather", city="Paris", unit="fahrenheit") + ANSWER
    success, action = toolpo_rewards(text, task())
    # time matches (extra key allowed, loose value); weather does not (unit) → 1/2; success 0
    assert (success, action) == (0.0, 0.5)


def test_toolpo_action_uses_maximum_matching():
    gold = [[ToolCall("get_weather", {"city": "Paris"}), ToolCall("get_weather", {"city": "Paris", "unit": "c"})]]
    text = call("get_weather", city="Paris", unit="c") + call("get_weather", city="Paris", unit="f") + ANSWER
    # greedy in gold order would pair gold[0] with the first call and leave gold[1] unmatched (1/2);
    # the maximum matching pairs gold[0]↔call 2, gold[1]↔call 1 → 2/2
    assert toolpo_rewards(text, task(gold)).action == 1.0


def test_toolpo_action_without_gold_calls_is_one():
    assert toolpo_rewards(call("get_news") + ANSWER, task([], "irrelevant")).action == 1.0


@pytest.mark.parametrize(
    ("text", "success"),
    [
        (GOOD, 1.0),
        (GOOD.replace(ANSWER, ""), 0.0),  # no final answer
        (call("get_weather", city="Paris", unit="celsius") + ANSWER, 0.0),  # a gold call missing
        (GOOD.replace(ANSWER, call("get_news") + ANSWER), 0.0),  # a call outside the gold names
        (GOOD.replace(ANSWER, call("get_stock") + ANSWER), 0.0),  # unknown tool (invalid block) counts too
        (GOOD.replace(ANSWER, call("get_time", city="Paris") + ANSWER), 1.0),  # a repeat of a gold tool is fine
        (GOOD.replace(ANSWER, "<tool_call>{bad</tool_call>" + ANSWER), 1.0),  # malformed block alone: fine
    ],
)
def test_toolpo_gold_success_rule(text, success):
    assert toolpo_rewards(text, task()).success == success


def test_toolpo_gold_success_on_irrelevant_tasks():
    irrelevant = task([], "irrelevant")
    assert toolpo_rewards("Sorry, no available tool can do that.", irrelevant).success == 1.0
    assert toolpo_rewards("<tool_call>{bad</tool_call>Sorry, I cannot.", irrelevant).success == 0.0


def test_toolpo_judge_mode():
    config = RewardConfig(toolpo_success="judge")
    wrong_calls = call("get_news") + response("{}") + ANSWER
    assert toolpo_rewards(wrong_calls, task(), config, FixedJudge(4)) == (1.0, 0.0)  # rating ≥ 4
    assert toolpo_rewards(GOOD, task(), config, FixedJudge(3)).success == 0.0
    failing = FixedJudge(None)
    assert toolpo_rewards(GOOD, task(), config, failing).success == 0.0 and failing.failures == 1
    silent = FixedJudge(5)
    assert toolpo_rewards(GOOD.replace(ANSWER, "ok"), task(), config, silent).success == 0.0
    assert silent.calls == 0  # too short to ask
    assert (
        toolpo_rewards(
            GOOD, task(), RewardConfig(toolpo_success="judge", toolpo_judge_threshold=5), FixedJudge(4)
        ).success
        == 0.0
    )
    with pytest.raises(ValueError, match="needs a judge"):
        toolpo_rewards(GOOD, task(), config)


# --- RLTR -------------------------------------------------------------------------------------


class ScriptedChecker(CompletenessChecker):
    def __init__(self, *verdicts: bool) -> None:
        super().__init__()
        self.verdicts = verdicts
        self.seen: list[tuple[ToolCall, ...]] = []

    def _check_many(self, requests, n):
        self.seen.extend(r.calls for r in requests)
        return [[CompletenessVerdict(self.verdicts[i % len(self.verdicts)]) for i in range(n)] for _ in requests]


def test_rltr_complete_plan_scores_one():
    r = rltr_reward(GOOD, task())
    assert (r.planner, r.format_ok, r.completeness, r.repeat_penalty, r.error_penalty) == (1.0, True, 1.0, 0.0, 0.0)


def test_rltr_repeats_and_errors():
    text = (
        call("get_weather", city="Paris", unit="celsius")
        + call("get_weather", unit="celsius", city="Paris")  # identical to the one before → repeat
        + call("get_time", city="Paris")
        + call("get_stock", symbol="X")  # unknown tool → error
        + response("{}", "{}", '{"error": "timeout"}', '{"error": null}')  # one error observation
        + ANSWER
    )
    r = rltr_reward(text, task())
    # R_comp 1 (rule checker: both gold calls covered); R_repeat −0.1·1; R_error −0.2·(1 block + 1 response)
    assert r.completeness == 1.0
    assert r.repeat_penalty == pytest.approx(-0.1)
    assert r.error_penalty == pytest.approx(-0.4)
    assert r.planner == pytest.approx(0.5)


def test_rltr_non_consecutive_repeat_is_not_penalised():
    text = (
        call("get_time", city="Paris")
        + call("get_weather", city="Paris", unit="celsius")
        + call("get_time", city="Paris")
    )
    assert rltr_reward(text, task()).repeat_penalty == 0.0


@pytest.mark.parametrize(
    "text",
    [
        call("get_time", city="Paris") + '<tool_call>{"name": "get_weather"',  # unclosed
        "<tool_call>{not json}</tool_call>",  # a block that is not JSON
        "</tool_call><tool_call>",  # counts equal but no closed block
        "<tool_call><tool_call>{}</tool_call></tool_call>",  # nested
    ],
)
def test_rltr_invalid_format_is_minus_one_and_skips_the_checker(text):
    checker = ScriptedChecker(True)
    r = rltr_reward(text, task(), checker=checker)
    assert (r.planner, r.format_ok, r.completeness) == (-1.0, False, 0.0)
    assert checker.calls == 0
    assert rltr_reward(text, task(), RewardConfig(rltr_format_penalty=-2.0)).planner == -2.0


def test_rltr_structure_errors_are_errors_not_format_failures():
    text = (
        call("get_weather", city="Paris", unit="celsius")
        + call("get_time", city="Paris")
        + '<tool_call>{"name": 3}</tool_call>'
    )
    r = rltr_reward(text, task())
    assert r.format_ok and r.error_penalty == pytest.approx(-0.2) and r.planner == pytest.approx(0.8)


def test_rltr_completeness_is_the_mean_of_n_verdicts():
    checker = ScriptedChecker(True, False, True)
    r = rltr_reward(GOOD, task(), checker=checker)
    assert r.completeness == pytest.approx(2 / 3) and r.planner == pytest.approx(2 / 3)
    assert checker.calls == 3
    assert checker.seen == [
        (ToolCall("get_weather", {"city": "Paris", "unit": "celsius"}), ToolCall("get_time", {"city": "Paris"}))
    ]
    five = ScriptedChecker(True, False, True, True, True)
    assert rltr_reward(GOOD, task(), RewardConfig(rltr_checks=5), five).completeness == pytest.approx(0.8)


def test_rltr_incomplete_plan():
    r = rltr_reward(call("get_weather", city="Paris", unit="celsius") + ANSWER, task())
    assert (r.completeness, r.planner) == (0.0, 0.0)


def test_rule_completeness():
    assert rule_complete(task([], "irrelevant"), [])
    assert not rule_complete(task([], "irrelevant"), [ToolCall("get_news")])
    calls = [
        ToolCall("get_time", {"city": "PARIS"}),
        ToolCall("get_weather", {"city": "Paris", "unit": "celsius", "x": 1}),
    ]
    assert rule_complete(task(), calls)
    assert not rule_complete(task(), calls[:1])
    verdicts = RuleCompletenessChecker().check(task(), calls, n=3)
    assert [v.score for v in verdicts] == [1.0, 1.0, 1.0]


def test_checker_that_raises_gives_counted_failures():
    class Broken(CompletenessChecker):
        def _check_many(self, requests, n):
            raise ConnectionError("down")

    broken = Broken()
    r = rltr_reward(GOOD, task(), checker=broken)
    assert r.completeness == 0.0 and (broken.calls, broken.failures) == (3, 3)


def test_format_helpers():
    assert format_valid(parse_tool_calls("no calls at all"))
    assert is_error_observation('{"error": "not found"}')
    assert not is_error_observation('{"error": ""}')
    assert not is_error_observation("error: plain text")
    assert not is_error_observation('["error"]')
