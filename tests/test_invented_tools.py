"""Invented tools: valid schemas, calls that only the schema explains, and disguised suite tools."""

from __future__ import annotations

import json
import random
import re

import jsonschema
import pytest

from slca_grpo.data.corpus import CorpusConfig, document, invented_document
from slca_grpo.data.invented_tools import disguise, invented_tool
from slca_grpo.data.synthetic import generate_tasks, gold_messages


def _tools(text: str) -> dict[str, dict]:
    block = text.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0]
    return {t["function"]["name"]: t["function"] for t in map(json.loads, block.splitlines())}


def _turns(text: str) -> list[tuple[str, str]]:
    return re.findall(r"<\|im_start\|>(\w+)\n(.*?)<\|im_end\|>", text, flags=re.S)


def _calls(body: str) -> list[dict]:
    calls = []
    for block in re.findall(r"<tool_call>\n(.*?)\n</tool_call>", body, flags=re.S):
        parsed = json.loads(block)
        calls += parsed if isinstance(parsed, list) else [parsed]
    return calls


def _leaves(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


@pytest.mark.parametrize("seed", range(3))
def test_invented_schemas_are_valid_and_sampled_arguments_fit_them(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(60):
        tool = invented_tool(rng)
        parameters = tool.schema()["function"]["parameters"]
        jsonschema.Draft202012Validator.check_schema(parameters)
        for _ in range(3):
            jsonschema.validate(tool.sample_arguments(rng), parameters)
        assert len({p.name for p in tool.params}) == len(tool.params)


def test_every_invented_call_is_valid_and_its_values_come_from_the_conversation() -> None:
    config = CorpusConfig()
    variants = {"call": 0, "two_step": 0, "refusal": 0}
    for index in range(150):
        text = invented_document(random.Random(index), config)
        tools = _tools(text)
        assert config.tools_per_task[0] <= len(tools) <= config.tools_per_task[1]
        turns = _turns(text)
        request = turns[1][1]
        seen = request
        calls = [call for role, body in turns[2:] if role == "assistant" for call in _calls(body)]
        variants["refusal" if not calls else "two_step" if len(_turns(text)) > 6 else "call"] += 1
        for role, body in turns[2:]:
            for call in _calls(body) if role == "assistant" else []:
                jsonschema.validate(call["arguments"], tools[call["name"]]["parameters"])
                for value in _leaves(call["arguments"]):
                    written = (
                        {True: "yes", False: "no"}.get(value, str(value)) if isinstance(value, bool) else str(value)
                    )
                    assert written in seen, (written, text)
            seen += body  # a later call may copy from a tool response
    assert all(count >= 10 for count in variants.values()), variants


def test_disguise_renames_every_tool_consistently_and_keeps_descriptions() -> None:
    rng = random.Random(0)
    for task in generate_tasks(0, 40, "train"):
        original = gold_messages(task)
        before = json.dumps([original, task.tools])
        messages, tools = disguise(original, task.tools, rng, rename_params=0.7)
        assert json.dumps([original, task.tools]) == before  # inputs untouched
        old = {t["function"]["name"] for t in task.tools}
        new = {t["function"]["name"]: t["function"] for t in tools}
        assert not old & set(new) and len(new) == len(old)
        assert sorted(t["function"]["description"] for t in tools) == sorted(
            t["function"]["description"] for t in task.tools
        )
        for function in new.values():
            assert set(function["parameters"].get("required", [])) <= set(function["parameters"]["properties"])
        for message in messages:
            for call in message.get("tool_calls") or []:
                function = call["function"]
                assert set(function["arguments"]) <= set(new[function["name"]]["parameters"]["properties"])
                jsonschema.validate(function["arguments"], new[function["name"]]["parameters"])
            if message.get("role") == "tool":
                assert message["name"] in new


def test_task_documents_offer_only_disguised_tools() -> None:
    config = CorpusConfig(warmup_docs=0)
    catalogue = {t["function"]["name"] for task in generate_tasks(1, 200, "train") for t in task.tools}
    docs = [text for kind, text in (document(i, config) for i in range(80)) if kind == "task"]
    assert len(docs) >= 20
    for text in docs:
        assert not set(_tools(text)) & catalogue
