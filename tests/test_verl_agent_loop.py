"""Our verl agent loop on verl's real ToolAgentLoop, with a scripted LLM server and our tokenizer."""

from __future__ import annotations

import asyncio
import copy
import json
import logging

import pytest
import torch
from chat_templates import HEADER_JSON, HEADER_JSON_SPECIALS
from verl_helpers import (
    ScriptedServer,
    make_agent_loop,
    row_kwargs,
    run_rollout,
    single_call_tasks,
    verl_config,
    verl_tokenizer,  # noqa: F401  (fixture)
)

from slca_grpo.algos import SEG_NONE, SEG_SUMMARY, SEG_TOOL
from slca_grpo.chat import render_tool_calls
from slca_grpo.chat.formatter import ChatFormatter
from slca_grpo.chat.template import IM_END, IM_START
from slca_grpo.data.tasks import TaskFormatError
from slca_grpo.datatypes import Task
from slca_grpo.integrations.verl.advantages import rollout_segments
from slca_grpo.integrations.verl.agent_loop import (
    CALLS_FIELD,
    ERRORS_FIELD,
    SLCAToolParser,
    _warn_unless_hermes_calls,
)
from slca_grpo.integrations.verl.reward import RESPONSE_TEXT_FIELD
from slca_grpo.rollout.environment import find_fixture
from slca_grpo.simulator import build_simulator
from slca_grpo.simulator.service import create_app
from slca_grpo.simulator.text import truncate_middle_to_tokens

ANSWER = "Here is what I found for you in the tool results."


@pytest.fixture(scope="module")
def config():
    return verl_config()


@pytest.fixture(scope="module")
def task():
    return single_call_tasks(1)[0]


def runs(mask: list[int]) -> list[tuple[int, int, int]]:
    """(value, start, end) of each maximal run of equal values."""
    out, start = [], 0
    for i in range(1, len(mask) + 1):
        if i == len(mask) or mask[i] != mask[start]:
            out.append((mask[start], start, i))
            start = i
    return out


def test_call_then_answer_gives_exact_masks_segments_and_our_prompt(config, verl_tokenizer, task):
    gold = task.flat_gold_calls[0]
    call_turn = render_tool_calls([gold]) + IM_END
    answer_turn = ANSWER + IM_END
    output, server = run_rollout(
        config,
        verl_tokenizer,
        lambda turn: call_turn if turn == 0 else answer_turn,
        row_kwargs(task, 0, "u0", 0),
    )
    encode = lambda text: verl_tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    # The prompt is the one our own trainer builds for the task (same template, same tool schemas).
    assert output.prompt_ids == ChatFormatter(verl_tokenizer).task_prompt_ids(task)
    assert server.prompts[0] == output.prompt_ids

    call_ids, answer_ids = encode(call_turn), encode(answer_turn)
    mask = output.response_mask
    assert [value for value, _, _ in runs(mask)] == [1, 0, 1]
    (_, _, call_end), (_, gap_start, gap_end), (_, answer_start, _) = runs(mask)
    assert output.response_ids[:call_end] == call_ids
    assert output.response_ids[answer_start:] == answer_ids
    fixture = find_fixture(task, gold)
    injected = verl_tokenizer.decode(output.response_ids[gap_start:gap_end], skip_special_tokens=False)
    assert injected == (
        f"\n{IM_START}user\n<tool_response>\n{fixture}\n</tool_response>{IM_END}\n{IM_START}assistant\n"
    )
    # The second turn saw everything before it.
    assert server.prompts[1] == output.prompt_ids + output.response_ids[:answer_start]

    segments = rollout_segments("slca", torch.tensor([mask]))[0].tolist()
    assert segments == [SEG_TOOL] * len(call_ids) + [SEG_NONE] * (gap_end - gap_start) + [SEG_SUMMARY] * len(answer_ids)
    fields = output.extra_fields
    assert fields[RESPONSE_TEXT_FIELD] == verl_tokenizer.decode(output.response_ids, skip_special_tokens=False)
    assert (fields[CALLS_FIELD], fields[ERRORS_FIELD]) == (1, 0)


def test_a_prompt_with_earlier_calls_renders_them_as_our_trainer_does(config, verl_tokenizer, task):
    earlier = task.flat_gold_calls[0]
    history = Task(
        id="with-history",
        messages=[
            *task.messages,
            {"role": "assistant", "content": "", "tool_calls": [earlier.to_dict()]},
            {"role": "tool", "content": find_fixture(task, earlier)},
            {"role": "user", "content": "Thanks. Once more, please."},
        ],
        tools=task.tools,
        gold_calls=task.gold_calls,
        metadata=task.metadata,
    )
    output, _ = run_rollout(config, verl_tokenizer, lambda turn: ANSWER + IM_END, row_kwargs(history, 0, "u0", 2))
    assert output.prompt_ids == ChatFormatter(verl_tokenizer).task_prompt_ids(history)


