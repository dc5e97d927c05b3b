"""``slca data inspect|validate|convert|split``: datasets of the field's formats, read as tasks."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slca_grpo.cli.common import fail

if TYPE_CHECKING:
    from slca_grpo.datatypes import Task


def _write_tasks(tasks: Iterable[Task], path: str) -> tuple[int, str, str | None]:
    from slca_grpo.data.tasks import write_tasks

    return write_tasks(tasks, path), "tasks", None


def _write_sft(tasks: Iterable[Task], path: str) -> tuple[int, str, str | None]:
    from slca_grpo.data.sft import write_sft

    report = write_sft(tasks, path)
    note = None
    if report.incomplete:
        note = (
            f"{report.incomplete} task(s) have no complete trajectory and were left out "
            f"(first: {report.first_incomplete})"
        )
    return report.written, "SFT trajectories", note


def _write_verl(tasks: Iterable[Task], path: str) -> tuple[int, str, str | None]:
    from slca_grpo.integrations.verl.rows import write_tasks_parquet

    return write_tasks_parquet(tasks, path), "verl rows", None  # a device or pipe is written through


# Output layouts of ``convert``: name -> (writer(tasks, path) -> (count, what, note), whether the
# rows are training data, so benchmarks are refused).
WRITERS: dict[str, tuple[Callable[[Iterable[Task], str], tuple[int, str, str | None]], bool]] = {
    "tasks": (_write_tasks, False),
    "sft": (_write_sft, True),
    "verl": (_write_verl, True),
}
# The first suffix that ends the name wins.
OUTPUT_SUFFIXES = (("sft.jsonl", "sft"), (".jsonl", "tasks"), (".parquet", "verl"))
LAYOUTS = tuple(WRITERS)


def register(subparsers: Any) -> None:
    """Add ``slca data`` and its subcommands to the ``slca`` parser."""
    from slca_grpo.data.formats import AUTO, format_names

    data = subparsers.add_parser(
        "data",
        help="inspect, validate, convert and split tool-calling datasets (xLAM, ToolACE, Glaive, ...)",
        description="Read datasets in the field's tool-calling formats as tasks. SOURCE is a file "
        "(.jsonl, .json, .parquet, optionally .gz), a folder of them, bfcl:CATEGORY[,...] or tau2:DOMAIN[:SPLIT].",
    )
    commands = data.add_subparsers(dest="data_command", metavar="COMMAND")

    def add(name: str, help_text: str, func) -> argparse.ArgumentParser:
        parser = commands.add_parser(name, help=help_text, description=help_text)
        parser.add_argument("source", metavar="SOURCE", type=_source)
        parser.add_argument(
            "--format", default=AUTO, help=f"{AUTO} (detected per file) or one of: {', '.join(format_names())}"
        )
        parser.set_defaults(func=func)
        return parser

    inspect = add("inspect", "the format, rows, tools, call statistics and a sample of a dataset", run_inspect)
    inspect.add_argument("--skip-bad", action="store_true", help="count bad rows instead of stopping at the first")
    inspect.add_argument("--limit", type=_count, help="read at most this many tasks")
    inspect.add_argument("--json", action="store_true", help="print the statistics as JSON")

    validate = add("validate", "read every row and list the bad ones (exit 1 if there are any)", run_validate)
    validate.add_argument("--for", dest="purpose", choices=("any", "train", "eval"), default="any")
    validate.add_argument(
        "--max-errors", type=_count, default=20, help="errors to print (default 20; at most the first 1,000 are kept)"
    )

    convert = add(
        "convert",
        "write a dataset as our tasks (tasks.jsonl), SFT trajectories (sft.jsonl) or verl rows (.parquet)",
        run_convert,
    )
    convert.add_argument(
        "--to",
        required=True,
        metavar="PATH",
        help="output: a .jsonl file (a name ending sft.jsonl means SFT) or a .parquet file (verl rows); "
        "a device or named pipe (/dev/stdout, with --layout) is written through, a symbolic link followed",
    )
    convert.add_argument("--layout", choices=LAYOUTS, help="the output layout, when the name does not tell it")
    convert.add_argument("--skip-bad", action="store_true", help="skip and count bad rows instead of stopping")
    convert.add_argument("--limit", type=_count, help="convert at most this many tasks")

    split = add("split", "deduplicate by normalised question and split so train and test share none", run_split)
    split.add_argument("--out", required=True, help="folder for train.jsonl and test.jsonl")
    split.add_argument("--test-fraction", type=float, default=0.1, help="share of questions for test (0: dedupe only)")
    split.add_argument("--seed", type=int, default=0)
    split.add_argument(
        "--exclude", action="append", default=[], type=_source, metavar="SOURCE", help="drop questions found in SOURCE"
    )
    split.add_argument("--skip-bad", action="store_true")
    data.set_defaults(func=lambda args: (data.print_help(), 2)[1])


def _count(text: str) -> int:
    """A number of items for ``--limit`` / ``--max-errors``: an int >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _source(text: str) -> str:
    if not text.strip():  # an empty path would read the current folder
        raise argparse.ArgumentTypeError("a source is a file, a folder, bfcl:CATEGORY or tau2:DOMAIN, got ''")
    return text


