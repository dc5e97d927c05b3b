"""HierR (docs/method.md §4): the gate, the summary rules, judge failures and the irrelevant-task fix."""

from __future__ import annotations

import json

import pytest
from tool_schemas import WEATHER_CALL, WEATHER_RESPONSE, weather_tool

from slca_grpo.datatypes import Task, ToolCall
from slca_grpo.rewards import Judge, JudgeRequest, JudgeVerdict, RewardConfig, RuleJudge, hierr
from slca_grpo.rewards.hierarchical import (
    REASON_IRRELEVANT_CALL,
    REASON_JUDGE_FAILED,
    REASON_JUDGED,
    REASON_NO_TOOL_RESPONSE,
    REASON_OMISSION,
    REASON_SHORT_ANSWER,
    finish_hierr,
    plan_hierr,
)

TOOLS = [weather_tool(description="Weather of a city")]


def task(subset: str = "tool_call") -> Task:
    gold = [[ToolCall("get_weather", {"city": "Paris"})]] if subset == "tool_call" else []
    return Task(
        id="w",
        messages=[{"role": "user", "content": "What's the weather in Paris?"}],
        tools=TOOLS,
        gold_calls=gold,
        subset=subset,
    )


def rollout(answer: str, call: str = WEATHER_CALL, response: str | None = WEATHER_RESPONSE) -> str:
    """A decoded multi-turn response: call, injected tool turn, final answer."""
    tool_turn = (
        f"<|im_end|>\n<|im_start|>user\n<tool_response>\n{response}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
        if response is not None
        else ""
    )
    return f"{call}{tool_turn}{answer}"


class ScriptedJudge(Judge):
    """Returns scripted verdicts (ints are ratings, strings are failures, exceptions are raised)."""

    name = "scripted"

    def __init__(self, *script: object) -> None:
        super().__init__()
        self.script = list(script)
        self.requests: list[JudgeRequest] = []

    def _rate(self, request: JudgeRequest) -> JudgeVerdict:
        self.requests.append(request)
        item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, str):
            return JudgeVerdict.failure(item)
        return JudgeVerdict(rating=item)  # type: ignore[arg-type]


def test_gate_fires_without_any_tool_call_tag():
    judge = ScriptedJudge(5)
    r = hierr("The weather in Paris is lovely today, 22 degrees.", task(), judge)
    assert (r.score, r.r_tool, r.r_sum, r.no_call, r.reason) == (-0.5, 0.0, 0.0, True, REASON_OMISSION)
    assert r.rating is None and judge.calls == 0  # stop: the judge is not asked
    assert r.execution.name_f1 == 0.0  # still computed, for metrics


def test_gate_ignores_calls_inside_think_and_uses_configured_penalty():
    text = f"<think>{WEATHER_CALL}</think>It is sunny."
    r = hierr(text, task(), None, RewardConfig(omission_penalty=-1.0))
    assert r.no_call and r.score == -1.0


def test_a_broken_tag_passes_the_gate():
    r = hierr("<tool_call>{oops", task(), None)
    # fmt 0/max(1,0), F1 0, key/value 0, parallel 0 → R_tool 0; no tool response → R_sum 0
    assert (r.no_call, r.r_tool, r.r_sum, r.score, r.reason) == (False, 0.0, 0.0, 0.0, REASON_NO_TOOL_RESPONSE)


def test_judged_summary_uses_rating_minus_one_over_four():
    judge = ScriptedJudge(4)
    answer = "It is 22 degrees and sunny in Paris."
    r = hierr(rollout(answer), task(), judge)
    # R_tool: fmt 1, F1 1, key 1, value 1, parallel 1 → 1.0; R_sum = (4 − 1)/4 = 0.75
    assert r.r_tool == pytest.approx(1.0) and r.r_sum == 0.75 and r.score == pytest.approx(1.75)
    assert (r.rating, r.judge_failed, r.reason, r.no_call) == (4, False, REASON_JUDGED, False)
    (request,) = judge.requests
    assert request == JudgeRequest("What's the weather in Paris?", (WEATHER_RESPONSE,), answer)


@pytest.mark.parametrize(("rating", "r_sum"), [(1, 0.0), (2, 0.25), (3, 0.5), (5, 1.0)])
def test_every_rating_maps_linearly(rating, r_sum):
    assert hierr(rollout("A long enough answer."), task(), ScriptedJudge(rating)).r_sum == r_sum


def test_no_tool_response_gives_zero_summary_without_judging():
    judge = ScriptedJudge(5)
    r = hierr(rollout("It is sunny in Paris today.", response=None), task(), judge)
    assert (r.r_sum, r.reason, judge.calls) == (0.0, REASON_NO_TOOL_RESPONSE, 0)
    assert r.score == r.r_tool


