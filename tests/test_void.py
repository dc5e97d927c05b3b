"""Void rollouts: when the simulator or the judge fails (not the policy), the rollout is left out of
its group's statistics and of the loss, counted, and a step of mostly void groups is skipped."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scripted import scripted_loop, two_step_setup

from slca_grpo.algos import compute_advantages
from slca_grpo.algos.segments import SEG_SUMMARY, SEG_TOOL
from slca_grpo.datatypes import Observation, ObservationError, Turn
from slca_grpo.rewards import RuleJudge, compute_rewards
from slca_grpo.rewards.config import RewardConfig
from slca_grpo.rewards.judge_base import Judge, JudgeVerdict
from slca_grpo.rollout.environment import ToolEnvironment
from slca_grpo.simulator import SimulatorConfig, build_simulator
from slca_grpo.simulator.errors import BACKEND_ERROR, OVER_BUDGET, simulator_fault
from slca_grpo.simulator.schema_backend import SchemaBackend
from slca_grpo.trainer.rl import RLConfig, RLTrainer, void_reasons, void_step_metrics


class FaultyBackend(SchemaBackend):
    """The schema backend, except that the calls numbered in ``failing`` (0-based, in the order the
    simulator asks) raise, as a crashed or unreachable backend would."""

    def __init__(self, failing, error=None):
        super().__init__(0)
        self.failing, self.calls = failing, 0
        self.error = error or ConnectionError("simulator backend unreachable")

    def generate(self, request):
        index, self.calls = self.calls, self.calls + 1
        if self.failing is all or index in self.failing:
            raise self.error
        return super().generate(request)


class FailingJudge(Judge):
    def _rate(self, request):
        return JudgeVerdict.failure("judge endpoint returned 503")


def rows(*segments):
    return torch.tensor([list(s) for s in segments])


def test_grpo_normalises_over_the_valid_rollouts_only_and_void_ones_get_zero():
    segment_ids = rows([SEG_TOOL, SEG_SUMMARY]).repeat(4, 1)
    rewards = {"score": torch.tensor([1.0, 2.0, 3.0, 100.0])}
    valid = [True, True, True, False]
    advantages = compute_advantages("grpo", group_ids=[0] * 4, segment_ids=segment_ids, rewards=rewards, valid=valid)
    # mean 2, unbiased std 1 over the three valid rollouts; the void one's 100 enters nothing.
    eps = 1e-6
    expected = torch.tensor([-1.0, 0.0, 1.0]) / (1.0 + eps)
    assert torch.allclose(advantages[:3, 0], expected, atol=1e-6) and (advantages[3] == 0).all()
    assert torch.equal(advantages[:, 0], advantages[:, 1])  # GRPO broadcasts one scalar per rollout


@settings(max_examples=40, deadline=None)
@given(
    scores=st.lists(st.floats(-5, 5, allow_nan=False, width=32), min_size=6, max_size=6),
    tools=st.lists(st.floats(-1, 1, allow_nan=False, width=32), min_size=6, max_size=6),
    valid=st.lists(st.booleans(), min_size=6, max_size=6),
    estimator=st.sampled_from(["grpo", "slca", "slca-no-summary"]),
)
def test_void_rollouts_change_nothing_for_the_others(scores, tools, valid, estimator):
    """Advantages with void rollouts equal those of the batch without them; void rows are 0."""
    segment_ids = rows([SEG_TOOL, SEG_TOOL, SEG_SUMMARY]).repeat(6, 1)
    group_ids = [0, 0, 0, 1, 1, 1]
    rewards = {
        "score": torch.tensor(scores),
        "tool": torch.tensor(tools),
        "summary": torch.tensor(scores) - torch.tensor(tools),
        "no_call": torch.zeros(6, dtype=torch.bool),
    }
    got = compute_advantages(estimator, group_ids=group_ids, segment_ids=segment_ids, rewards=rewards, valid=valid)
    keep = [i for i, v in enumerate(valid) if v]
    assert (got[[i for i, v in enumerate(valid) if not v]] == 0).all()
    if keep:
        alone = compute_advantages(
            estimator,
            group_ids=[group_ids[i] for i in keep],
            segment_ids=segment_ids[keep],
            rewards={k: v[keep] for k, v in rewards.items()},
        )
        assert torch.equal(got[keep], alone)


def test_simulator_faults_are_void_and_policy_faults_are_not():
    def turn(kind):
        return Turn("", observations=[Observation("{}", ObservationError(kind, "x") if kind else None)])

    assert simulator_fault([turn(None), turn(BACKEND_ERROR)]) == BACKEND_ERROR
    assert simulator_fault([turn(OVER_BUDGET)]) == OVER_BUDGET
    for policy_fault in ("unknown_tool", "invalid_arguments", "missing_required", "timeout", "not_found"):
        assert simulator_fault([turn(policy_fault)]) is None  # the policy's (or an injected lesson)

    class Rollout:
        def __init__(self, kind):
            self.turns = [turn(kind)]

    reasons = void_reasons(
        [Rollout(None), Rollout(BACKEND_ERROR), Rollout(None), Rollout(None)], [False, False, True, False]
    )
    assert reasons == [None, "simulator:backend_error", "judge", None]
    assert void_step_metrics(reasons, group_size=2) == {
        "rollout/void": 2.0,
        "rollout/void_rate": 0.5,
        "rollout/void_groups": 2.0,
    }


def test_a_failed_judge_voids_the_rollouts_whose_rewards_it_gave():
    task, tokenizer, formatter, environment, scripts = two_step_setup()
    answer = scripted_loop(tokenizer, formatter, environment, scripts["both right"]).run([task])[0].response_text
    ok = compute_rewards([answer], [task], RuleJudge(), names=("score", "tool", "summary"))
    failed = compute_rewards([answer], [task], FailingJudge(), names=("score", "tool", "summary"))
    assert ok.failed == [()] and ok.failed_for(["summary"]) == [False]
    assert failed.failed == [("hierr",)] and failed.judge_failures == 1
    assert failed.failed_for(["score"]) == [True] and failed.failed_for(["summary"]) == [True]
    # The summary reward a failed judge leaves is a made-up 0, which is why the rollout is void.
    assert failed.as_dict()["summary"] == [0.0]


def trainer_with(backend, judge=None, group_size=4):
    task, tokenizer, formatter, _, scripts = two_step_setup()
    environment = ToolEnvironment(
        build_simulator(SimulatorConfig(backend="schema"), backend=backend), use_fixtures=False
    )
    loop = scripted_loop(tokenizer, formatter, environment, scripts["step 2 wrong"], group_size=group_size)
    config = RLConfig(estimator="grpo", steps=1, prompts_per_step=1, mini_batch_prompts=1, kl_coef=0.0)
    return task, RLTrainer(loop.model, None, loop, judge or RuleJudge(), RewardConfig(), config)


# A plugin backend that calls sys.exit is a failed call like any other: once, it ended the whole
# run after SFT with exit status 0 and no word.
@pytest.mark.parametrize("error", [ConnectionError("unreachable"), SystemExit(0)])
def test_a_rollout_the_simulator_failed_is_counted_and_left_out_of_the_loss(error):
    # Calls go turn by turn over the 4 rollouts: call 1 is rollout 1's first call.
    task, trainer = trainer_with(FaultyBackend({1}, error))
    metrics, trajectories = trainer.step([task], 0)
    assert [simulator_fault(t.turns) for t in trajectories] == [None, BACKEND_ERROR, None, None]
    assert metrics["rollout/void"] == 1.0 and metrics["rollout/void_rate"] == 0.25
    assert metrics["rollout/void_groups"] == 0.0 and "train/skipped" not in metrics
    learnable = [sum(t.response_mask) for t in trajectories]
    assert metrics["train/learnable_tokens"] == sum(learnable) - learnable[1]


def test_a_step_of_mostly_void_groups_is_skipped_with_a_warning(capsys):
    task, trainer = trainer_with(FaultyBackend(all))
    before = [p.detach().clone() for p in trainer.model.parameters()]
    metrics, _ = trainer.step([task], 0)
    assert metrics["rollout/void"] == 4.0 and metrics["train/skipped"] == 1.0 and "train/grad_norm" not in metrics
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))
    warning = capsys.readouterr().err.strip()
    assert warning.startswith("warning: RL step 0: 4 of 4 rollouts void (simulator:backend_error 4)")
    assert warning.endswith("the step is skipped (no update)")


@pytest.mark.parametrize("estimator", ["grpo", "slca"])
def test_a_failing_judge_voids_the_step_for_estimators_that_read_its_reward(estimator, capsys):
    task, trainer = trainer_with(SchemaBackend(0), judge=FailingJudge())
    trainer.config.estimator = estimator
    metrics, _ = trainer.step([task], 0)
    assert metrics["reward/judge_failures"] >= 1 and metrics["rollout/void"] == 4.0
    assert metrics["train/skipped"] == 1.0 and "(judge 4)" in capsys.readouterr().err
