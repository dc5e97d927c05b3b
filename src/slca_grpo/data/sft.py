"""SFT data from tasks: each task's assistant trajectory as OpenAI chat messages (``sft.jsonl``).

One JSON line per task: ``{"id", "messages", "tools", "metadata": {"source", "origin"}}``.
``messages`` are the task's prompt, then per gold step an assistant message with ``tool_calls``
(``{"id", "type": "function", "function": {"name", "arguments": <object>}}``, its content the
step's recorded text or ``""``) and one ``tool`` message per call (``tool_call_id``, ``name``,
``content`` = the recorded response), then the final assistant answer. That is the layout chat
templates and TRL's SFT trainer take (``messages`` + ``tools``), and the ``openai`` format reads
it back as tasks. A task whose last step has no recorded responses and no answer (xLAM) ends with
its calls; one missing a response mid-way, or ending on tool responses, has no complete
trajectory and is left out (counted).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from slca_grpo.data.tasks import atomic_text
from slca_grpo.datatypes import Task


class IncompleteTrajectory(ValueError):
    """A task whose recorded data do not make a whole assistant trajectory."""


def trajectory_messages(task: Task) -> list[dict[str, Any]]:
    """The task's trajectory (see the module docstring); raises :class:`IncompleteTrajectory`."""
    fixtures = [f for f in task.metadata.get("fixtures") or [] if isinstance(f, dict)]
    texts = task.metadata.get("step_texts") or []
    messages: list[dict[str, Any]] = [dict(m) for m in task.messages]
    used = 0  # fixtures are stored in gold-call order, so they are consumed in that order
    for index, step in enumerate(task.gold_calls):
        ids = [f"call_{index}_{i}" for i in range(len(step))]
        text = texts[index] if index < len(texts) and isinstance(texts[index], str) else ""
        messages.append(
            {
                "role": "assistant",
                "content": text,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": c.name, "arguments": dict(c.arguments)}}
                    for i, c in zip(ids, step)
                ],
            }
        )
        responses = []
        for call in step:
            fixture = fixtures[used] if used < len(fixtures) else {}
            if fixture.get("name") == call.name and fixture.get("arguments") == call.arguments:
                response = fixture.get("response")
                responses.append(response if isinstance(response, str) else json.dumps(response, ensure_ascii=False))
                used += 1
            else:
                responses.append(None)
        final_step = index == len(task.gold_calls) - 1
        if final_step and task.reference_answer is None and all(r is None for r in responses):
            return messages  # the trajectory teaches the calls alone
        missing = next((c.name for c, r in zip(step, responses) if r is None), None)
        if missing is not None:
            raise IncompleteTrajectory(f"task {task.id!r}: no recorded response for '{missing}' in step {index}")
        messages += [
            {"role": "tool", "tool_call_id": i, "name": c.name, "content": r} for i, c, r in zip(ids, step, responses)
        ]
    if task.reference_answer is None:
        problem = "ends on tool responses with no final answer" if task.gold_calls else "has no call and no answer"
        raise IncompleteTrajectory(f"task {task.id!r} {problem}")
    messages.append({"role": "assistant", "content": task.reference_answer})
    return messages


def sft_record(task: Task) -> dict[str, Any]:
    """One ``sft.jsonl`` row."""
    record: dict[str, Any] = {"id": task.id, "messages": trajectory_messages(task), "tools": task.tools}
    kept = {k: task.metadata[k] for k in ("source", "origin") if k in task.metadata}
    if kept:
        record["metadata"] = kept
    return record


@dataclass
class SFTWriteReport:
    written: int = 0
    incomplete: int = 0
    first_incomplete: str | None = None


def write_sft(tasks: Iterable[Task], path: str | os.PathLike[str]) -> SFTWriteReport:
    """Write the trajectories of ``tasks`` as JSONL (atomically); incomplete ones are counted."""
    report = SFTWriteReport()
    with atomic_text(path) as handle:
        for task in tasks:
            try:
                record = sft_record(task)
            except IncompleteTrajectory as exc:
                report.incomplete += 1
                report.first_incomplete = report.first_incomplete or str(exc)
                continue
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            report.written += 1
    return report
