"""Our task rows (docs/method.md §2): validating one and writing JSONL files of them (reading them:
:func:`slca_grpo.data.loader.load_tasks`).

A bad row raises ``TaskFormatError`` naming the file, the line and the problem, or, with
``on_error="skip"``, is skipped and counted in the returned ``LoadReport``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from slca_grpo.data.output import atomic_text
from slca_grpo.datatypes import SUBSET_IRRELEVANT, SUBSETS, Task, ToolCall, tool_name

MESSAGE_ROLES = ("system", "user", "assistant", "tool")


class TaskFormatError(ValueError):
    """A row that does not match its format; ``str()`` names the file, the row and the field.

    ``line`` is a line number (JSON Lines) or a label such as ``"row 12"`` (JSON arrays, Parquet);
    ``field`` is the row's field at fault (``"tools[2].parameters"``), when one is.
    """

    def __init__(
        self,
        problem: str,
        path: str | os.PathLike[str] | None = None,
        line: int | str | None = None,
        *,
        field: str | None = None,
    ):
        self.problem = problem
        self.path = None if path is None else str(path)
        self.line = line
        self.field = field
        where = "" if self.path is None else (f"{self.path}: " if line is None else f"{self.path}:{line}: ")
        super().__init__(f"{where}{field + ': ' if field else ''}{problem}")

    def located(self, path: str | os.PathLike[str], line: int | str | None) -> TaskFormatError:
        """The same problem, placed in a file and row (unless it already names its own, e.g. a
        benchmark's answer file read for the row)."""
        if self.path is not None:
            return self
        return type(self)(self.problem, path, line, field=self.field)


@dataclass
class LoadReport:
    tasks: list[Task] = field(default_factory=list)
    skipped: int = 0
    errors: list[str] = field(default_factory=list)  # messages of skipped rows, file:line first (the first 1000)
    rows: int = 0  # rows read, good and bad
    formats: dict[str, str] = field(default_factory=dict)  # file (or benchmark source) -> format read


def _require(condition: bool, problem: str) -> None:
    if not condition:
        raise TaskFormatError(problem)


def _parse_call(raw: Any, where: str) -> ToolCall:
    _require(isinstance(raw, dict), f"{where}: a call must be an object with 'name' and 'arguments'")
    name = raw.get("name")
    _require(isinstance(name, str) and bool(name), f"{where}: 'name' must be a non-empty string")
    arguments = raw.get("arguments", raw.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            raise TaskFormatError(f"{where}: 'arguments' string is not JSON") from None
    _require(isinstance(arguments, dict), f"{where}: 'arguments' must be an object")
    return ToolCall(name=name, arguments=arguments)


def _parse_gold(raw: Any) -> list[list[ToolCall]]:
    _require(isinstance(raw, list), "'gold_calls' must be a list of steps")
    steps: list[list[ToolCall]] = []
    for i, step in enumerate(raw):
        # A bare call object is accepted as a step of one call.
        items = step if isinstance(step, list) else [step]
        _require(bool(items), f"gold_calls[{i}] is an empty step")
        steps.append([_parse_call(item, f"gold_calls[{i}][{j}]") for j, item in enumerate(items)])
    return steps


def _check_tools(tools: Any) -> list[dict[str, Any]]:
    _require(isinstance(tools, list), "'tools' must be a list of tool schemas")
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        name = tool_name(tool) if isinstance(tool, dict) else None
        _require(name is not None, f"tools[{i}] has no function name")
        _require(name not in seen, f"tools[{i}]: duplicate tool name '{name}'")
        seen.add(name)
        function = tool.get("function", tool)
        parameters = function.get("parameters", {"type": "object"})
        _require(isinstance(parameters, dict), f"tools[{i}] ('{name}'): 'parameters' must be an object")
    return tools


def _check_messages(messages: Any) -> list[dict[str, Any]]:
    _require(isinstance(messages, list) and bool(messages), "'messages' must be a non-empty list")
    for i, message in enumerate(messages):
        _require(isinstance(message, dict), f"messages[{i}] must be an object")
        role = message.get("role")
        _require(role in MESSAGE_ROLES, f"messages[{i}]: role must be one of {', '.join(MESSAGE_ROLES)}, got {role!r}")
        content = message.get("content")
        _require(content is None or isinstance(content, str), f"messages[{i}]: 'content' must be a string")
    _require(any(m.get("role") == "user" for m in messages), "'messages' holds no user turn")
    return messages


def _check_unicode(value: Any, where: str) -> None:
    # JSON may carry a lone surrogate ("\ud800"): valid JSON, but no tokenizer or file can take it.
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            problem = f"text that is not valid Unicode ({value[exc.start]!r} at character {exc.start})"
            raise TaskFormatError(f"{where}: {problem}") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_unicode(key, where)
            _check_unicode(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_unicode(item, f"{where}[{index}]")


def task_from_dict(data: Any) -> Task:
    """Validate one task object; raises ``TaskFormatError`` (without a location) on a problem."""
    _require(isinstance(data, dict), "a task must be a JSON object")
    _check_unicode(data, "")
    task_id = data.get("id")
    _require(
        isinstance(task_id, (str, int)) and not isinstance(task_id, bool) and str(task_id) != "",
        "'id' must be a non-empty string",
    )
    messages = _check_messages(data.get("messages"))
    tools = _check_tools(data.get("tools", []))
    gold = _parse_gold(data.get("gold_calls", []))
    subset = data.get("subset", SUBSET_IRRELEVANT if not gold else SUBSETS[0])
    _require(subset in SUBSETS, f"'subset' must be one of {', '.join(SUBSETS)}, got {subset!r}")
    if subset == SUBSET_IRRELEVANT:
        _require(not gold, "an 'irrelevant' task must have no gold calls")
    names = {tool_name(t) for t in tools}
    for step in gold:
        for call in step:
            _require(call.name in names, f"gold call '{call.name}' is not among the task's tools")
    reference = data.get("reference_answer")
    _require(reference is None or isinstance(reference, str), "'reference_answer' must be a string")
    metadata = data.get("metadata", {})
    _require(isinstance(metadata, dict), "'metadata' must be an object")
    return Task(
        id=str(task_id),
        messages=messages,
        tools=tools,
        gold_calls=gold,
        subset=subset,
        reference_answer=reference,
        metadata=metadata,
    )


@lru_cache(maxsize=4096)
def task_from_json(text: str) -> Task:
    """``task_from_dict`` of a JSON string, cached by the string: the rows of a rollout group (and
    their rewards) all read one. Callers must not change the returned task."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise TaskFormatError(f"not JSON: {str(exc)[:200]}") from None
    return task_from_dict(data)


def task_from_value(raw: Any) -> Task:
    """A task a dataset row carries: its JSON string (cached, :func:`task_from_json`) or an object."""
    if isinstance(raw, Mapping):
        return task_from_dict(dict(raw))
    if not isinstance(raw, str):
        raise TaskFormatError(f"must be a JSON string, got {type(raw).__name__}")
    return task_from_json(raw)


def task_line(task: Task) -> str:
    """One JSONL line of a task, newline included."""
    return json.dumps(task.to_dict(), ensure_ascii=False) + "\n"


def write_tasks(tasks: Iterable[Task], path: str | os.PathLike[str]) -> int:
    """Write tasks as JSONL (atomically, or through a device or pipe: data/output.py); returns the count."""
    count = 0
    with atomic_text(path) as handle:
        for task in tasks:
            handle.write(task_line(task))
            count += 1
    return count
