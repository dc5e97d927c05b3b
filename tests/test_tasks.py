import json

import pytest

from slca_grpo.data import TaskFormatError, load_tasks, task_from_dict, write_tasks
from slca_grpo.datatypes import ToolCall

TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


def row(**overrides):
    base = {
        "id": "t1",
        "messages": [{"role": "user", "content": "do f"}],
        "tools": [TOOL],
        "gold_calls": [[{"name": "f", "arguments": {"x": 1}}], {"name": "f", "parameters": '{"y": 2}'}],
    }
    base.update(overrides)
    return base


def test_valid_row_parses_steps_and_defaults():
    task = task_from_dict(row())
    assert task.gold_calls == [[ToolCall("f", {"x": 1})], [ToolCall("f", {"y": 2})]]
    assert task.subset == "tool_call" and task.expects_call
    assert task.question == "do f"
    irrelevant = task_from_dict(row(gold_calls=[]))
    assert irrelevant.subset == "irrelevant" and not irrelevant.expects_call


@pytest.mark.parametrize(
    "overrides, needle",
    [
        ({"id": ""}, "'id'"),
        ({"messages": []}, "'messages'"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "role"),
        ({"messages": [{"role": "system", "content": "x"}]}, "no user turn"),
        ({"tools": [{"type": "function", "function": {}}]}, "no function name"),
        ({"tools": [TOOL, TOOL]}, "duplicate tool name"),
        ({"gold_calls": [[{"name": "g"}]]}, "not among the task's tools"),
        ({"gold_calls": [[{"name": "f", "arguments": [1]}]]}, "'arguments' must be an object"),
        ({"gold_calls": [[]]}, "empty step"),
        ({"subset": "weird"}, "'subset'"),
        ({"subset": "irrelevant"}, "no gold calls"),
        ({"reference_answer": 3}, "reference_answer"),
    ],
)
def test_invalid_rows_name_the_problem(overrides, needle):
    with pytest.raises(TaskFormatError, match=needle):
        task_from_dict(row(**overrides))


def test_load_names_file_and_line_or_skips(tmp_path):
    path = tmp_path / "tasks.jsonl"
    lines = [json.dumps(row(id="a")), "", "{broken", json.dumps(row(id="a")), json.dumps(row(id="b"))]
    path.write_bytes(("\n".join(lines) + "\n").encode() + b"\xff\xfe\n")
    with pytest.raises(TaskFormatError) as error:
        load_tasks(path)
    assert str(error.value).startswith(f"{path}:3: invalid JSON")
    report = load_tasks(path, on_error="skip")
    assert [t.id for t in report.tasks] == ["a", "b"]
    assert report.skipped == 3
    assert report.errors[1].startswith(f"{path}:4: duplicate task id 'a'")
    assert report.errors[2].startswith(f"{path}:6: line is not UTF-8")


def test_write_then_load_round_trip(tmp_path):
    tasks = [task_from_dict(row(id=str(i), reference_answer="ok", metadata={"k": i})) for i in range(3)]
    path = tmp_path / "out" / "tasks.jsonl"
    assert write_tasks(tasks, path) == 3
    loaded = load_tasks(path).tasks
    assert [t.to_dict() for t in loaded] == [t.to_dict() for t in tasks]
    assert load_tasks(path, limit=2).tasks[1].id == "1"
