"""``slca data``, round trips between layouts, the split, and datasets as training configs see them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from slca_grpo.chat.template import render_chat
from slca_grpo.cli import main
from slca_grpo.config import ConfigError
from slca_grpo.data.config import DataConfig
from slca_grpo.data.loader import load_dataset
from slca_grpo.data.sft import trajectory_messages, write_sft
from slca_grpo.data.split import goes_to_test, normalise, question_key
from slca_grpo.data.tasks import TaskFormatError, write_tasks
from slca_grpo.trainer.run_data import load_data

FIXTURES = Path(__file__).parent / "fixtures" / "datasets"
CHAT_FIXTURES = ["xlam.json", "toolace.json", "glaive.json", "hermes.json", "apigen_mt.json", "openai.jsonl"]


def core(task):
    """What a task means, without where it was read from."""
    data = task.to_dict()
    extra = data.pop("metadata", {})
    return data, {k: extra[k] for k in ("fixtures", "step_texts") if k in extra}


@pytest.mark.parametrize("name", CHAT_FIXTURES)
def test_tasks_jsonl_round_trip_is_exact(tmp_path, name):
    tasks = load_dataset(FIXTURES / name).tasks
    write_tasks(tasks, tmp_path / "tasks.jsonl")
    back = load_dataset(tmp_path / "tasks.jsonl")
    assert back.formats == {str(tmp_path / "tasks.jsonl"): "slca-tasks"}
    assert [t.to_dict() for t in back.tasks] == [t.to_dict() for t in tasks]


@pytest.mark.parametrize("name", CHAT_FIXTURES)
def test_sft_jsonl_reads_back_as_the_same_tasks(tmp_path, name):
    tasks = load_dataset(FIXTURES / name).tasks
    complete = [t for t in tasks if not (t.reference_answer is None and not t.gold_calls)]
    report = write_sft(tasks, tmp_path / "sft.jsonl")
    assert (report.written, report.incomplete) == (len(complete), len(tasks) - len(complete))
    back = load_dataset(tmp_path / "sft.jsonl")
    assert set(back.formats.values()) == {"openai"}
    assert [core(t) for t in back.tasks] == [core(t) for t in complete]


def test_an_sft_row_is_the_chat_template_input():
    (task,) = [t for t in load_dataset(FIXTURES / "hermes.json").tasks if len(t.gold_calls) == 2]
    messages = trajectory_messages(task)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert messages[2]["content"] == "Let me find a lasagna recipe first."
    assert messages[3] == {
        "role": "tool",
        "tool_call_id": "call_0_0",
        "name": "find_recipe",
        "content": '{"recipe_id": "R-17", "title": "Classic lasagna"}',
    }
    text = render_chat(messages, task.tools, add_generation_prompt=False)
    assert text.count("<tool_response>") == 2 and text.rstrip().endswith("540 calories.<|im_end|>")


def test_sft_examples_use_the_datasets_own_responses_and_answer():
    from slca_grpo.chat.formatter import ChatFormatter
    from slca_grpo.models.tokenizer import train_tokenizer
    from slca_grpo.trainer.sft import build_example

    tasks = load_dataset(FIXTURES / "toolace.json").tasks + load_dataset(FIXTURES / "apigen_mt.json").tasks
    tokenizer = train_tokenizer([render_chat(trajectory_messages(t), t.tools) for t in tasks], vocab_size=600)
    formatter = ChatFormatter(tokenizer)

    def no_simulator(call, task):
        raise AssertionError(f"{call.name} should be answered by the dataset's recorded response")

    for task in tasks:
        example = build_example(task, formatter, no_simulator)
        learned = formatter.decode([i for i, m in zip(example.input_ids, example.loss_mask) if m])
        seen = formatter.decode(example.input_ids)
        assert task.reference_answer in learned
        for fixture in task.metadata["fixtures"]:
            assert fixture["response"] in seen and fixture["response"] not in learned


def run(capsys, *argv):
    code = main(["data", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_inspect_prints_format_counts_statistics_and_a_sample(capsys):
    code, out, _ = run(capsys, "inspect", FIXTURES / "xlam.json")
    assert code == 0
    assert out.splitlines()[0] == f"{FIXTURES / 'xlam.json'}: format xlam (1 file), 3 rows, 3 tasks, 0 skipped"
    assert "subsets: tool_call 2, irrelevant 1" in out
    assert "calls per task: min 0 / mean 1.0 / max 2; parallel steps: 1" in out
    assert "most called: live_giveaways_by_type 2, get_transactions 1" in out and '"id": "0"' in out
    code, out, _ = run(capsys, "inspect", FIXTURES / "toolace.json", "--json")
    summary = json.loads(out)
    assert summary["tasks"] == 2 and summary["with_reference_answer"] == 2 and summary["with_history"] == 1
    assert summary["gold_calls_per_task"]["histogram"] == {"1": 1, "2": 1}
    assert summary["most_called_tools"] == {"Market_Trends_API": 1, "Get_Stock_Price": 1, "Get_Weather": 1}
    assert summary["sample"]["id"] == "toolace-1"


def test_validate_lists_every_bad_row_and_fails(tmp_path, capsys):
    assert run(capsys, "validate", FIXTURES / "glaive.json")[:2] == (
        0,
        f"{FIXTURES / 'glaive.json'}: format glaive (1 file), 2 rows, 2 valid tasks: ok\n",
    )
    rows = json.loads((FIXTURES / "xlam.json").read_text())
    rows[1]["answers"] = "[{"
    rows[2]["query"] = None
    path = tmp_path / "x.json"
    path.write_text(json.dumps(rows))
    code, out, _ = run(capsys, "validate", path, "--max-errors", "1")
    assert code == 1
    assert out.splitlines() == [
        f"{path}:row 2: answers: not valid JSON (Expecting property name enclosed in double quotes: "
        "line 1 column 3 (char 2))",
        "... and 1 more",
        f"{path}: format xlam (1 file), 3 rows, 1 valid tasks: 2 bad row(s)",
    ]
    code, _, err = run(capsys, "validate", FIXTURES / "bfcl" / "BFCL_v4_simple_python.json", "--for", "train")
    assert code == 2 and "bfcl is a benchmark, for evaluation only" in err


def test_validate_refuses_text_no_tokenizer_can_take_and_gold_calls_their_own_schema_refuses(tmp_path, capsys):
    from tool_schemas import weather_tool

    def task(task_id, question, arguments):
        return {
            "id": task_id,
            "messages": [{"role": "user", "content": question}],
            "tools": [weather_tool(city_required=True)],
            "gold_calls": [[{"name": "get_weather", "arguments": arguments}]],
        }

    rows = [
        task("fine", "Weather in Oslo?", {"city": "Oslo"}),
        task("surrogate", "Weather in Oslo\ud800?", {"city": "Oslo"}),  # valid JSON, not valid Unicode
        task("missing", "Weather in Oslo?", {}),  # the simulator answers "missing ...", the oracle would score 1.0
    ]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    code, out, _ = run(capsys, "validate", path)
    lines = out.splitlines()
    assert code == 1 and lines[-1].endswith("3 rows, 1 valid tasks: 2 bad row(s)"), out
    assert lines[0] == f"{path}:2: messages[0].content: text that is not valid Unicode ('\\ud800' at character 15)"
    assert lines[1].startswith(f"{path}:3: gold_calls[0][0] ('get_weather') does not fit its tool's schema")
    assert "missing_required" in lines[1] and "city" in lines[1]
    with pytest.raises(TaskFormatError, match="not valid Unicode"):
        load_dataset(path)  # training and evaluation load the same check


def test_convert_writes_tasks_or_sft_by_the_output_name(tmp_path, capsys):
    code, out, _ = run(capsys, "convert", FIXTURES / "glaive.json", "--to", tmp_path / "tasks.jsonl")
    assert code == 0 and out.startswith(f"wrote 2 tasks to {tmp_path / 'tasks.jsonl'} (format glaive")
    assert len((tmp_path / "tasks.jsonl").read_text().splitlines()) == 2
    code, out, err = run(capsys, "convert", FIXTURES / "xlam.json", "--to", tmp_path / "xlam-sft.jsonl")
    assert code == 0 and out.startswith("wrote 2 SFT trajectories")
    assert "1 task(s) have no complete trajectory" in err and "has no call and no answer" in err
    first = json.loads((tmp_path / "xlam-sft.jsonl").read_text().splitlines()[0])
    assert [m["role"] for m in first["messages"]] == ["user", "assistant"] and first["metadata"]["source"] == "xlam"
    code, _, _ = run(capsys, "convert", FIXTURES / "xlam.json", "--to", tmp_path / "data.out", "--layout", "sft")
    assert code == 0 and (tmp_path / "data.out").exists()
    code, _, err = run(capsys, "convert", FIXTURES / "xlam.json", "--to", tmp_path / "rows.out")
    assert code == 2 and "cannot tell the output layout" in err and not (tmp_path / "rows.out").exists()
    code, _, err = run(
        capsys, "convert", FIXTURES / "bfcl" / "BFCL_v4_simple_python.json", "--to", tmp_path / "sft.jsonl"
    )
    assert code == 2 and "evaluation only" in err and not (tmp_path / "sft.jsonl").exists()


def test_a_failed_convert_leaves_no_partial_file(tmp_path, capsys):
    rows = json.loads((FIXTURES / "xlam.json").read_text())
    rows[2]["tools"] = "[{"
    path = tmp_path / "x.json"
    path.write_text(json.dumps(rows))
    code, _, err = run(capsys, "convert", path, "--to", tmp_path / "out" / "tasks.jsonl")
    assert code == 2 and err.startswith(f"error: {path}:row 3: tools: not valid JSON")
    assert list((tmp_path / "out").iterdir()) == []
    code, out, err = run(capsys, "convert", path, "--to", tmp_path / "out" / "tasks.jsonl", "--skip-bad")
    assert code == 0 and "wrote 2 tasks" in out and "skipped 1 bad row(s)" in err


def test_normalised_questions_ignore_case_spacing_and_punctuation():
    assert normalise("  What's the WEATHER in São Paulo?!") == normalise("what s the weather in são paulo")
    assert normalise("Ｆｕｌｌ width") == "full width"
    assert normalise("a_b-c") == "a b c"


def test_split_dedupes_and_train_and_test_share_no_question(tmp_path, capsys):
    base = json.loads((FIXTURES / "xlam.json").read_text())[0]
    rows = []
    for i in range(120):
        question = f"Where are the giveaways number {i % 60}?"
        rows.append({**base, "id": i, "query": question.upper() if i >= 60 else question})
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    exclude = tmp_path / "bench.jsonl"
    exclude.write_text(json.dumps({**base, "id": "b", "query": "where are the giveaways number 7"}) + "\n")
    code, out, _ = run(capsys, "split", path, "--out", tmp_path / "s", "--test-fraction", "0.25", "--exclude", exclude)
    assert code == 0 and "59 duplicate question(s) and 2 excluded dropped" in out  # 7 and its upper-case twin
    train = load_dataset(tmp_path / "s" / "train.jsonl").tasks
    test = load_dataset(tmp_path / "s" / "test.jsonl").tasks
    assert len(train) + len(test) == 59 and 0 < len(test) < 59
    train_keys, test_keys = {question_key(t) for t in train}, {question_key(t) for t in test}
    assert not train_keys & test_keys and len(train_keys) == len(train) and len(test_keys) == len(test)
    assert all(goes_to_test(question_key(t), 0.25) for t in test)
    assert "where are the giveaways number 7" not in train_keys | test_keys
    assert {t.id for t in train + test} == {str(i) for i in range(60)} - {"7"}  # the first of each question
    code, out, _ = run(capsys, "split", path, "--out", tmp_path / "d", "--test-fraction", "0")
    assert code == 0 and "wrote 60 to" in out and not (tmp_path / "d" / "test.jsonl").exists()
    assert run(capsys, "split", path, "--out", tmp_path / "e", "--test-fraction", "1")[0] == 2


def test_training_configs_take_any_format_and_refuse_benchmarks_for_training(tmp_path):
    config = DataConfig(train=str(FIXTURES / "toolace.json"), test="bfcl:simple_python", n_test=3)
    train, test, probe = load_data(config)
    assert probe == []  # at most a quarter of two tasks
    assert [t.id for t in train] == ["toolace-1", "toolace-2"] and [t.id for t in test][:1] == ["simple_python_0"]
    train = load_data(DataConfig(train=str(FIXTURES / "hermes.json"), train_format="hermes", test="synthetic")).train
    assert len(train) == 2
    with pytest.raises(ConfigError, match=re.escape("data.train: bfcl:simple_python: bfcl is a benchmark")):
        load_data(DataConfig(train="bfcl:simple_python", test="synthetic"))
    with pytest.raises(ConfigError, match="train_format: unknown data format 'csv'"):
        DataConfig(train_format="csv")
    with pytest.raises(ConfigError, match="test_format: unknown data format"):
        DataConfig(test_format="")


def test_convert_to_parquet_writes_verl_rows_that_read_back_as_the_same_tasks(tmp_path, capsys):
    from slca_grpo.data.loader import read_tasks

    code, out, _ = run(capsys, "convert", FIXTURES / "glaive.json", "--to", tmp_path / "train.parquet")
    assert code == 0 and out.startswith(f"wrote 2 verl rows to {tmp_path / 'train.parquet'}")
    original = [t.to_dict() for t in read_tasks(str(FIXTURES / "glaive.json"))]
    assert [t.to_dict() for t in read_tasks(str(tmp_path / "train.parquet"))] == original
    code, _, err = run(
        capsys, "convert", FIXTURES / "bfcl" / "BFCL_v4_simple_python.json", "--to", tmp_path / "bfcl.parquet"
    )
    assert code == 2 and "evaluation only" in err and not (tmp_path / "bfcl.parquet").exists()


def test_damaged_gzip_files_are_one_line_naming_the_file(tmp_path, capsys):
    import gzip

    rows = "\n".join(json.dumps({"query": f"q{i}", "tools": "[]", "answers": "[]"}) for i in range(3000)) + "\n"
    packed = gzip.compress(rows.encode())
    corrupt = bytearray(packed)
    for i in range(12, 40):
        corrupt[i] ^= 0x5A
    cases = {"truncated": packed[: len(packed) // 2], "corrupt": bytes(corrupt), "plain": b"not gzip\n"}
    for name, data in cases.items():
        path = tmp_path / f"{name}.jsonl.gz"
        path.write_bytes(data)
        for command in ("validate", "inspect"):
            code, _, err = run(capsys, command, path)
            assert code == 2 and err.startswith(f"error: {path}: not a readable gzip file"), (name, err)
            assert "Traceback" not in err


def test_parquet_values_json_cannot_hold_are_read_as_json_holds_them_or_make_the_row_bad(tmp_path, capsys):
    import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    metadata = [{"blob": b"note", "when": datetime.datetime(2024, 1, 2)}, {"blob": b"\xff", "when": None}]
    table = pa.table({"id": ["a", "b"], "messages": [[{"role": "user", "content": "hi"}]] * 2, "metadata": metadata})
    source = tmp_path / "rows.parquet"
    pq.write_table(table, source)
    code, _, err = run(capsys, "convert", source, "--to", tmp_path / "out.jsonl")
    assert code == 2 and f"{source}:row 2: metadata.blob: binary data that is not UTF-8 text" in err
    code, _, _ = run(capsys, "convert", source, "--to", tmp_path / "out.jsonl", "--skip-bad")
    (written,) = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert code == 0 and written["metadata"] == {"blob": "note", "when": "2024-01-02T00:00:00"}


def test_validate_counts_what_it_does_not_print_and_arguments_are_checked(tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"query": "q", "tools": "[]", "answers": "[]"}) + "\n" + "{\n" * 1500)
    code, out, _ = run(capsys, "validate", path, "--max-errors", "5000")
    lines = out.splitlines()
    assert code == 1 and len(lines) == 1000 + 2 and lines[-2] == "... and 500 more"
    for argv, problem in [
        (["validate", path, "--max-errors", "-1"], "--max-errors: must be >= 0"),
        (["convert", path, "--to", tmp_path / "o.jsonl", "--limit", "-1"], "--limit: must be >= 0"),
        (["inspect", ""], "a source is a file"),
    ]:
        with pytest.raises(SystemExit):
            main(["data", *map(str, argv)])
        assert problem in capsys.readouterr().err


def test_a_mid_array_syntax_error_is_reported_without_reading_the_rest(tmp_path, capsys, monkeypatch):
    from slca_grpo.data import records

    rows = [json.dumps({"query": f"q{i}", "tools": "[]", "answers": "[]"}) for i in range(2000)]
    rows[1] = "{bad"
    path = tmp_path / "broken.json"
    path.write_text("[" + ",".join(rows) + "]")  # ~100 KB: 25 chunks of 4 KB
    monkeypatch.setattr(records, "_CHUNK_CHARS", 4096)
    reads = []
    original = records._ArrayReader.more
    monkeypatch.setattr(
        records._ArrayReader, "more", lambda self, at_least=0: reads.append(1) or original(self, at_least)
    )
    code, _, err = run(capsys, "validate", path)
    assert code == 2 and f"{path}:row 2: invalid JSON" in err
    assert len(reads) <= 2  # the first chunk holds the error: no read to the end of the file to report it
