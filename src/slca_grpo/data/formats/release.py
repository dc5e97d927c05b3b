"""The paper's released datasets (SLCA-GRPO-Datasets, Toucan-derived): verl-style Parquet rows.

RL/eval rows carry ``prompt`` (chat messages), ``tools`` and ``reward_model.ground_truth`` =
``{allowed_tools, gold_tool_calls, question_content, tool_schemas, subset_name}`` (the ground
truth, ``tools`` and ``tool_schemas`` may be JSON strings); ``gold_tool_calls`` is steps × parallel
calls, or flat tool names when a row records names only (then ``metadata["gold_arguments"]`` is
False: argument matching has nothing to compare). When ``extra_info.task`` holds a dump of our own
task (as the verl row writer stores it), that task is read back whole. SFT rows carry a ShareGPT
``conversations`` column instead and are read as :mod:`~slca_grpo.data.formats.sharegpt` rows.
"""

from __future__ import annotations

from typing import Any

from slca_grpo.data.formats import sharegpt
from slca_grpo.data.formats.fields import json_field, require, tool_list
from slca_grpo.data.tasks import TaskFormatError, task_from_dict
from slca_grpo.datatypes import SUBSET_IRRELEVANT, SUBSET_TOOL_CALL, SUBSETS, Task, ToolCall, tool_name

GROUND_TRUTH = "reward_model.ground_truth"


def detect(row: dict[str, Any]) -> bool:
    return "prompt" in row and "reward_model" in row


def _gold(raw: Any) -> tuple[list[list[dict[str, Any]]], bool]:
    """(steps of calls, whether arguments are known) of ``gold_tool_calls``."""
    field = f"{GROUND_TRUTH}.gold_tool_calls"
    steps_raw = json_field(raw, field, (list, type(None))) or []
    steps, names_only = [], False
    for i, step in enumerate(steps_raw):
        items = step if isinstance(step, list) else [step]
        if not items:
            raise TaskFormatError("an empty step", field=f"{field}[{i}]")
        calls: list[ToolCall] = []
        for j, item in enumerate(items):
            where = f"{field}[{i}][{j}]" if isinstance(step, list) else f"{field}[{i}]"
            if isinstance(item, str) and item.strip():
                names_only = True
                calls.append(ToolCall(item.strip()))
            else:
                calls.extend(sharegpt.calls_of(item, where))
        steps.append([c.to_dict() for c in calls])
    return steps, not names_only


def _prompt(raw: Any) -> tuple[list[dict[str, Any]], str | None]:
    """The prompt's messages (a system ``<tools>`` listing cut out) and that listing."""
    messages = json_field(raw, "prompt", list)
    out, listing = [], None
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise TaskFormatError(f"a message must be an object, got {type(message).__name__}", field=f"prompt[{i}]")
        message = {k: v for k, v in message.items() if v is not None}
        if message.get("role") == "system" and isinstance(message.get("content"), str):
            message["content"], found = sharegpt.split_tools_block(message["content"])
            listing = found if found is not None else listing
            if not message["content"]:
                continue  # it held only the tool listing, which the chat template renders anew
        out.append(message)
    return out, listing


def convert(row: dict[str, Any], task_id: str) -> Task:
    if "prompt" not in row and "conversations" in row:
        return sharegpt.convert(row, task_id)
    extra = json_field(row.get("extra_info"), "extra_info", (dict, type(None))) or {}
    if extra.get("task") is not None:
        try:
            return task_from_dict(json_field(extra["task"], "extra_info.task", dict))
        except TaskFormatError as exc:
            raise TaskFormatError(exc.problem, field=exc.field or "extra_info.task") from None
    reward_model = require(row, "reward_model", (dict, str))
    reward_model = json_field(reward_model, "reward_model", dict)
    truth = json_field(reward_model.get("ground_truth"), GROUND_TRUTH, dict)
    messages, listing = _prompt(require(row, "prompt", (list, str)))
    if row.get("tools") not in (None, "", []):
        tools = tool_list(row["tools"], "tools")
    elif truth.get("tool_schemas") not in (None, "", []):
        tools = tool_list(truth["tool_schemas"], f"{GROUND_TRUTH}.tool_schemas")
    else:
        tools = tool_list(sharegpt.parse_tools_text(listing or "", "prompt[0].content"), "<tools>")
    question = truth.get("question_content")
    if isinstance(question, str) and question.strip() and not any(m.get("role") == "user" for m in messages):
        messages.append({"role": "user", "content": question})
    gold, arguments_known = _gold(truth.get("gold_tool_calls"))
    subset = truth.get("subset_name") or (SUBSET_TOOL_CALL if gold else SUBSET_IRRELEVANT)
    if subset not in SUBSETS:
        raise TaskFormatError(
            f"must be one of {', '.join(SUBSETS)}, got {subset!r}", field=f"{GROUND_TRUTH}.subset_name"
        )
    metadata: dict[str, Any] = {}
    allowed = truth.get("allowed_tools")
    if allowed is not None:
        allowed = json_field(allowed, f"{GROUND_TRUTH}.allowed_tools", list)
        names = {tool_name(t) for t in tools}
        missing = [a for a in allowed if a not in names]
        if missing:
            raise TaskFormatError(f"{missing[0]!r} is not among the row's tools", field=f"{GROUND_TRUTH}.allowed_tools")
        if set(allowed) != names:
            metadata["allowed_tools"] = list(allowed)
    if not arguments_known:
        metadata["gold_arguments"] = False
    if isinstance(row.get("data_source"), str):
        metadata["data_source"] = row["data_source"]
    if isinstance(extra.get("task_id"), (str, int)) and str(extra["task_id"]):
        task_id = str(extra["task_id"])
    return task_from_dict(
        {
            "id": task_id,
            "messages": messages,
            "tools": tools,
            "gold_calls": gold,
            "subset": subset,
            "metadata": metadata,
        }
    )
