"""The dataset formats the loader reads, by name, and how each one is recognised.

Each format turns one decoded row into a :class:`~slca_grpo.datatypes.Task`, raising
:class:`~slca_grpo.data.tasks.TaskFormatError` (naming the field) for a row it cannot read.
Detection looks at a file's first row; the formats are tried in the order of :data:`FORMATS`.
Importing this package imports no benchmark package: BFCL and τ² are imported when read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slca_grpo.data.bfcl.entries import BFCLEntry
from slca_grpo.data.formats import bfcl, glaive, openai_chat, release, sharegpt, tau2, toolace, xlam
from slca_grpo.data.tasks import task_from_dict
from slca_grpo.datatypes import Task

AUTO = "auto"


@dataclass(frozen=True)
class RowContext:
    """Where a row comes from: its file (or benchmark source), its place, its 1-based index."""

    path: str
    where: str | int
    index: int

    @property
    def default_id(self) -> str:
        """The id of a task whose row has none: file stem and row number."""
        return f"{Path(self.path).stem}-{self.index}"

    @property
    def origin(self) -> str:
        return f"{self.path}:{self.where}"


@dataclass(frozen=True)
class DataFormat:
    name: str
    summary: str
    convert: Callable[[Any, RowContext], Task]
    detect: Callable[[dict[str, Any]], bool] | None = None  # None: never auto-detected
    aliases: tuple[str, ...] = ()
    eval_only: bool = False  # a benchmark: refused as training data
    ours: bool = False  # rows are our own tasks: their metadata is kept exactly


def _row_id(row: dict[str, Any], context: RowContext, key: str = "id") -> str:
    value = row.get(key)
    if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
        return str(value)
    return context.default_id


def _with_id(module: Any) -> Callable[[Any, RowContext], Task]:
    return lambda row, context: module.convert(row, _row_id(row, context))


def _tau2(task: Any, context: RowContext) -> Task:
    domain, split = tau2.parse_spec(context.path)
    return tau2.convert(task, domain, split)


def _bfcl(row: Any, context: RowContext) -> Task:
    return bfcl.entry_task(row) if isinstance(row, BFCLEntry) else bfcl.convert(row, context.path)


_TASK_KEYS = frozenset({"id", "messages", "tools", "gold_calls", "subset", "reference_answer", "metadata"})


def _is_our_task(row: dict[str, Any]) -> bool:
    """Our task fields only (``gold_calls`` and ``subset`` are ours alone), and no recorded reply: a
    row of chat messages with assistant turns is an OpenAI conversation."""
    if "gold_calls" in row or "subset" in row:
        return True
    messages = row.get("messages")
    replies = isinstance(messages, list) and any(
        isinstance(m, dict) and m.get("role") != "user" and m.get("role") != "system" for m in messages
    )
    # Messages as a JSON string are an OpenAI row's spelling (ours are a list, or missing: then
    # validating the task names what is missing).
    return set(row) <= _TASK_KEYS and (messages is None or isinstance(messages, list)) and not replies


FORMATS: tuple[DataFormat, ...] = (
    DataFormat(
        "slca-tasks",
        "our own tasks (Task.to_dict() per row)",
        lambda row, _: task_from_dict(row),
        _is_our_task,
        ours=True,
    ),
    DataFormat(
        "slca-release",
        "the paper's release: RL rows (prompt, reward_model.ground_truth) or ShareGPT SFT rows",
        _with_id(release),
        release.detect,
    ),
    DataFormat("openai", "OpenAI chat messages with tool_calls, and tools", _with_id(openai_chat), openai_chat.detect),
    DataFormat("bfcl", "BFCL questions + possible answers (evaluation only)", _bfcl, bfcl.detect, eval_only=True),
    DataFormat("xlam", "xLAM / APIGen: query, tools, answers", _with_id(xlam), xlam.detect, aliases=("apigen",)),
    DataFormat("glaive", "Glaive function-calling v2: system + chat", _with_id(glaive), glaive.detect),
    DataFormat(
        "toolace", "ToolACE: system with tools + conversations, [Api(a=1)] calls", _with_id(toolace), toolace.detect
    ),
    DataFormat(
        "sharegpt",
        "ShareGPT conversations: Hermes function-calling, APIGen-MT, the release's SFT rows",
        _with_id(sharegpt),
        sharegpt.detect,
        aliases=("hermes", "apigen-mt"),
    ),
    DataFormat("tau2", "τ²-Bench tasks: tau2:DOMAIN[:SPLIT] (train split by default)", _tau2),
)
BENCHMARK_SOURCES = {bfcl.SOURCE_PREFIX: "bfcl", tau2.SOURCE_PREFIX: "tau2"}


def format_names() -> list[str]:
    return [f.name for f in FORMATS]


def get_format(name: str) -> DataFormat:
    """A format by name or alias; ``ValueError`` listing the known ones."""
    key = name.strip().lower()
    for data_format in FORMATS:
        if key == data_format.name or key in data_format.aliases:
            return data_format
    raise ValueError(f"unknown data format {name!r}; known: {AUTO}, {', '.join(format_names())}")


def detect_format(row: Any) -> DataFormat | None:
    if not isinstance(row, dict):
        return None
    return next((f for f in FORMATS if f.detect is not None and f.detect(row)), None)


__all__ = ["AUTO", "BENCHMARK_SOURCES", "FORMATS", "DataFormat", "RowContext", "detect_format", "get_format"]
