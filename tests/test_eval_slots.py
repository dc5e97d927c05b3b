"""Argument accuracy per slot kind: the classification of where a value comes from, and the counts."""

from __future__ import annotations

import json

import pytest

from slca_grpo.data.synthetic import generate_suite
from slca_grpo.datatypes import Task, ToolCall
from slca_grpo.eval.indomain import AGGREGATED, aggregate
from slca_grpo.eval.slots import SLOT_KINDS, slot_accuracy, slot_kind, slot_results
from slca_grpo.report import slot_table


@pytest.mark.parametrize(
    ("value", "request_text", "tool_text", "kind"),
    [
        ("Auckland", "How much daylight will Auckland get?", "", "copied_string"),
        ("Lunch with Sam", "Put Lunch with Sam in my calendar", "", "copied_string"),
        ("ORD-OFLR33", "Cancel order ORD-OFLR33.", "", "copied_id"),
        ("NMBC", "Pull up the latest NMBC quote.", "", "copied_id"),
        ("fatima.ahmed@inbox.example.com", "Drop fatima.ahmed@inbox.example.com a note", "", "copied_id"),
        (70.0, "toys under 70 dollars", "", "copied_number"),
        (8, "a table for 8 people", "", "copied_number"),
        (12.5, "send 12.50 euros", "", "copied_number"),
        (7, "a table for 17 people", "", "inferred"),  # 7 is only part of 17
        ("2026-01-27", "Show my schedule for 2026-01-27.", "", "copied_date"),
        ("2025-06-07", "on June 7, 2025", "", "converted_date"),
        ("14:30", "at 14:30", "", "copied_time"),
        ("19:30", "at 7:30 pm", "", "converted_time"),
        ("CDRH", "How is Cedar Health stock doing?", '{"symbol": "CDRH"}', "from_tool"),
        (3, "no number here", '{"count": 3}', "from_tool"),
        ("cool", "make it colder in here", "", "inferred"),
        (True, "only unread ones", "", "inferred"),
        ({"nested": 1}, "anything", "", "inferred"),
    ],
)
def test_slot_kind_says_where_a_value_comes_from(value, request_text, tool_text, kind):
    assert slot_kind(value, request_text, tool_text) == kind


def _task() -> Task:
    response = json.dumps({"symbol": "CDRH", "name": "Cedar Health"})
    return Task(
        id="t",
        messages=[{"role": "user", "content": "Cedar Health stock on June 7, 2025, please, in Paris"}],
        tools=[],
        gold_calls=[
            [ToolCall("lookup", {"company_name": "Cedar Health"})],
            [ToolCall("price", {"symbol": "CDRH", "date": "2025-06-07", "city": "Paris"})],
        ],
        metadata={
            "fixtures": [{"name": "lookup", "arguments": {"company_name": "Cedar Health"}, "response": response}]
        },
    )


def test_slot_results_score_each_gold_argument_against_calls_of_the_same_tool():
    task = _task()
    predicted = [
        ToolCall("lookup", {"company_name": "cedar health "}),  # loose match: case, spaces
        ToolCall("price", {"symbol": "XXXX", "date": "2025-06-07"}),
        ToolCall("other", {"city": "Paris"}),
    ]  # right value under the wrong tool: no credit
    assert slot_results(task, predicted) == [
        ("copied_string", True),
        ("from_tool", False),
        ("converted_date", True),
        ("copied_string", False),
    ]
    assert slot_results(task, []) == [
        ("copied_string", False),
        ("from_tool", False),
        ("converted_date", False),
        ("copied_string", False),
    ]


def test_slot_accuracy_counts_per_kind_in_a_fixed_order():
    per_item = [[("copied_string", True), ("converted_date", False)], [("copied_string", False)], []]
    assert slot_accuracy(per_item) == {
        "copied_string": {"n": 2, "correct": 1, "accuracy": 0.5},
        "converted_date": {"n": 1, "correct": 0, "accuracy": 0.0},
    }
    assert list(slot_accuracy([[("inferred", True), ("copied_id", True)]])) == ["copied_id", "inferred"]
    assert slot_accuracy([]) == {}


def test_gold_calls_get_every_slot_right_and_every_kind_occurs_in_the_synthetic_suite():
    suite = generate_suite(seed=3, n_train=400, n_test=0)
    per_item = [slot_results(task, task.flat_gold_calls) for task in suite.train]
    accuracy = slot_accuracy(per_item)
    assert all(counts["accuracy"] == 1.0 for counts in accuracy.values())
    assert set(accuracy) == set(SLOT_KINDS)  # the suite exercises copying, converting, linking, inferring


def test_aggregate_reports_slot_accuracy_as_counts_and_scalars():
    base = {key: 0.0 for key in AGGREGATED} | {"kind": "single", "no_call": False}
    items = [
        {**base, "slots": [["copied_id", True], ["converted_time", False]]},
        {**base, "slots": [["copied_id", False]]},
    ]
    summary = aggregate(items)
    assert summary["slot/copied_id"] == 0.5 and summary["slot/converted_time"] == 0.0
    assert summary["slots"]["copied_id"] == {"n": 2, "correct": 1, "accuracy": 0.5}
    table = "\n".join(slot_table([("start", summary), ("old run", {"name_f1": 0.5})]))
    assert "| start | 50.0 | 0.0 |" in table and "| old run | – | – |" in table
    assert slot_table([("old run", {"name_f1": 0.5})]) == []


def test_aggregate_splits_tasks_on_held_out_tools_from_the_rest():
    base = {key: 0.0 for key in AGGREGATED} | {"kind": "single", "no_call": False}
    items = [
        {**base, "name_f1": 1.0, "new_tools": False},
        {**base, "name_f1": 0.5, "new_tools": False},
        {**base, "name_f1": 0.25, "new_tools": True},
    ]
    groups = aggregate(items)["by_tools"]
    assert groups["seen_tools"]["n"] == 2 and groups["seen_tools"]["name_f1"] == 0.75
    assert groups["new_tools"] == {**groups["new_tools"], "n": 1, "name_f1": 0.25}
    assert set(aggregate(items[:2])["by_tools"]) == {"seen_tools"}  # no empty group
