"""The execution reward R_tool (docs/method.md §4), with hand-computed values."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tool_schemas import string_tool

from slca_grpo.chat import parse_tool_calls
from slca_grpo.datatypes import Task, ToolCall
from slca_grpo.rewards import ExecutionWeights, execution_reward, name_f1, parse_for_task

TOOLS = [
    string_tool("get_weather", "city", "unit", description="get_weather"),
    string_tool("get_time", "city", description="get_time"),
    string_tool("search_flights", "origin", "destination", description="search_flights"),
]


def weather_task(gold=None, subset="tool_call") -> Task:
    if gold is None:
        gold = [
            [ToolCall("get_weather", {"city": "Paris", "unit": "celsius"}), ToolCall("get_time", {"city": "Paris"})]
        ]
    return Task(
        id="t1",
        messages=[{"role": "user", "content": "Weather and time in Paris?"}],
        tools=TOOLS,
        gold_calls=gold,
        subset=subset,
    )


def block(*calls: dict | str) -> str:
    body = calls[0] if len(calls) == 1 else list(calls)
    return f"<tool_call>{body if isinstance(body, str) else json.dumps(body)}</tool_call>"


W_PARIS = {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
T_PARIS = {"name": "get_time", "arguments": {"city": "Paris"}}


def test_perfect_parallel_block_scores_one():
    # fmt 1/1, nameF1 1, key (1+1)/2, value (1+1)/2, parallel: 2 calls == 2 gold calls in step 1.
    r = execution_reward(block(W_PARIS, T_PARIS), weather_task())
    assert (r.fmt, r.name_f1, r.key, r.value, r.parallel) == (1.0, 1.0, 1.0, 1.0, 1.0)
    assert r.total == pytest.approx(1.0)
    assert r.arg_match == 1.0


def test_sequential_blocks_loose_values_and_extra_key():
    text = block({"name": "get_weather", "arguments": {"city": "paris", "unit": "Celsius "}}) + block(
        {"name": "get_time", "arguments": {"city": "Paris", "tz": "CET"}}
    )
    r = execution_reward(text, weather_task())
    # fmt = 2 valid / max(2, 2) = 1; nameF1 = 1
    # weather: keys {city,unit} vs {city,unit} → 1; values both loose-equal → 1
    # time: keys {city} vs {city,tz} → 1/2; value 1/1 → 1
    # key = (1 + 0.5)/2 = 0.75; value = 1; parallel: first block has 1 call, gold step 2 → 0
    assert r.fmt == 1.0 and r.name_f1 == 1.0
    assert r.key == pytest.approx(0.75) and r.value == 1.0 and r.parallel == 0.0
    # 0.10·1 + 0.25·1 + 0.15·0.75 + 0.20·1 + 0.30·0 = 0.6625
    assert r.total == pytest.approx(0.6625)


def test_invalid_blocks_and_partial_arguments():
    text = (
        "<tool_call>{bad json</tool_call>"
        + block({"name": "get_news", "arguments": {}})  # not a task tool → invalid
        + block({"name": "get_weather", "arguments": {"city": "Paris", "unit": "fahrenheit"}})
    )
    r = execution_reward(text, weather_task())
    # fmt = 1 valid / max(3, 3) = 1/3
    # predicted names [get_weather], gold [get_weather, get_time]: F1 = 2·1/(1+2) = 2/3
    # weather: key 1, value 1/2; time: unmatched → (0, 0); key = 1/2, value = 1/4
    # parallel: first valid block 1 call vs 2 → 0
    assert r.fmt == pytest.approx(1 / 3)
    assert r.name_f1 == pytest.approx(2 / 3)
    assert (r.key, r.value, r.parallel) == (0.5, 0.25, 0.0)
    # 0.1/3 + 0.25·2/3 + 0.15·0.5 + 0.2·0.25 = 0.0333… + 0.1666… + 0.075 + 0.05 = 0.325
    assert r.total == pytest.approx(0.325)


def test_unbalanced_tags_lower_fmt():
    text = block(W_PARIS) + '<tool_call>{"name": "get_time", "arguments": {"city": "Paris"}}'
    r = execution_reward(text, weather_task())
    # 1 valid block / max(open 2, close 1) = 0.5
    assert r.fmt == 0.5
    assert r.name_f1 == pytest.approx(2 / 3)  # only the closed block's call counts


def test_greedy_match_picks_the_best_candidate_of_the_same_name():
    task = weather_task(gold=[[ToolCall("get_weather", {"city": "Paris", "unit": "celsius"})]])
    text = block({"name": "get_weather", "arguments": {"city": "London", "unit": "celsius"}}) + block(W_PARIS)
    r = execution_reward(text, task)
    # candidates: London (key 1 + value 0.5 = 1.5) and Paris (1 + 1 = 2) → Paris
    assert (r.key, r.value) == (1.0, 1.0)
    # nameF1: pred [w, w], gold [w] → 2·1/3
    assert r.name_f1 == pytest.approx(2 / 3)


def test_each_prediction_is_used_once():
    gold = [[ToolCall("get_weather", {"city": "Paris"})], [ToolCall("get_weather", {"city": "Rome"})]]
    r = execution_reward(block({"name": "get_weather", "arguments": {"city": "Paris"}}), weather_task(gold))
    # Paris gets the only prediction (1, 1); Rome has none left → (0, 0); averages 1/2, 1/2
    assert (r.key, r.value) == (0.5, 0.5)
    # parallel: first gold step has 1 call, first block 1 call → 1
    assert r.parallel == 1.0


def test_no_gold_arguments_gives_full_key_value_even_without_predictions():
    # The paper's order (docs/method.md §4): "1 when no gold call has arguments" is applied before
    # "0 when nothing predicted".
    task = weather_task(gold=[[ToolCall("get_time", {})]])
    r = execution_reward("I do not know.", task)
    assert (r.fmt, r.name_f1, r.key, r.value, r.parallel) == (0.0, 0.0, 1.0, 1.0, 0.0)
    assert r.total == pytest.approx(0.35)  # 0.15 + 0.20


def test_nothing_predicted_with_gold_arguments_is_zero():
    r = execution_reward("<tool_call>not json</tool_call>", weather_task())
    # fmt 0/1, F1 0 (pred empty), key/value 0 (nothing predicted), parallel 0 (no valid block)
    assert r.total == 0.0


def test_irrelevant_task_abstention_and_call():
    task = weather_task(gold=[], subset="irrelevant")
    abstain = execution_reward("Sorry, none of my tools can do that.", task)
    # fmt 0 (no tags), F1 1 (both empty), key/value 1 (no gold arguments), parallel 1 (both empty)
    assert (abstain.fmt, abstain.name_f1, abstain.key, abstain.value, abstain.parallel) == (0, 1, 1, 1, 1)
    assert abstain.total == pytest.approx(0.9)
    called = execution_reward(block(W_PARIS), task)
    # fmt 1, F1 0, key/value 1, parallel 0 (a block but no gold step) → 0.1 + 0.15 + 0.2 = 0.45
    assert called.total == pytest.approx(0.45)


def test_name_f1_multiset():
    assert name_f1(["w", "w", "t"], ["w", "t"]) == pytest.approx(0.8)  # 2·2/(3+2)
    assert name_f1([], []) == 1.0
    assert name_f1(["w"], []) == 0.0
    assert name_f1([], ["w"]) == 0.0


def test_weights_are_configurable():
    text = block({"name": "get_weather", "arguments": {"city": "Paris"}})
    only_fmt = execution_reward(text, weather_task(), ExecutionWeights(fmt=1, name=0, key=0, value=0, parallel=0))
    assert only_fmt.total == 1.0
    only_value = execution_reward(text, weather_task(), ExecutionWeights(fmt=0, name=0, key=0, value=2, parallel=0))
    # value: weather 1/2 (unit missing), time 0 → 1/4; weighted ×2 → 0.5
    assert only_value.total == pytest.approx(0.5)


def test_think_blocks_are_ignored():
    text = "<think>" + block(W_PARIS, T_PARIS) + "</think>" + block(W_PARIS)
    r = execution_reward(text, weather_task())
    assert r.fmt == 1.0 and r.name_f1 == pytest.approx(2 / 3)


def test_parsed_response_is_rechecked_against_task_tools():
    parsed = parse_tool_calls(block({"name": "get_news", "arguments": {}}))  # parsed with any tool allowed
    assert parsed.blocks[0].is_valid
    rechecked = parse_for_task(parsed, weather_task())
    assert not rechecked.blocks[0].is_valid and rechecked.blocks[0].status.value == "unknown_tool"
    assert execution_reward(parsed, weather_task()).fmt == 0.0
    narrow = parse_tool_calls(block(W_PARIS), allowed_tools=["get_time"])  # parsed with another tool list
    assert not narrow.blocks[0].is_valid
    assert parse_for_task(narrow, weather_task()).blocks[0].is_valid
    assert execution_reward(narrow, weather_task()).fmt == 1.0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            list('<>/{}[]":, 1ax_')
            + [
                "<tool_call>",
                "</tool_call>",
                '"get_weather"',
                '"get_time"',
                '"name"',
                '"arguments"',
                '"city"',
                '"Paris"',
            ]
        ),
        max_size=40,
    ).map("".join)
)
def test_total_stays_in_range_for_any_text(text):
    r = execution_reward(text, weather_task())
    for component in (r.fmt, r.name_f1, r.key, r.value, r.parallel):
        assert 0.0 <= component <= 1.0
    assert 0.0 <= r.total <= 1.0 + 1e-12
