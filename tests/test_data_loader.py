"""Reading dataset files: JSON Lines, JSON arrays, Parquet, gzip, folders, benchmark sources, and
every way a file or row can be bad."""

from __future__ import annotations

import gzip
import itertools
import json
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slca_grpo.data import records
from slca_grpo.data.loader import EvalOnlyError, load_dataset, read_tasks
from slca_grpo.data.records import dataset_files, iter_rows
from slca_grpo.data.tasks import LoadReport, TaskFormatError

FIXTURES = Path(__file__).parent / "fixtures" / "datasets"
XLAM = json.loads((FIXTURES / "xlam.json").read_text())


def xlam_row(i):
    return {**XLAM[i % 3], "id": i}


def values(path):
    return [(row.where, row.value, row.problem) for row in iter_rows(Path(path))]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(json_values, max_size=6), chunk=st.integers(1, 64), indent=st.sampled_from([None, 0, 2]))
def test_json_arrays_read_back_whatever_the_chunk_size(tmp_path_factory, rows, chunk, indent):
    path = tmp_path_factory.mktemp("arr") / "rows.json"
    path.write_text(json.dumps(rows, indent=indent, ensure_ascii=False), encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(records, "_CHUNK_CHARS", chunk)  # rows and numbers cut at every buffer boundary
        assert [v for _, v, _ in values(path)] == rows


def test_the_same_rows_read_from_jsonl_json_parquet_gzip_and_a_folder(tmp_path):
    rows = [xlam_row(i) for i in range(5)]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:2]) + "\n")
    (tmp_path / "b.json").write_text(json.dumps(rows[2:3]))
    pq.write_table(pa.Table.from_pylist(rows[3:4]), tmp_path / "c.parquet")
    with gzip.open(tmp_path / "d.jsonl.gz", "wt") as handle:
        handle.write(json.dumps(rows[4]) + "\n")
    (tmp_path / ".hidden.jsonl").write_text("{broken\n")
    (tmp_path / "notes.txt").write_text("not data")
    assert [p.name for p in dataset_files(tmp_path)] == ["a.jsonl", "b.json", "c.parquet", "d.jsonl.gz"]
    report = load_dataset(tmp_path)
    assert [t.id for t in report.tasks] == ["0", "1", "2", "3", "4"]
    assert set(report.formats.values()) == {"xlam"} and report.rows == 5
    assert report.tasks[3].metadata["origin"] == f"{tmp_path / 'c.parquet'}:row 1"
    assert [w for w, _, _ in values(tmp_path / "a.jsonl")] == [1, 2]  # blank lines are not rows


def test_bfcl_style_json_files_hold_one_object_per_line():
    assert [w for w, _, _ in values(FIXTURES / "bfcl" / "BFCL_v4_simple_python.json")] == [1, 2]


def test_a_byte_order_mark_is_not_part_of_the_first_row(tmp_path):
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + json.dumps(xlam_row(0)).encode() + b"\n")
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + json.dumps([xlam_row(1)]).encode())
    assert [t.id for t in load_dataset(tmp_path).tasks] == ["1", "0"]


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ('[{"a": 1}, {"a": 2', "row 2", "invalid JSON"),
        ('[{"a": 1} {"a": 2}]', "row 1", "expected ',' or ']' after the row, found '{'"),
        ('[{"a": 1}', "row 1", "expected ',' or ']' after the row, found the end of the file"),
        ('[{"a": 1}] trailing', "row 1", "text after the closing ']'"),
    ],
)
def test_a_broken_json_array_stops_with_file_and_row(tmp_path, text, where, problem):
    path = tmp_path / "broken.json"
    path.write_text(text)
    with pytest.raises(TaskFormatError) as error:
        values(path)
    assert str(error.value).startswith(f"{path}:{where}: {problem}")
    assert "the rest of the JSON array cannot be read" in str(error.value)


def test_bad_jsonl_rows_are_skipped_and_counted_or_stop_the_read(tmp_path):
    path = tmp_path / "mixed.jsonl"
    lines = [json.dumps(xlam_row(0)), "{broken", json.dumps(["a", "list"]), json.dumps(xlam_row(0))]
    path.write_bytes(("\n".join(lines) + "\n").encode() + b'{"query": "\xff"}\n' + json.dumps(xlam_row(1)).encode())
    with pytest.raises(TaskFormatError, match=re.escape(f"{path}:2: invalid JSON")):
        load_dataset(path)
    report = load_dataset(path, on_error="skip")
    assert [t.id for t in report.tasks] == ["0", "1"] and report.rows == 6 and report.skipped == 4
    assert report.errors == [
        f"{path}:2: invalid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        f"{path}:3: a row must be a JSON object, got list",
        f"{path}:4: duplicate task id '0'",
        f"{path}:5: line is not UTF-8 (invalid start byte at byte 11)",
    ]


