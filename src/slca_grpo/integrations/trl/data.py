"""TRL datasets of our tasks: one row per task, the task itself in a column of its own.

TRL repeats each row ``num_generations`` times and hands the rows to the rollout function and the
reward functions. The ``prompt`` column is the task's messages as role and content (what TRL logs
and what a plain TRL generation would render); the rollouts and rewards read the task from
``slca_task`` (its JSON), so each rollout offers that task's own tools and is scored against its
own gold calls.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from slca_grpo.chat.messages import flat_messages
from slca_grpo.data.tasks import TaskFormatError, task_from_value
from slca_grpo.datatypes import Task

TASK_COLUMN = "slca_task"

__all__ = ["TASK_COLUMN", "task_dataset", "task_of_row", "task_rows"]


def task_rows(tasks: Iterable[Task]) -> list[dict[str, Any]]:
    """One row per task: ``prompt`` (role and content) and ``slca_task`` (the task's JSON)."""
    return [
        {"prompt": flat_messages(task.messages), TASK_COLUMN: json.dumps(task.to_dict(), ensure_ascii=False)}
        for task in tasks
    ]


def task_dataset(tasks: Iterable[Task]):
    """A ``datasets.Dataset`` of :func:`task_rows`, ready for ``train_dataset=``."""
    from datasets import Dataset

    return Dataset.from_list(task_rows(tasks))


def task_of_row(row: Mapping[str, Any], index: int) -> Task:
    """The task row ``index`` of a batch carries; a row without one, or with a bad one, is a
    ``TaskFormatError`` naming the row. Tasks are cached by their JSON (a group's G rows share
    one); callers must not change them."""
    if TASK_COLUMN not in row:
        raise TaskFormatError(
            f"row {index} of the batch has no {TASK_COLUMN!r} column (has {sorted(row)}); build the dataset with "
            "slca_grpo.integrations.trl.task_dataset(tasks)"
        )
    raw = row[TASK_COLUMN]
    try:
        return task_from_value(raw)
    except TaskFormatError as exc:
        raise TaskFormatError(f"row {index} of the batch: {TASK_COLUMN}: {exc.problem}") from None
    except RecursionError:  # a task nested deeper than Python can walk (e.g. a schema hundreds of levels deep)
        raise TaskFormatError(f"row {index} of the batch: {TASK_COLUMN}: nested too deeply to read") from None