def _errors():
    from slca_grpo.data.tasks import TaskFormatError

    return (OSError, TaskFormatError, ValueError, ImportError)  # ImportError: a benchmark package missing


def _warn_skipped(report: Any) -> None:
    if report.skipped:
        print(f"warning: skipped {report.skipped} bad row(s) (first: {report.errors[0]})", file=sys.stderr)


def _where(report: Any) -> str:
    formats = sorted(set(report.formats.values()))
    files = len(report.formats)
    return f"format {', '.join(formats) or 'none'} ({files} file{'s' if files != 1 else ''}), {report.rows} rows"


def _shorten(value: Any, limit: int = 300) -> Any:
    """A sample row for the terminal: long strings cut, long lists shown by their first items."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + f"... ({len(value)} chars)"
    if isinstance(value, list):
        shown = [_shorten(v, limit) for v in value[:8]]
        return shown + [f"... ({len(value)} items)"] if len(value) > 8 else shown
    if isinstance(value, dict):
        return {k: _shorten(v, limit) for k, v in value.items()}
    return value


def run_inspect(args: argparse.Namespace) -> int:
    import itertools

    from slca_grpo.data.loader import read_tasks
    from slca_grpo.data.stats import DatasetStats, describe
    from slca_grpo.data.tasks import LoadReport

    report, stats, sample = LoadReport(), DatasetStats(), None
    try:
        tasks = read_tasks(
            args.source, data_format=args.format, on_error="skip" if args.skip_bad else "raise", report=report
        )
        for task in itertools.islice(tasks, args.limit):
            stats.add(task)
            sample = sample or task.to_dict()
    except _errors() as exc:
        return fail(str(exc))
    summary = {
        "source": str(args.source),
        "formats": report.formats,
        "rows": report.rows,
        "skipped": report.skipped,
        **stats.summary(),
        "sample": sample,
    }
    if args.json:
        print(json.dumps(summary, indent=1, ensure_ascii=False))
        return 0
    print(f"{args.source}: {_where(report)}, {stats.tasks} tasks, {report.skipped} skipped")
    for line in describe(summary):
        print(f"  {line}")
    if report.errors:
        print(f"  first bad row: {report.errors[0]}")
    if sample is not None:
        print("sample (the first task):")
        print(json.dumps(_shorten(sample), indent=1, ensure_ascii=False))
    return 0


def run_validate(args: argparse.Namespace) -> int:
    from functools import partial

    from slca_grpo.data.loader import read_tasks
    from slca_grpo.data.tasks import LoadReport
    from slca_grpo.simulator.checks import ToolChecker, check_gold_calls

    report = LoadReport()
    good = 0
    # Beyond the format: every gold call must fit its own tool's schema, as the simulator checks it.
    gold_fits = partial(check_gold_calls, checker=ToolChecker())
    rows = read_tasks(
        args.source, data_format=args.format, on_error="skip", purpose=args.purpose, report=report, check=gold_fits
    )
    try:
        for _ in rows:
            good += 1
    except _errors() as exc:
        return fail(str(exc))
    shown = report.errors[: args.max_errors]  # the report keeps the first MAX_KEPT_ERRORS
    for message in shown:
        print(message)
    if report.skipped > len(shown):
        print(f"... and {report.skipped - len(shown)} more")
    verdict = "ok" if not report.skipped else f"{report.skipped} bad row(s)"
    print(f"{args.source}: {_where(report)}, {good} valid tasks: {verdict}")
    return 1 if report.skipped else 0


def _output_layout(path: str, named: str | None) -> str:
    if named is not None:
        return named
    name = Path(path).name.lower()
    for suffix, layout in OUTPUT_SUFFIXES:
        if name.endswith(suffix):
            return layout
    raise ValueError(
        f"cannot tell the output layout from {path!r}: --to takes a .jsonl file (a name ending sft.jsonl for SFT "
        f"trajectories) or a .parquet file (verl rows), or name the layout with --layout {'|'.join(LAYOUTS)}"
    )


def run_convert(args: argparse.Namespace) -> int:
    import itertools

    from slca_grpo.data.loader import read_tasks
    from slca_grpo.data.tasks import LoadReport

    report = LoadReport()
    try:
        writer, training = WRITERS[_output_layout(args.to, args.layout)]
        tasks = read_tasks(
            args.source,
            data_format=args.format,
            on_error="skip" if args.skip_bad else "raise",
            purpose="train" if training else "any",
            report=report,
        )
        count, what, note = writer(itertools.islice(tasks, args.limit), args.to)
    except _errors() as exc:
        return fail(str(exc))
    if note:
        print(f"note: {note}", file=sys.stderr)
    _warn_skipped(report)
    summary = sys.stderr if _is_stdout(args.to) else sys.stdout  # not into the rows written (--to /dev/stdout)
    print(f"wrote {count} {what} to {args.to} ({_where(report)}, {report.skipped} skipped)", file=summary)
    return 0


def _is_stdout(path: str) -> bool:
    """Whether ``path`` is where standard output goes."""
    try:
        return os.path.samestat(os.fstat(sys.stdout.fileno()), os.stat(path))
    except (OSError, ValueError):  # no such file, or a stdout with no descriptor (captured)
        return False


def run_split(args: argparse.Namespace) -> int:
    from slca_grpo.data.loader import read_tasks
    from slca_grpo.data.split import split_tasks
    from slca_grpo.data.tasks import LoadReport

    report = LoadReport()
    on_error = "skip" if args.skip_bad else "raise"
    out = Path(args.out)
    try:
        excluded_report = LoadReport()
        excluded = (
            task for source in args.exclude for task in read_tasks(source, on_error=on_error, report=excluded_report)
        )
        tasks = read_tasks(args.source, data_format=args.format, on_error=on_error, report=report)
        result = split_tasks(
            tasks,
            out / "train.jsonl",
            out / "test.jsonl" if args.test_fraction > 0 else None,
            test_fraction=args.test_fraction,
            seed=args.seed,
            exclude=excluded,
        )
    except _errors() as exc:
        return fail(str(exc))
    _warn_skipped(report)
    if excluded_report.skipped:  # their questions could not be excluded
        print(
            f"warning: --exclude: skipped {excluded_report.skipped} bad row(s), whose questions stay in "
            f"(first: {excluded_report.errors[0]})",
            file=sys.stderr,
        )
    print(
        f"{result.read} tasks read ({_where(report)}): {result.duplicates} duplicate question(s) and "
        f"{result.excluded} excluded dropped; wrote {result.train} to {out / 'train.jsonl'}"
        + (f" and {result.test} to {out / 'test.jsonl'}" if args.test_fraction > 0 else "")
    )
    return 0
