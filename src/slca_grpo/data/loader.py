"""Any supported dataset → tasks, streamed: files, folders of files, and benchmark sources.

``source`` is a file (``.jsonl``, ``.json``, ``.parquet``, optionally ``.gz`` for the JSON ones), a
folder of such files (read in name order), ``bfcl:CATEGORY[,...]`` or ``tau2:DOMAIN[:SPLIT]``. The
format is detected per file from its first row, or named (:data:`slca_grpo.data.formats.FORMATS`).
A bad row raises :class:`TaskFormatError` naming file, row and field, or with ``on_error="skip"``
is counted in the :class:`LoadReport` (its first messages kept). Benchmark data asked for as
training data (``purpose="train"``) raises :class:`EvalOnlyError`, which ``skip`` does not skip.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from slca_grpo.data.formats import (
    AUTO,
    BENCHMARK_SOURCES,
    DataFormat,
    RowContext,
    detect_format,
    format_names,
    get_format,
)
from slca_grpo.data.formats import bfcl as bfcl_format
from slca_grpo.data.formats import tau2 as tau2_format
from slca_grpo.data.records import Row, dataset_files, iter_rows
from slca_grpo.data.tasks import LoadReport, TaskFormatError
from slca_grpo.datatypes import Task

PURPOSES = ("any", "train", "eval")
MAX_KEPT_ERRORS = 1000
DETECTION_ROWS = 100  # rows looked at, at most, for one that tells the format


class EvalOnlyError(TaskFormatError):
    """Benchmark data (BFCL, a τ² test split) offered as training data."""


def benchmark_source(source: str) -> str | None:
    """The format name of a benchmark source (``bfcl:...``, ``tau2:...``) that is not a path."""
    for prefix, name in BENCHMARK_SOURCES.items():
        if source.startswith(prefix) and not Path(source).exists():
            return name
    return None


def _refuse(data_format: DataFormat, source: str, purpose: str) -> None:
    if purpose == "train" and data_format.eval_only:
        raise EvalOnlyError(
            f"{data_format.name} is a benchmark, for evaluation only: it cannot be training data", source
        )


def _detect(path: Path, rows: Iterator[Row], skip_bad: bool) -> tuple[DataFormat | None, list[Row]]:
    """The format told by the first decodable row, and the rows read to find it; without
    ``skip_bad``, the first bad row ends the search (it is the error, so nothing past it is read)."""
    seen: list[Row] = []
    for row in rows:
        seen.append(row)
        if row.problem is not None and not skip_bad:
            return None, seen
        if row.problem is None:
            found = detect_format(row.value)
            if found is None:
                keys = (
                    ", ".join(sorted(map(str, row.value)))[:200]
                    if isinstance(row.value, dict)
                    else type(row.value).__name__
                )
                raise TaskFormatError(
                    f"cannot tell the format from this row ({keys}); name it (--format / data.train_format): "
                    f"{', '.join(format_names())}",
                    path,
                    row.where,
                )
            return found, seen
        if len(seen) >= DETECTION_ROWS:
            raise TaskFormatError(f"no readable row among the first {len(seen)} to tell the format from", path)
    return None, seen  # an empty file, or one whose every row is broken (each then an error of its own)


def _sources(
    source: str, chosen: DataFormat | None, purpose: str, skip_bad: bool
) -> Iterator[tuple[str, Iterable[Row], DataFormat | None, bool]]:
    """(origin, rows, format, whether the rows are decoded file rows) per file or benchmark source; the
    format is None for a file with no readable row."""
    benchmark = benchmark_source(source)
    if benchmark is not None:
        data_format = get_format(benchmark)
        if chosen is not None and chosen is not data_format:
            raise ValueError(f"{source} is a {benchmark} source, not {chosen.name} data")
        _refuse(data_format, source, purpose)
        entries = bfcl_format.iter_entries(source) if benchmark == "bfcl" else tau2_format.iter_tasks(source)
        rows = (Row(source, label, i, value=v) for i, (label, v) in enumerate(entries, start=1))
        yield source, rows, data_format, False
        return
    if chosen is not None and chosen.detect is None:
        raise ValueError(
            f"the {chosen.name} format reads its installed benchmark: give {chosen.name}:... as the source"
        )
    for path in dataset_files(source):
        rows = iter_rows(path)
        data_format, seen = (chosen, []) if chosen is not None else _detect(path, rows, skip_bad)
        if data_format is not None:
            _refuse(data_format, str(path), purpose)
        yield str(path), itertools.chain(seen, rows), data_format, True


def _convert(row: Row, data_format: DataFormat | None, from_file: bool) -> Task:
    if row.problem is not None or data_format is None:
        raise TaskFormatError(row.problem or "unreadable")
    if from_file and not isinstance(row.value, dict):
        raise TaskFormatError(f"a row must be a JSON object, got {type(row.value).__name__}")
    context = RowContext(row.path, row.where, row.index)
    try:
        task = data_format.convert(row.value, context)
    except TaskFormatError:
        raise
    except (AttributeError, KeyError, TypeError, ValueError, RecursionError) as exc:  # a shape no check foresaw
        raise TaskFormatError(f"cannot read this row as {data_format.name} ({type(exc).__name__}: {exc})") from None
    if not data_format.ours:
        task.metadata.setdefault("source", data_format.name)
        task.metadata.setdefault("origin", context.origin)
    return task


def read_tasks(
    source: str | os.PathLike[str],
    *,
    data_format: str = AUTO,
    on_error: str = "raise",
    purpose: str = "any",
    report: LoadReport | None = None,
    check: Callable[[Task], None] | None = None,
) -> Iterator[Task]:
    """Tasks of ``source`` one at a time (see the module docstring); counts go into ``report``.
    ``check`` may refuse a task that converted (a ``TaskFormatError``, located like any other)."""
    if on_error not in ("raise", "skip"):
        raise ValueError("on_error must be 'raise' or 'skip'")
    if purpose not in PURPOSES:
        raise ValueError(f"purpose must be one of {', '.join(PURPOSES)}")
    report = report if report is not None else LoadReport()
    chosen = None if data_format == AUTO else get_format(data_format)
    seen_ids: set[str] = set()
    for origin, rows, found, from_file in _sources(str(source), chosen, purpose, on_error == "skip"):
        if found is not None:
            report.formats[origin] = found.name
        for row in rows:
            report.rows += 1
            try:
                task = _convert(row, found, from_file)
                if task.id in seen_ids:
                    raise TaskFormatError(f"duplicate task id '{task.id}'")
                if check is not None:
                    check(task)
            except TaskFormatError as exc:
                located = exc.located(row.path, row.where)
                if on_error == "raise":
                    raise located from None
                report.skipped += 1
                if len(report.errors) < MAX_KEPT_ERRORS:
                    report.errors.append(str(located))
                continue
            if purpose == "train" and task.metadata.get("eval_only"):
                raise EvalOnlyError(
                    f"task '{task.id}' is evaluation-only data: it cannot be training data", row.path, row.where
                )
            seen_ids.add(task.id)
            yield task


def load_dataset(
    source: str | os.PathLike[str],
    *,
    data_format: str = AUTO,
    on_error: str = "raise",
    limit: int | None = None,
    purpose: str = "any",
) -> LoadReport:
    """All tasks of ``source`` (the first ``limit``) in a :class:`LoadReport`."""
    report = LoadReport()
    tasks = read_tasks(source, data_format=data_format, on_error=on_error, purpose=purpose, report=report)
    with contextlib.closing(tasks):  # a limit stops early: close the files now
        report.tasks = list(tasks if limit is None else itertools.islice(tasks, limit))
    return report


def load_tasks(path: str | os.PathLike[str], *, on_error: str = "raise", limit: int | None = None) -> LoadReport:
    """Read our own tasks (``Task.to_dict()`` per JSON line). ``on_error``: ``"raise"`` or ``"skip"``."""
    return load_dataset(path, data_format="slca-tasks", on_error=on_error, limit=limit)
