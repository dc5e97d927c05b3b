"""What a dataset holds, gathered one task at a time (``slca data inspect``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from slca_grpo.data.sft import IncompleteTrajectory, trajectory_messages
from slca_grpo.datatypes import Task

TOP_TOOLS = 10


def _spread(counts: Counter) -> dict[str, Any]:
    total = sum(counts.values())
    if not total:
        return {"min": 0, "mean": 0.0, "max": 0}
    return {
        "min": min(counts),
        "mean": round(sum(k * n for k, n in counts.items()) / total, 3),
        "max": max(counts),
        "histogram": {str(k): counts[k] for k in sorted(counts)},
    }


@dataclass
class DatasetStats:
    tasks: int = 0
    subsets: Counter = field(default_factory=Counter)
    tools_per_task: Counter = field(default_factory=Counter)
    steps_per_task: Counter = field(default_factory=Counter)
    calls_per_task: Counter = field(default_factory=Counter)
    parallel_steps: int = 0
    called: Counter = field(default_factory=Counter)  # gold calls per tool name
    offered: set[str] = field(default_factory=set)
    with_history: int = 0  # prompts holding earlier assistant turns (multi-turn conversations)
    with_reference: int = 0
    with_all_responses: int = 0  # every gold call has a recorded response
    names_only: int = 0
    sft_complete: int = 0
    eval_only: int = 0

    def add(self, task: Task) -> None:
        self.tasks += 1
        self.subsets[task.subset] += 1
        self.tools_per_task[len(task.tools)] += 1
        self.steps_per_task[len(task.gold_calls)] += 1
        self.calls_per_task[len(task.flat_gold_calls)] += 1
        self.parallel_steps += sum(len(step) > 1 for step in task.gold_calls)
        self.called.update(call.name for call in task.flat_gold_calls)
        self.offered.update(task.tool_names)
        self.with_history += any(m.get("role") == "assistant" for m in task.messages)
        self.with_reference += task.reference_answer is not None
        fixtures = task.metadata.get("fixtures") or []
        self.with_all_responses += bool(task.flat_gold_calls) and len(fixtures) >= len(task.flat_gold_calls)
        self.names_only += task.metadata.get("gold_arguments") is False
        self.eval_only += bool(task.metadata.get("eval_only"))
        try:
            trajectory_messages(task)
            self.sft_complete += 1
        except IncompleteTrajectory:
            pass

    def summary(self) -> dict[str, Any]:
        return {
            "tasks": self.tasks,
            "subsets": dict(self.subsets),
            "tools": {"distinct": len(self.offered), "per_task": _spread(self.tools_per_task)},
            "gold_steps_per_task": _spread(self.steps_per_task),
            "gold_calls_per_task": _spread(self.calls_per_task),
            "parallel_steps": self.parallel_steps,
            "most_called_tools": dict(self.called.most_common(TOP_TOOLS)),
            "with_history": self.with_history,
            "with_reference_answer": self.with_reference,
            "with_all_responses": self.with_all_responses,
            "gold_names_only": self.names_only,
            "sft_trajectories": self.sft_complete,
            "eval_only": self.eval_only,
        }


def describe(summary: dict[str, Any]) -> list[str]:
    """The summary as short lines of text."""

    def spread(item: dict[str, Any]) -> str:
        return f"min {item['min']} / mean {item['mean']} / max {item['max']}"

    subsets = ", ".join(f"{k} {v}" for k, v in summary["subsets"].items()) or "none"
    called = ", ".join(f"{k} {v}" for k, v in summary["most_called_tools"].items()) or "none"
    return [
        f"subsets: {subsets}",
        f"tools: {summary['tools']['distinct']} distinct; per task {spread(summary['tools']['per_task'])}",
        f"gold steps per task: {spread(summary['gold_steps_per_task'])}; "
        f"calls per task: {spread(summary['gold_calls_per_task'])}; parallel steps: {summary['parallel_steps']}",
        f"most called: {called}",
        f"with earlier turns in the prompt: {summary['with_history']}; with a reference answer: "
        f"{summary['with_reference_answer']}; with every call's response recorded: {summary['with_all_responses']}",
        f"complete SFT trajectories: {summary['sft_trajectories']}; gold names only: {summary['gold_names_only']}; "
        f"evaluation-only: {summary['eval_only']}",
    ]