def test_short_answer_gives_zero_summary_without_judging():
    judge = ScriptedJudge(5)
    r = hierr(rollout("22C sunny"), task(), judge)  # 9 characters < 10
    assert (r.r_sum, r.reason, judge.calls) == (0.0, REASON_SHORT_ANSWER, 0)
    r10 = hierr(rollout("22C, sunny"), task(), judge)  # exactly 10 → judged
    assert r10.reason == REASON_JUDGED and judge.calls == 1
    longer = hierr(rollout("It is 22 degrees."), task(), judge, RewardConfig(min_answer_chars=40))
    assert longer.reason == REASON_SHORT_ANSWER


@pytest.mark.parametrize("failure", ["endpoint down", RuntimeError("judge crashed"), 9])
def test_judge_failure_is_counted_and_gives_zero_summary(failure):
    judge = ScriptedJudge(failure)
    r = hierr(rollout("It is 22 degrees and sunny."), task(), judge)
    assert (r.r_sum, r.judge_failed, r.reason, r.rating) == (0.0, True, REASON_JUDGE_FAILED, None)
    assert r.score == pytest.approx(r.r_tool)
    assert (judge.calls, judge.failures) == (1, 1)


def test_missing_judge_is_a_clear_error_only_when_needed():
    with pytest.raises(ValueError, match="needs a judge"):
        hierr(rollout("It is 22 degrees and sunny."), task(), None)


def test_plan_and_finish_equal_hierr():
    text = rollout("It is 22 degrees and sunny.")
    plan = plan_hierr(text, task())
    assert plan.request is not None and not plan.no_call
    assert finish_hierr(plan, JudgeVerdict.ok(3)) == hierr(text, task(), ScriptedJudge(3))
    assert finish_hierr(plan, None).judge_failed


def test_rule_judge_end_to_end_prefers_grounded_summary():
    judge = RuleJudge()
    grounded = hierr(rollout("It is 22 degrees and sunny in Paris right now."), task(), judge)
    invented = hierr(rollout("It is 31 degrees and raining in Paris right now."), task(), judge)
    assert grounded.r_tool == invented.r_tool  # same calls
    assert grounded.r_sum > invented.r_sum
    assert grounded.rating == 5 and invented.rating == 1


# --- irrelevant tasks: the paper's quirk and the fix ------------------------------------------

ABSTAIN = "Sorry, none of the available tools can tell the weather on Mars."
WRONG_CALL = rollout("The weather service says it is sunny in Paris.")


def test_irrelevant_quirk_with_fix_off_favours_the_wrong_call_on_the_summary():
    judge = ScriptedJudge(5)
    abstain = hierr(ABSTAIN, task("irrelevant"), judge)
    wrong = hierr(WRONG_CALL, task("irrelevant"), judge)
    # abstention: R_tool 0.9 (F1, key, value, parallel all 1; fmt 0); no tool response → R_sum 0
    assert (abstain.r_tool, abstain.r_sum, abstain.reason) == (pytest.approx(0.9), 0.0, REASON_NO_TOOL_RESPONSE)
    assert not abstain.no_call  # the gate only applies to tasks that expect a call
    # wrong call: R_tool 0.45 (fmt 1, F1 0, key/value 1, parallel 0), judged 5 → R_sum 1
    assert (wrong.r_tool, wrong.r_sum) == (pytest.approx(0.45), 1.0)
    assert wrong.r_sum > abstain.r_sum and wrong.score > abstain.score  # the quirk
    assert judge.calls == 1


def test_irrelevant_fix_rewards_abstention_and_zeroes_wrong_calls():
    judge = ScriptedJudge(5)
    config = RewardConfig(irrelevant_fix=True)
    abstain = hierr(ABSTAIN, task("irrelevant"), judge, config)
    wrong = hierr(WRONG_CALL, task("irrelevant"), judge, config)
    assert (abstain.r_sum, abstain.reason, abstain.score) == (1.0, REASON_JUDGED, pytest.approx(1.9))
    assert judge.requests[0] == JudgeRequest("What's the weather in Paris?", (), ABSTAIN)  # no tool responses
    assert (wrong.r_sum, wrong.reason, wrong.score) == (0.0, REASON_IRRELEVANT_CALL, pytest.approx(0.45))
    assert judge.calls == 1
    short = hierr("No tool.", task("irrelevant"), judge, config)
    assert short.reason == REASON_SHORT_ANSWER and judge.calls == 1
    # tool_call tasks are unaffected by the flag
    normal = hierr(rollout("It is 22 degrees and sunny."), task(), ScriptedJudge(3), config)
    assert normal.r_sum == 0.5


def test_irrelevant_fix_with_rule_judge_rates_honest_abstention_above_invention():
    config = RewardConfig(irrelevant_fix=True)
    judge = RuleJudge()
    honest = hierr(ABSTAIN, task("irrelevant"), judge, config)
    invented = hierr("It is -60 degrees on Mars right now.", task("irrelevant"), judge, config)
    assert honest.r_sum > invented.r_sum > 0.0


def test_to_dict_is_json_serialisable():
    r = hierr(rollout("It is 22 degrees and sunny."), task(), ScriptedJudge(4))
    data = json.loads(json.dumps(r.to_dict()))
    assert data["execution"]["total"] == pytest.approx(1.0) and data["rating"] == 4
