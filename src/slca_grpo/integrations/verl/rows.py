"""Our tasks as verl dataset rows (parquet), and a task read back from a row. No verl import.

The row layout is the one of verl's RL datasets and of the paper's released data:

- ``data_source``: a name (default ``"slca"``);
- ``prompt``: the chat messages the policy sees (``{"role", "content"}``; earlier calls as Hermes text);
- ``tools``: the task's OpenAI tool schemas, as a JSON string;
- ``ability``: ``"tool_call"``;
- ``reward_model``: ``{"style": "rule", "ground_truth": JSON string of {allowed_tools,
  gold_tool_calls (steps × parallel calls), question_content, tool_schemas, subset_name}}``;
- ``extra_info``: ``{"index", "task_id", "split", "task"}``, ``task`` being the whole task as JSON.

Nested values that differ from row to row (tool schemas, call arguments) are JSON strings, so every
row has the same parquet column types. The agent loop and the reward read the task back from
``extra_info["task"]``.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from slca_grpo.chat.messages import flat_messages
from slca_grpo.data.output import copy_through, output_target
from slca_grpo.data.tasks import TaskFormatError, task_from_value
from slca_grpo.datatypes import Task

DEFAULT_DATA_SOURCE = "slca"
ABILITY = "tool_call"
TASK_FIELD = "task"  # extra_info key holding the task's JSON

__all__ = [
    "DEFAULT_DATA_SOURCE",
    "task_from_extra_info",
    "task_to_row",
    "tasks_to_rows",
    "write_rows",
    "write_tasks_parquet",
]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def task_to_row(task: Task, index: int, *, data_source: str = DEFAULT_DATA_SOURCE, split: str | None = None) -> dict:
    """One verl row for ``task``; ``index`` becomes ``extra_info.index`` (verl's sample index)."""
    ground_truth = {
        "allowed_tools": task.tool_names,
        "gold_tool_calls": [[call.to_dict() for call in step] for step in task.gold_calls],
        "question_content": task.question,
        "tool_schemas": task.tools,
        "subset_name": task.subset,
    }
    return {
        "data_source": data_source,
        "prompt": flat_messages(task.messages),
        "tools": _dumps(task.tools),
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": _dumps(ground_truth)},
        "extra_info": {"index": int(index), "task_id": task.id, "split": split, TASK_FIELD: _dumps(task.to_dict())},
    }


def tasks_to_rows(
    tasks: Iterable[Task], *, data_source: str = DEFAULT_DATA_SOURCE, split: str | None = None, start: int = 0
) -> list[dict]:
    return [
        task_to_row(task, index, data_source=data_source, split=split) for index, task in enumerate(tasks, start=start)
    ]


ROWS_PER_GROUP = 1024  # rows converted and written at a time (memory stays flat in the dataset's size)


def write_rows(rows: Iterable[dict], path: str | os.PathLike[str]) -> int:
    """Write rows as a parquet file, ``ROWS_PER_GROUP`` at a time; returns the count. A file is
    replaced atomically (temp file + rename); a device or a named pipe is written through, never
    renamed over; a folder is refused (``slca_grpo.data.output``)."""
    target, through = output_target(path)
    if through:
        with tempfile.TemporaryDirectory(prefix="slca-verl-") as folder:
            staged = Path(folder) / "rows.parquet"
            count = _write_parquet(rows, staged, shown=path)
            copy_through(staged, target, path)
        return count
    return _write_parquet(rows, target, shown=path)


def _write_parquet(rows: Iterable[dict], target: Path, *, shown: str | os.PathLike[str]) -> int:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError("writing parquet needs pyarrow: pip install 'slca-grpo[verl]'") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    count = 0
    writer = None
    try:
        for group in _groups(rows, ROWS_PER_GROUP):
            table = pa.Table.from_pylist(group)
            if writer is None:
                writer = pq.ParquetWriter(temporary, table.schema)
            writer.write_table(table.cast(writer.schema))
            count += len(group)
        if writer is None:
            raise ValueError(f"no rows to write to {shown}")
        writer.close()
        writer = None
        os.replace(temporary, target)
    finally:
        if writer is not None:
            writer.close()
        temporary.unlink(missing_ok=True)
    return count


def _groups(rows: Iterable[dict], size: int) -> Iterator[list[dict]]:
    group: list[dict] = []
    for row in rows:
        group.append(row)
        if len(group) == size:
            yield group
            group = []
    if group:
        yield group


def write_tasks_parquet(
    tasks: Iterable[Task],
    path: str | os.PathLike[str],
    *,
    data_source: str = DEFAULT_DATA_SOURCE,
    split: str | None = None,
) -> int:
    """Convert ``tasks`` to verl rows and write them to ``path``, streamed; returns the count."""
    rows = (task_to_row(task, index, data_source=data_source, split=split) for index, task in enumerate(tasks))
    return write_rows(rows, path)


def task_from_extra_info(extra_info: Mapping[str, Any] | None) -> Task:
    """The task a row carries in ``extra_info["task"]`` (a JSON string or an object).

    Tasks are cached by their JSON, as the G rollouts of a prompt and their rewards all read the
    same one; callers must not change the returned task. A bad one raises ``TaskFormatError``
    naming the row (its ``extra_info.index``) and the field.
    """
    where = f"row {extra_info.get('index')!r}" if isinstance(extra_info, Mapping) else "a row"
    if not isinstance(extra_info, Mapping) or TASK_FIELD not in extra_info:
        raise TaskFormatError(
            f"{where} has no extra_info.{TASK_FIELD}; write the dataset with slca-grpo's converter "
            "(`slca verl data`, or slca_grpo.integrations.verl.rows.write_tasks_parquet)"
        )
    raw = extra_info[TASK_FIELD]
    try:
        return task_from_value(raw)
    except TaskFormatError as exc:
        raise TaskFormatError(f"{where}: extra_info.{TASK_FIELD}: {exc.problem}") from None
