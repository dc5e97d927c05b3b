"""The reward registry: families computed only when asked for, their service requests batched."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from reward_helpers import TASK, TEXTS

from slca_grpo.rewards import (
    Answers,
    CompletenessChecker,
    CompletenessVerdict,
    FamilyResult,
    Judge,
    JudgeRequest,
    JudgeVerdict,
    Planned,
    RewardConfig,
    RewardFamily,
    RuleJudge,
    UnknownRewardError,
    compute_rewards,
    family_providing,
    list_reward_families,
    list_rewards,
    register_reward,
    register_reward_family,
    unregister_reward_family,
)


class CountingJudge(Judge):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[JudgeRequest]] = []

    def _rate(self, request: JudgeRequest) -> JudgeVerdict:
        return JudgeVerdict.ok(4)

    def _rate_many(self, requests):
        self.batches.append(list(requests))
        return super()._rate_many(requests)


@dataclass(frozen=True)
class Politeness(RewardFamily):
    """Asks the judge the same question HierR asks, plus one of its own, and a completeness check."""

    def plan(self, parsed, task, config):
        answer = parsed.final_answer
        shared = JudgeRequest(task.question, tuple(parsed.tool_responses), answer)
        own = JudgeRequest("Is this polite?", (), answer)
        return Planned(state=len(answer), judge=(shared, own), check=tuple(parsed.calls))

    def finish(self, state, answers, config):
        ratings = [v.rating for v in answers.judge]
        return FamilyResult(
            {"polite": float(sum(ratings)), "complete": float(all(v.complete for v in answers.check))}, state
        )


@pytest.fixture
def registered():
    added = []

    def add(family_or_name, fn=None):
        if fn is None:
            register_reward_family(family_or_name)
            added.append(family_or_name.name)
        else:
            register_reward(family_or_name)(fn)
            added.append(family_or_name)

    yield add
    for name in added:
        unregister_reward_family(name)


def test_builtin_families_and_their_names():
    assert list_reward_families()[:1] == ["hierr"] and {"toolpo", "rltr"} <= set(list_reward_families())
    assert {"score", "tool", "summary", "no_call", "success", "action", "planner"} <= set(list_rewards())
    assert family_providing("no_call").name == "hierr" and family_providing("planner").name == "rltr"
    with pytest.raises(UnknownRewardError, match="unknown reward 'nope'"):
        family_providing("nope")


def test_a_function_reward_is_computed_only_when_asked_for(registered):
    seen = []

    def calls(parsed, task, config):
        seen.append(task.id)
        return len(parsed.calls)

    registered("calls", calls)
    batch = compute_rewards(TEXTS, [TASK] * 3, RuleJudge(), names=("score",))
    assert seen == [] and batch.families == ("hierr",)
    batch = compute_rewards(TEXTS, [TASK] * 3, None, names=("calls",))
    assert seen == ["w"] * 3 and batch.families == ("calls",)
    assert batch.as_dict() == {"calls": [1.0, 2.0, 0.0]}
    assert batch.metrics()["reward/calls"] == pytest.approx(1.0)
    assert batch.records[1].to_dict() == {"calls": {"calls": 2.0}}
    assert batch.tensors()["calls"].tolist() == [1.0, 2.0, 0.0]


def test_judge_and_checker_requests_of_every_family_go_out_once_deduplicated(registered):
    registered(Politeness(name="politeness", provides=("polite", "complete")))

    class Checker(CompletenessChecker):
        def __init__(self):
            super().__init__()
            self.batches = []

        def _check_many(self, requests, n):
            self.batches.append([r.calls for r in requests])
            return [[CompletenessVerdict(len(r.calls) == 1)] * n for r in requests]

    judge, checker = CountingJudge(), Checker()
    batch = compute_rewards(
        TEXTS,
        [TASK] * 3,
        judge,
        RewardConfig(rltr_checks=2),
        names=("summary", "polite", "complete", "planner"),
        checker=checker,
    )
    # HierR asks about rollouts 0 and 1 (different tool responses; the gate silences rollout 2).
    # Politeness asks those two again (shared, not re-sent) and rollout 2's, plus "Is this
    # polite?" once per distinct answer (two): 2 + 1 + 2 requests in one batch.
    assert len(judge.batches) == 1
    asked = judge.batches[0]
    assert len(asked) == len(set(asked)) == 5
    # The checker sees the plans of both families in one batch, each distinct plan once: RLTR's
    # and Politeness's are the same three (one call, two calls, none).
    assert len(checker.batches) == 1 and len(checker.batches[0]) == 3
    assert batch.as_dict()["polite"] == [8.0, 8.0, 8.0]
    assert batch.as_dict()["complete"] == [1.0, 0.0, 0.0]  # the fake checker wants exactly one call
    assert batch.as_dict()["summary"] == [0.75, 0.75, 0.0]
    assert batch.checker_verdicts == 6 and batch.judge_requests == 5


def test_registration_errors(registered):
    with pytest.raises(ValueError, match="already provided by 'hierr'"):
        register_reward("score")(lambda p, t, c: 0.0)
    with pytest.raises(ValueError, match="already registered"):
        register_reward_family(Politeness(name="hierr", provides=("x",)))
    with pytest.raises(ValueError, match="at least one reward name"):
        register_reward_family(Politeness(name="empty", provides=()))
    with pytest.raises(TypeError, match="RewardFamily"):
        register_reward_family(object())
    with pytest.raises(UnknownRewardError):
        unregister_reward_family("never-registered")
    registered("twice", lambda p, t, c: 1.0)
    register_reward("twice", replace=True)(lambda p, t, c: 2.0)
    assert compute_rewards(TEXTS[:1], [TASK], None, names=("twice",)).as_dict() == {"twice": [2.0]}


def test_the_default_answers_are_empty():
    assert Answers() == Answers(judge=(), check=())