def test_answer_without_call_is_one_summary_segment(config, verl_tokenizer, task):
    output, server = run_rollout(config, verl_tokenizer, lambda turn: ANSWER + IM_END, row_kwargs(task, 0, "u0", 1))
    assert len(server.prompts) == 1
    assert set(output.response_mask) == {1}
    segments = rollout_segments("slca", torch.tensor([output.response_mask]))[0]
    assert set(segments.tolist()) == {SEG_SUMMARY}
    assert output.extra_fields[CALLS_FIELD] == 0


def test_calls_go_to_the_simulator_service_under_one_session_per_rollout(verl_tokenizer, task):
    from simulator_helpers import running_app

    simulator = build_simulator()
    call = task.flat_gold_calls[0]
    turns = [render_tool_calls([call]) + IM_END, render_tool_calls([call]) + IM_END, ANSWER + IM_END]
    with running_app(create_app(simulator)) as url:
        config = verl_config(f"+slca.simulator_service.url={url}", "+slca.use_fixtures=false")
        output, server = run_rollout(config, verl_tokenizer, lambda turn: turns[turn], row_kwargs(task, 3, "u7", 2))
    assert len(server.prompts) == 3
    assert simulator.stats.calls == 2
    assert simulator.sessions.reset("u7-2")  # the rollout's session exists on the service
    assert output.extra_fields[CALLS_FIELD] == 2


def test_long_tool_responses_are_cut_to_the_token_limit(verl_tokenizer, task):
    gold = task.flat_gold_calls[0]
    long_task = json.loads(json.dumps(task.to_dict()))
    long_task["metadata"]["fixtures"] = [{"name": gold.name, "arguments": gold.arguments, "response": "word " * 400}]
    kwargs = row_kwargs(task, 0, "u1", 0)
    kwargs["extra_info"] = {**kwargs["extra_info"], "task": json.dumps(long_task)}
    config = verl_config("+slca.max_tool_response_tokens=30")
    turns = [render_tool_calls([gold]) + IM_END, ANSWER + IM_END]
    output, _ = run_rollout(config, verl_tokenizer, lambda turn: turns[turn], kwargs)
    count = lambda text: len(verl_tokenizer.encode(text, add_special_tokens=False))  # noqa: E731
    expected = truncate_middle_to_tokens("word " * 400, 30, count)
    assert count(expected) <= 30
    assert f"<tool_response>\n{expected}\n</tool_response>" in output.extra_fields[RESPONSE_TEXT_FIELD]


def test_parser_reads_blocks_and_parallel_lists_and_skips_malformed_ones(verl_tokenizer):
    one = '<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>'
    parallel = '<tool_call>\n[{"name": "b", "arguments": {}}, {"name": "c", "arguments": "{\\"y\\": 2}"}]\n</tool_call>'
    broken = "<tool_call>\n{not json}\n</tool_call>"
    parser = SLCAToolParser(verl_tokenizer)
    ids = verl_tokenizer.encode(f"Let me check. {one}{broken}{parallel}{IM_END}", add_special_tokens=False)
    content, calls = asyncio.run(parser.extract_tool_calls(ids))
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("a", {"x": 1}), ("b", {}), ("c", {"y": 2})]
    assert "<tool_call>" not in content and content.startswith("Let me check.")


def test_a_row_without_our_task_is_a_clear_error(config, verl_tokenizer, task):
    kwargs = row_kwargs(task, 5, "u0", 0)
    kwargs["extra_info"] = {"index": 5}
    server = ScriptedServer(verl_tokenizer, lambda turn: ANSWER)

    async def main():
        return await make_agent_loop(config, verl_tokenizer, server).run({}, **kwargs)

    with pytest.raises(TaskFormatError, match="row 5 has no extra_info.task"):
        asyncio.run(main())


def test_a_model_that_writes_calls_in_another_syntax_is_warned_about(verl_tokenizer, caplog):
    llama_like = copy.deepcopy(verl_tokenizer)
    llama_like.add_special_tokens({"additional_special_tokens": HEADER_JSON_SPECIALS})
    llama_like.chat_template = HEADER_JSON
    with caplog.at_level(logging.WARNING, logger="slca_grpo.integrations.verl.agent_loop"):
        _warn_unless_hermes_calls(verl_tokenizer)  # the Hermes template: the syntax the loop reads
        _warn_unless_hermes_calls(llama_like)
        _warn_unless_hermes_calls(llama_like)  # once per template
    assert [r.getMessage() for r in caplog.records if "verl agent loop reads only Hermes" in r.getMessage()] == [
        "the model's chat template writes tool calls in the llama3_json syntax; the verl agent loop reads only "
        "Hermes <tool_call> blocks, so none of its calls would run (docs/verl.md)"
    ]
