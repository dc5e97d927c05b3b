"""In-domain metrics (docs/method.md §8) over rollouts of the training stack's agent loop and simulator.

Success@τ = 1[(R_tool + R_sum) / 2 ≥ τ]; Name-F1 and ArgMatch = (key + value) / 2 from the
execution reward; Process = R_tool; Step j = the per-turn reward of the turn serving gold step j
(0 when none does), over the tasks with a step j; cost = calls, assistant turns and generated tokens per task;
redundant calls = calls not matched one-to-one to a gold call (so exact repeats count), with
exact repeats also reported on their own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import torch

from slca_grpo.chat import parse_tool_calls
from slca_grpo.datatypes import Task, Trajectory
from slca_grpo.engine import SamplingConfig
from slca_grpo.eval.slots import slot_accuracy, slot_results
from slca_grpo.rewards.batch import DEFAULT_REWARDS, RewardBatch, RolloutReward, compute_rewards
from slca_grpo.rewards.config import RewardConfig
from slca_grpo.rewards.judge_base import Judge
from slca_grpo.rewards.matching import max_bipartite_matching, strict_call_match
from slca_grpo.rewards.turns import split_turns
from slca_grpo.rollout.loop import repeat_calls

SUCCESS_THRESHOLDS = (0.7, 0.8, 0.9, 1.0)


def item_metrics(trajectory: Trajectory, task: Task, reward: RolloutReward) -> dict[str, Any]:
    hier = reward.detail("hierr")
    calls = parse_tool_calls(trajectory.response_text, task.tool_names).calls
    matched = sum(p is not None for p in max_bipartite_matching(task.flat_gold_calls, calls, strict_call_match))
    half_score = (hier.r_tool + hier.r_sum) / 2
    forced = bool(trajectory.counters.get("forced_answer", 0))
    item: dict[str, Any] = {
        "task_id": task.id,
        "kind": task.metadata.get("kind", task.subset),
        # Builds on a tool kept out of training (the synthetic test split's held-out tools).
        "new_tools": bool(task.metadata.get("heldout_tools")),
        "score": hier.score,
        "r_tool": hier.r_tool,
        "r_sum": hier.r_sum,
        "no_call": hier.no_call,
        "name_f1": hier.execution.name_f1,
        "arg_match": (hier.execution.key + hier.execution.value) / 2,
        "process": hier.r_tool,
        "calls": len(calls),
        "turns": trajectory.counters.get("turns", len(trajectory.turns)),
        "generated_tokens": trajectory.counters.get("generated_tokens", 0),
        "redundant_calls": len(calls) - matched,
        "repeat_calls": repeat_calls(calls),
        "truncated": trajectory.truncated,
        # The loop ended its calls and asked for a final answer (answer_at_limit / answer_on_repeat).
        "forced_answer": forced,
        "answered_freely": not forced and not trajectory.truncated,  # stopped calling on its own
        "slots": [[kind, correct] for kind, correct in slot_results(task, calls)],
        "steps": list(reward.detail("turn").step_scores),
    }
    for threshold in SUCCESS_THRESHOLDS:
        item[f"success@{threshold}"] = float(half_score >= threshold - 1e-12)
    return item


AGGREGATED = (
    "score",
    "r_tool",
    "r_sum",
    "name_f1",
    "arg_match",
    "process",
    "calls",
    "turns",
    "generated_tokens",
    "redundant_calls",
    "repeat_calls",
    "truncated",
    "forced_answer",
    "answered_freely",
) + tuple(f"success@{t}" for t in SUCCESS_THRESHOLDS)


def aggregate(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means over items, overall, per task kind and for tasks on seen / held-out tools
    (``by_tools``), and argument accuracy per slot kind (``slots``: counts; ``slot/<kind>``: the
    accuracy, a scalar for curves)."""

    def means(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
        return {key: sum(float(r[key]) for r in rows) / len(rows) for key in AGGREGATED} if rows else {}

    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        by_kind[str(item["kind"])].append(item)
    slots = slot_accuracy(item.get("slots", ()) for item in items)
    return {
        "n": len(items),
        **means(items),
        **{f"slot/{kind}": counts["accuracy"] for kind, counts in slots.items()},
        **step_means(items),
        "slots": slots,
        "no_call_rate": sum(bool(i["no_call"]) for i in items) / max(1, len(items)),
        "by_kind": {kind: {"n": len(rows), **means(rows)} for kind, rows in sorted(by_kind.items())},
        "by_tools": {
            group: {"n": len(rows), **means(rows)}
            for group, rows in (
                ("seen_tools", [i for i in items if not i.get("new_tools")]),
                ("new_tools", [i for i in items if i.get("new_tools")]),
            )
            if rows
        },
    }


def step_means(items: Sequence[dict[str, Any]]) -> dict[str, float]:
    """``step/<j>``: the mean score of gold step j's turn over the items whose task has a step j."""
    out = {}
    for step in range(max((len(item.get("steps", ())) for item in items), default=0)):
        scores = [item["steps"][step] for item in items if len(item.get("steps", ())) > step]
        out[f"step/{step + 1}"] = sum(scores) / len(scores)
    return out


def score_trajectories(
    trajectories: Sequence[Trajectory], tasks: Sequence[Task], judge: Judge, reward_config: RewardConfig | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any], RewardBatch]:
    by_id = {t.id: t for t in tasks}
    rollout_tasks = [by_id[t.task_id] for t in trajectories]
    rewards = compute_rewards(
        [t.response_text for t in trajectories],
        rollout_tasks,
        judge,
        reward_config,
        names=(*DEFAULT_REWARDS, "turn"),
        turns=[t.turns or split_turns(t.response_text) for t in trajectories],
    )
    items = [item_metrics(t, task, r) for t, task, r in zip(trajectories, rollout_tasks, rewards.records)]
    return items, aggregate(items), rewards


def evaluate_loop(
    loop: Any,
    tasks: Sequence[Task],
    judge: Judge,
    reward_config: RewardConfig | None = None,
    *,
    batch_size: int = 32,
    temperature: float = 0.0,
    seed: int = 0,
    progress: bool = False,
    session_prefix: str = "eval",
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Roll out each task once (greedy by default) with an ``AgentLoop`` and score it.

    Simulator sessions are named from ``session_prefix``: give each evaluation of a run its own
    prefix, or a later evaluation meets the records an earlier one's calls created."""
    from tqdm.auto import tqdm

    sampling = SamplingConfig(temperature=temperature)
    trajectories: list[Trajectory] = []
    generator = torch.Generator().manual_seed(seed)
    chunks = range(0, len(tasks), batch_size)
    for start in tqdm(chunks, desc="eval", disable=not progress, leave=False):
        chunk = list(tasks[start : start + batch_size])
        trajectories += loop.run(
            chunk, group_size=1, sampling=sampling, generator=generator, session_prefix=f"{session_prefix}-{start}"
        )
    items, summary, _ = score_trajectories(trajectories, tasks, judge, reward_config)
    return items, summary
