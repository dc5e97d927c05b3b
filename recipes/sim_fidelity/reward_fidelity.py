"""Reward fidelity: HierR of the same rollout when the tools are real and when SGLS plays them.

The rollout is the offline τ² oracle's (``eval/tau2/oracle.py``) with the scripted user's opening
request as the question: the agent sends the sequence's assistant-side calls one per turn (user-side
calls are the scripted user's, outside the agent's text), then closes with the oracle's message.
It reacts to one thing, as a policy would: at the first call that fails it stops and apologises.
So the two rollouts differ in their tool responses, and in their calls when one side fails where
the other does not; HierR scores each against the task's gold calls with the same judge.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from recipes.sim_fidelity.replay import StepOutcome
from recipes.sim_fidelity.sequences import ASSISTANT, CallSequence
from slca_grpo.chat.template import IM_END, generation_prompt, render_tool_calls, tool_results_turn
from slca_grpo.data.tau2.gold import gold_actions
from slca_grpo.datatypes import Task, ToolCall
from slca_grpo.eval.tau2.oracle import oracle_plan
from slca_grpo.eval.tau2.users import scripted_turns
from slca_grpo.rewards.hierarchical import HierReward, hierr
from slca_grpo.rewards.judge_base import Judge

APOLOGY = (
    "I am sorry, I could not complete your request because the system returned an error. "
    "Is there anything else I can help you with?"
)


def hierr_task(task: Any, tools: list[dict[str, Any]]) -> Task:
    """The τ² task as HierR reads it: the scripted user's opening request, the agent's tools, and
    the assistant-side gold actions as gold steps of one call each."""
    gold = [
        [ToolCall(a.name, dict(a.arguments or {}))]
        for a in gold_actions(task)
        if (getattr(a, "requestor", None) or ASSISTANT) == ASSISTANT
    ]
    question = scripted_turns(task, follow_gold_user_actions=False)[0].text
    return Task(id=str(task.id), messages=[{"role": "user", "content": question}], tools=tools, gold_calls=gold)


def rollout_text(sequence: CallSequence, outcomes: Sequence[StepOutcome], closing: str) -> tuple[str, bool]:
    """The agent's response text (Hermes format, as training builds it) and whether it stopped early."""
    text = ""
    for step, outcome in zip(sequence.steps, outcomes):
        if step.requestor != ASSISTANT:
            continue
        text += render_tool_calls([ToolCall(step.name, dict(step.arguments))])
        text += IM_END + "\n" + tool_results_turn([outcome.text]) + generation_prompt()
        if outcome.error:
            return text + APOLOGY, True
    return text + closing, False


@dataclass(frozen=True)
class RolloutPair:
    """HierR of one sequence's rollout against the real tools and against SGLS."""

    real: HierReward
    sim: HierReward
    real_stopped: bool
    sim_stopped: bool

    def to_dict(self) -> dict[str, Any]:
        def side(reward: HierReward, stopped: bool) -> dict[str, Any]:
            return {
                "r_tool": reward.r_tool,
                "r_sum": reward.r_sum,
                "score": reward.score,
                "rating": reward.rating,
                "reason": reward.reason,
                "stopped": stopped,
            }

        return {"real": side(self.real, self.real_stopped), "sim": side(self.sim, self.sim_stopped)}


def score_rollouts(
    task: Any,
    hierr_view: Task,
    sequence: CallSequence,
    real: Sequence[StepOutcome],
    sim: Sequence[StepOutcome],
    judge: Judge,
) -> RolloutPair:
    closing = oracle_plan(task)[-1]
    real_text, real_stopped = rollout_text(sequence, real, closing)
    sim_text, sim_stopped = rollout_text(sequence, sim, closing)
    return RolloutPair(
        hierr(real_text, hierr_view, judge), hierr(sim_text, hierr_view, judge), real_stopped, sim_stopped
    )


def add_reward_metrics(pair: RolloutPair, add: Any) -> None:
    """Through ``add(metric, value)``: each side's R_tool, R_sum, rating and HierR score, and how far
    apart they are. Ratings count only when the judge rated both sides."""
    real, sim = pair.real, pair.sim
    add("r_tool_real", real.r_tool)
    add("r_tool_sim", sim.r_tool)
    add("r_tool_equal", abs(real.r_tool - sim.r_tool) < 1e-9)
    add("r_tool_abs_diff", abs(real.r_tool - sim.r_tool))
    add("r_sum_abs_diff", abs(real.r_sum - sim.r_sum))
    add("score_abs_diff", abs(real.score - sim.score))
    add("stopped_real", pair.real_stopped)
    add("stopped_sim", pair.sim_stopped)
    if real.rating is not None and sim.rating is not None:
        add("rating_real", real.rating)
        add("rating_sim", sim.rating)
        add("rating_equal", real.rating == sim.rating)
        add("rating_abs_diff", abs(real.rating - sim.rating))