def test_a_file_of_broken_rows_yields_one_error_per_row(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text("{\n[\n")
    report = load_dataset(path, on_error="skip")
    assert report.tasks == [] and report.skipped == 2 and report.formats == {}


def test_unknown_shapes_missing_files_and_damaged_parquet_are_one_line_errors(tmp_path):
    (tmp_path / "odd.jsonl").write_text('{"text": "hello", "label": 1}\n')
    with pytest.raises(TaskFormatError, match=r"odd.jsonl:1: cannot tell the format from this row \(label, text\)"):
        load_dataset(tmp_path / "odd.jsonl")
    with pytest.raises(FileNotFoundError, match="No such file or directory"):
        load_dataset(tmp_path / "missing.jsonl")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="a folder with no data files"):
        load_dataset(tmp_path / "empty")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(TaskFormatError, match="bad.parquet: not a readable Parquet file"):
        load_dataset(tmp_path / "bad.parquet")
    (tmp_path / "rows.txt").write_text(json.dumps([xlam_row(7)]))
    assert [t.id for t in load_dataset(tmp_path / "rows.txt").tasks] == ["7"]  # any name: read as JSON
    with pytest.raises(ValueError, match="give tau2:... as the source"):
        load_dataset(tmp_path / "rows.txt", data_format="tau2")


def test_a_hundred_unreadable_rows_before_any_good_one_stop_detection(tmp_path):
    path = tmp_path / "noise.jsonl"
    path.write_text("{\n" * 100 + json.dumps(xlam_row(0)) + "\n")
    with pytest.raises(TaskFormatError, match="no readable row among the first 100"):
        load_dataset(path, on_error="skip")
    assert [t.id for t in load_dataset(path, data_format="xlam", on_error="skip").tasks] == ["0"]


def test_limit_stops_reading_and_the_report_counts_what_was_read(tmp_path):
    path = tmp_path / "many.jsonl"
    path.write_text("".join(json.dumps(xlam_row(i)) + "\n" for i in range(50)))
    report = load_dataset(path, limit=3)
    assert [t.id for t in report.tasks] == ["0", "1", "2"] and report.rows == 3


@pytest.mark.parametrize(
    ("row", "field_problem"),
    [
        ({"query": "q", "tools": "[{", "answers": "[]"}, "tools: not valid JSON"),
        ({"query": "q", "tools": "[]", "answers": '[{"arguments": {}}]'}, "answers[0]: a call must be an object"),
        ({"query": "q", "tools": '[{"description": "x"}]', "answers": "[]"}, "tools[0]: a tool needs a non-empty"),
        (
            {"query": "q", "tools": '[{"name": "f", "parameters": [1]}]', "answers": "[]"},
            "tools[0].parameters: must be",
        ),
        ({"query": "q", "tools": "[]", "answers": '[{"name": "g"}]'}, "gold call 'g' is not among the task's tools"),
        ({"query": 5, "tools": "[]", "answers": "[]"}, "query: must be a string, got int"),
    ],
)
def test_xlam_row_errors_name_file_row_and_field(tmp_path, row, field_problem):
    path = tmp_path / "x.json"
    path.write_text(json.dumps([xlam_row(0), {"id": 9, **row}]))
    with pytest.raises(TaskFormatError) as error:
        load_dataset(path)
    assert str(error.value).startswith(f"{path}:row 2: {field_problem}")


def conversation(*turns, **extra):
    return {"conversations": [{"from": f, "value": v} for f, v in turns], **extra}


TOOLS = json.dumps([{"name": "f", "parameters": {"type": "object", "properties": {}}}])


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (conversation(("human", "hi")), "conversation: no user turn has an assistant reply"),
        (conversation(("robot", "hi")), "conversations[0]: unknown speaker 'robot'"),
        (conversation(("human", "hi"), ("tool", "{}"), ("gpt", "ok")), "a tool response that answers no call"),
        (conversation(("human", "hi"), ("gpt", "<tool_call>{'name': 'f'}"), tools=TOOLS), "1 <tool_call> tag(s) but 0"),
        (
            conversation(("human", "hi"), ("gpt", "<tool_call>{f}</tool_call>"), tools=TOOLS),
            "neither JSON nor a Python",
        ),
        (
            conversation(
                ("human", "hi"),
                ("function_call", '{"name": "f", "arguments": {}}'),
                ("observation", "1"),
                ("observation", "2"),
                ("gpt", "done"),
                tools=TOOLS,
            ),
            "conversations[2]: 2 tool response(s) for 1 call(s), and no call ids to pair them by",
        ),
        (conversation(("human", "hi"), ("gpt", " "), tools=TOOLS), "neither a call nor any text"),
        (
            conversation(("human", "hi"), ("gpt", "x"), ("system", "y"), ("gpt", "z")),
            "a system turn inside the assistant",
        ),
        (
            {"conversations": [{"from": "human", "value": 3}, {"from": "gpt", "value": "x"}]},
            "the text must be a string",
        ),
        (conversation(("human", "hi"), ("function_call", '{"name": "f", "arguments": [1]}'), tools=TOOLS), "arguments"),
    ],
)
def test_conversation_errors_name_the_turn(tmp_path, row, message):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(TaskFormatError, match=re.escape(message)) as error:
        load_dataset(path)
    assert str(error.value).startswith(f"{path}:1: ")


