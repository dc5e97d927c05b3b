"""An agent that replays each τ² task's gold answer: proof that the harness can score 1.0.

For task ``key`` it plays a fixed plan, one item per assistant turn: the assistant-side gold
actions as ``<tool_call>`` blocks, one per turn; before each run of user-side gold actions, a
message asking the user to perform them; finally a message carrying the task's
``communicate_info``. Its text goes through the same parser as any model's.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from slca_grpo.chat import render_tool_calls
from slca_grpo.data.tau2.gold import (
    ASSISTANT,
    call_format,
    communicate_info,
    gold_actions,
    gold_segments,
)
from slca_grpo.data.tau2.tasks import load_tau2_tasks
from slca_grpo.datatypes import ToolCall
from slca_grpo.eval.agent import AgentRequest

FOLLOW_UP = "Is there anything else I can help you with?"


def oracle_plan(task: Any, skip_action_ids: Collection[str] = ()) -> list[str]:
    """The oracle's turns for ``task`` (Hermes text), optionally without some gold actions."""
    plan: list[str] = []
    for segment in gold_segments(gold_actions(task, skip_action_ids)):
        if segment.requestor == ASSISTANT:
            plan.extend(render_tool_calls([ToolCall(a.name, dict(a.arguments or {}))]) for a in segment.actions)
        else:
            steps = "; ".join(call_format(a) for a in segment.actions)
            plan.append(f"Please do the following on your device, in this order: {steps}.")
    info = communicate_info(task)
    closing = "Your request has been handled."
    if info:
        # τ²'s communicate check looks for each string, case-insensitively, with commas removed.
        closing += " For your records: " + "; ".join(info) + "."
    plan.append(f"{closing} {FOLLOW_UP}")
    return plan


class Tau2OracleAgent:
    """A :class:`~slca_grpo.eval.agent.ChatAgent` that replays gold plans, looked up by task id.

    Give ``tasks`` (τ² ``Task`` objects) or a ``domain`` to load all of that domain's tasks.
    ``skip_action_ids`` drops gold actions (by ``action_id``), to show the score then falls.
    """

    name = "oracle"

    def __init__(
        self,
        tasks: Iterable[Any] | None = None,
        *,
        domain: str | None = None,
        skip_action_ids: Collection[str] = (),
    ) -> None:
        if tasks is None:
            if domain is None:
                raise ValueError("Tau2OracleAgent needs tasks or a domain to read gold answers from")
            tasks = load_tau2_tasks(domain, split=None)
        self.plans = {str(t.id): oracle_plan(t, skip_action_ids) for t in tasks}

    def respond(self, requests: list[AgentRequest]) -> list[str]:
        texts = []
        for request in requests:
            plan = self.plans.get(request.key)
            if plan is None:
                raise KeyError(f"the oracle has no gold answer for task {request.key!r}")
            texts.append(plan[request.step] if request.step < len(plan) else FOLLOW_UP)
        return texts
