"""Gold trajectories (SFT targets) from synthetic tasks, and JSONL output."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from slca_grpo.chat.template import render_chat
from slca_grpo.types import Task


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
    irrelevant task's trajectory is just the prompt and the polite refusal.
    """
    if task.reference_answer is None:
        raise ValueError(f"task {task.id!r} has no reference_answer to end its gold trajectory with")
    fixtures = iter(_fixtures(task))
    messages: list[dict[str, Any]] = [dict(m) for m in task.messages]
    for step_index, step in enumerate(task.gold_calls):
        call_ids = [f"call_{step_index}_{i}" for i in range(len(step))]
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": dict(call.arguments)},
                    }
                    for call_id, call in zip(call_ids, step)
                ],
            }
        )
        for call_id, call in zip(call_ids, step):
            messages.append(
                {"role": "tool", "tool_call_id": call_id, "name": call.name, "content": next(fixtures)["response"]}
            )
    messages.append({"role": "assistant", "content": task.reference_answer})
    return messages


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