@pytest.mark.parametrize(
    ("chat", "message"),
    [
        ("hello\nUSER: hi", "chat: text before the first speaker"),
        (
            "USER: hi\nASSISTANT: <functioncall> {name: f} <|endoftext|>",
            "chat.turn[2].functioncall: a function call that",
        ),
    ],
)
def test_glaive_errors_name_the_turn(tmp_path, chat, message):
    path = tmp_path / "g.json"
    path.write_text(json.dumps([{"system": "SYSTEM: -", "chat": chat}]))
    with pytest.raises(TaskFormatError, match=re.escape(message)):
        load_dataset(path)
    path.write_text(json.dumps([{"system": 'SYSTEM: use -\n{"name": "f",}', "chat": "USER: hi\nASSISTANT: x"}]))
    with pytest.raises(TaskFormatError, match=re.escape("system: function 1 is not valid JSON")):
        load_dataset(path)


# --- Benchmarks: evaluation only, never training ------------------------------------------------


def test_bfcl_files_and_the_installed_benchmark_are_evaluation_tasks():
    local = load_dataset(FIXTURES / "bfcl" / "BFCL_v4_simple_python.json").tasks
    installed = load_dataset("bfcl:simple_python", limit=2).tasks
    assert [t.to_dict()["gold_calls"] for t in local] == [t.to_dict()["gold_calls"] for t in installed]
    assert local[1].gold_calls[0][0].name == "math_factorial"  # a dotted name made valid
    assert local[1].metadata["tool_names"] == {"math_factorial": "math.factorial"}
    assert local[0].to_dict()["gold_calls"] == [
        [{"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}]
    ]
    assert "Python 3 syntax" in local[0].tools[0]["function"]["description"]  # bfcl-eval's language hint
    assert all(t.metadata["eval_only"] for t in local + installed)
    (irrelevance,) = load_dataset(FIXTURES / "bfcl" / "BFCL_v4_irrelevance.json").tasks
    assert irrelevance.subset == "irrelevant" and not irrelevance.gold_calls


def test_bfcl_is_refused_as_training_data_even_with_skip(tmp_path):
    for source in (FIXTURES / "bfcl" / "BFCL_v4_simple_python.json", "bfcl:simple_python"):
        with pytest.raises(EvalOnlyError, match="bfcl is a benchmark, for evaluation only"):
            load_dataset(source, purpose="train", on_error="skip")
    # Converted to our own tasks first, the rows still carry the mark.
    from slca_grpo.data.tasks import write_tasks

    path = tmp_path / "bfcl_tasks.jsonl"
    write_tasks(load_dataset(FIXTURES / "bfcl" / "BFCL_v4_simple_python.json").tasks, path)
    with pytest.raises(EvalOnlyError, match=re.escape(f"{path}:1: task 'simple_python_0' is evaluation-only")):
        load_dataset(path, purpose="train", on_error="skip")


def test_bfcl_rows_without_answers_or_multi_turn_are_errors(tmp_path):
    folder = tmp_path / "bfcl"
    folder.mkdir()
    shutil.copy(FIXTURES / "bfcl" / "BFCL_v4_simple_python.json", folder)
    with pytest.raises(TaskFormatError, match=r"simple_python.json:1: id: no possible answer for 'simple_python_0'"):
        load_dataset(folder)
    row = {"id": "multi_turn_base_0", "question": [[{"role": "user", "content": "x"}]], "function": []}
    (folder / "mt.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(TaskFormatError, match=r"mt.jsonl:1: question: a multi-turn BFCL entry"):
        load_dataset(folder / "mt.jsonl")


def test_tau2_train_tasks_replay_their_gold_actions_in_the_real_environment():
    report = LoadReport()
    tasks = list(itertools.islice(read_tasks("tau2:airline", on_error="skip", report=report), 3))
    assert report.skipped == report.rows - 3 >= 1
    assert report.errors[0] == (
        "tau2:airline:task 0: evaluation_criteria.actions: has no assistant-side gold action to learn"
    )
    task = next(t for t in tasks if t.id == "tau2-airline-1")
    assert task.messages[0]["role"] == "system" and "<policy>" in task.messages[0]["content"]
    assert "raj_sanchez_7340" in task.question
    assert task.gold_calls[0][0].name == "get_user_details"
    first = json.loads(task.metadata["fixtures"][0]["response"])
    assert first["user_id"] == "raj_sanchez_7340" and first["name"]["last_name"] == "Sanchez"
    assert task.metadata["tau2"] == {"domain": "airline", "split": "train", "task_id": "1"}
    assert len(task.tools) == 14 and "eval_only" not in task.metadata
    with pytest.raises(EvalOnlyError, match="task 'tau2-airline-"):
        load_dataset("tau2:airline:test", purpose="train", on_error="skip")
