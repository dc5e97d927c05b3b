"""Gold trajectories (SFT targets) from synthetic tasks, and JSONL output."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from slca_grpo.chat.template import render_chat
from slca_grpo.data.sft import trajectory_messages
from slca_grpo.datatypes import Task


def _fixtures(task: Task) -> list[dict[str, Any]]:
    fixtures = task.metadata.get("fixtures")
    expected = len(task.flat_gold_calls)
    if not isinstance(fixtures, list) or len(fixtures) != expected:
        raise ValueError(
            f"task {task.id!r} has no usable metadata['fixtures'] (need one per gold call, {expected}); "
            "gold trajectories need tasks from slca_grpo.data.synthetic"
        )
    for fixture, call in zip(fixtures, task.flat_gold_calls):
        if fixture.get("name") != call.name or fixture.get("arguments") != call.arguments:
            raise ValueError(
                f"task {task.id!r}: fixture {fixture.get('name')!r} does not match gold call {call.name!r}"
            )
    return fixtures


def gold_messages(task: Task) -> list[dict[str, Any]]:
    """The ideal conversation: the prompt, each gold step's calls and tool responses, the answer.

    Assistant calls use the OpenAI shape (``{"id", "type": "function", "function": {"name",
    "arguments": <dict>}}``); each tool message carries the fixture response as ``content``. An
    irrelevant task's trajectory is just the prompt and the polite refusal. Unlike
    :func:`slca_grpo.data.sft.trajectory_messages`, every gold call must have its fixture.
    """
    if task.reference_answer is None:
        raise ValueError(f"task {task.id!r} has no reference_answer to end its gold trajectory with")
    _fixtures(task)
    return trajectory_messages(task)


def render_gold(task: Task) -> str:
    """The SFT text of a task: its gold trajectory in the Hermes/ChatML format."""
    return render_chat(gold_messages(task), task.tools, add_generation_prompt=False)


def task_to_json(task: Task) -> str:
    """One JSONL line (no newline); key order is fixed, so equal tasks give equal bytes."""
    return json.dumps(task.to_dict(), ensure_ascii=False)


def write_jsonl(tasks: Iterable[Task], path: str | os.PathLike[str]) -> Path:
    """Write tasks as UTF-8 JSON lines (``Task.to_dict()``), creating parent folders."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", encoding="utf-8", newline="\n") as handle:
        for task in tasks:
            handle.write(task_to_json(task) + "\n")
    return target
