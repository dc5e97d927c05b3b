"""BFCL questions and possible answers, as evaluation tasks (never training data).

Two sources: the ``bfcl-eval`` package's own data (``bfcl:simple_python,multiple``), read by
:func:`slca_grpo.data.bfcl.entries.load_entries`, or a local question file (``BFCL_v3_simple.json``: one
``{"id", "question", "function"}`` per line) whose answers sit in ``possible_answer/`` beside it
under the same name (or inline as ``ground_truth``). Each single-turn entry becomes a task as the
BFCL harness shows it: the docs with bfcl-eval's language hints as tools (dotted names made valid,
``metadata["tool_names"]`` maps them back), the first allowed value of each gold parameter as the
gold call (optional ones omitted), ``irrelevance`` entries as tasks where no call is expected.
Multi-turn entries run against BFCL's Python backends and are scored by ``slca eval bfcl``.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

from slca_grpo.data.bfcl.convert import docs_to_tools, exposed_names
from slca_grpo.data.bfcl.entries import BFCLEntry, is_multi_turn, load_entries, resolve_categories
from slca_grpo.data.bfcl.gold import gold_single_turn_calls
from slca_grpo.data.bfcl.package import load_bfcl
from slca_grpo.data.formats.fields import require
from slca_grpo.data.records import iter_rows
from slca_grpo.data.tasks import TaskFormatError, task_from_dict
from slca_grpo.datatypes import SUBSET_IRRELEVANT, SUBSET_TOOL_CALL, Task

SOURCE_PREFIX = "bfcl:"
ANSWER_FOLDER = "possible_answer"
NO_CALL_CATEGORIES = ("irrelevance", "live_irrelevance")


def detect(row: dict[str, Any]) -> bool:
    return "question" in row and "function" in row


def entry_task(entry: Any) -> Task:
    """The evaluation task of a :class:`~slca_grpo.data.bfcl.entries.BFCLEntry`."""
    if entry.multi_turn:
        raise TaskFormatError(
            "a multi-turn BFCL entry runs against BFCL's own backends: score it with `slca eval bfcl`",
            field="question",
        )
    names = exposed_names(entry.prompt_functions)
    irrelevant = entry.category in NO_CALL_CATEGORIES
    calls = [] if irrelevant else gold_single_turn_calls(entry)
    metadata: dict[str, Any] = {"eval_only": True, "bfcl": {"id": entry.id, "category": entry.category}}
    renamed = {new: old for old, new in names.items() if old != new}
    if renamed:
        metadata["tool_names"] = renamed
    if not irrelevant:
        metadata["bfcl"]["ground_truth"] = entry.ground_truth
    return task_from_dict(
        {
            "id": entry.id,
            "messages": [dict(message) for turn in entry.question for message in turn],
            "tools": docs_to_tools(entry.prompt_functions, names),
            "gold_calls": [[{"name": names.get(c.name, c.name), "arguments": c.arguments} for c in calls]]
            if calls
            else [],
            "subset": SUBSET_IRRELEVANT if irrelevant else SUBSET_TOOL_CALL,
            "metadata": metadata,
        }
    )


@functools.lru_cache(maxsize=8)
def _answers(path: str) -> dict[str, Any]:
    """id → ground truth of the answer file that sits beside a question file (empty when absent)."""
    answer_file = Path(path).parent / ANSWER_FOLDER / Path(path).name
    if not answer_file.is_file():
        return {}
    answers = {}
    for row in iter_rows(answer_file):  # bounded lines, as for the questions
        try:
            answers[str(row.value["id"])] = row.value["ground_truth"]
        except (KeyError, TypeError):
            detail = f" ({row.problem})" if row.problem else ""
            raise TaskFormatError(f"not a BFCL answer line{detail}", answer_file, row.where) from None
    return answers


def convert(row: dict[str, Any], path: str) -> Task:
    """A local BFCL question row (``path`` is its file, to find the answers beside it)."""
    entry_id = str(require(row, "id", (str, int)))
    question = require(row, "question", list)
    functions = require(row, "function", list)
    category = entry_id.rsplit("_", 1)[0]
    ground_truth = row.get("ground_truth")
    if ground_truth is None and category not in NO_CALL_CATEGORIES and not is_multi_turn(category):
        ground_truth = _answers(str(path)).get(entry_id)
        if ground_truth is None:
            raise TaskFormatError(f"no possible answer for {entry_id!r} (looked in {ANSWER_FOLDER}/)", field="id")
    if not all(isinstance(turn, list) and all(isinstance(m, dict) for m in turn) for turn in question):
        raise TaskFormatError("must be a list of turns, each a list of messages", field="question")
    hinted = load_bfcl().add_language_hints([{"id": entry_id, "function": copy.deepcopy(functions)}])[0]["function"]
    entry = BFCLEntry(
        id=entry_id,
        category=category,
        question=question,
        functions=functions,
        prompt_functions=hinted,
        ground_truth=ground_truth or [],
        raw=row,
    )
    return entry_task(entry)


def iter_entries(spec: str):
    """``(label, entry)`` for each entry of the categories in ``bfcl:CATEGORY[,CATEGORY...]``."""
    for category in resolve_categories([spec.removeprefix(SOURCE_PREFIX)]):
        for entry in load_entries(category):
            yield f"entry {entry.id}", entry
