"""Careless and hostile data files: bad rows, empty files, skipped rows, pathological text. Each is a
one-line error naming the file (and the line), a reported count, or bounded work."""

from __future__ import annotations

import json
import re
import time

import pytest
from tool_schemas import function_tool

from slca_grpo.cli import main
from slca_grpo.config import ConfigError
from slca_grpo.data.config import DataConfig
from slca_grpo.data.loader import load_tasks
from slca_grpo.data.tasks import TaskFormatError, task_from_dict
from slca_grpo.trainer.run_data import MAX_WORD_CHARS, load_data, tokenizer_corpus

GOOD = {
    "id": "t1",
    "messages": [{"role": "user", "content": "Weather in Oslo?"}],
    "tools": [function_tool("get_weather")],
    "gold_calls": [[{"name": "get_weather", "arguments": {"city": "Oslo"}}]],
    "reference_answer": "It is 5 degrees in Oslo.",
}


def write_rows(path, rows):
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("{not json", "invalid JSON"),
        ('["a", "list"]', "must be a JSON object"),
        (json.dumps({**GOOD, "messages": "hello"}), "messages"),
        (json.dumps({**GOOD, "gold_calls": [[{"arguments": {}}]]}), "gold_calls"),
    ],
)
def test_a_bad_row_names_its_file_and_line(tmp_path, row, message):
    path = write_rows(tmp_path / "tasks.jsonl", [GOOD, {**GOOD, "id": "t2"}, row])
    with pytest.raises(TaskFormatError) as error:
        load_tasks(path)
    assert str(error.value).startswith(f"{path}:3:") and message in str(error.value)


def test_skipped_rows_are_counted_and_reported(tmp_path, capsys):
    path = write_rows(tmp_path / "tasks.jsonl", [GOOD, "{broken", {**GOOD, "id": "t3"}, "[]"])
    train = load_data(DataConfig(train=str(path), test=str(path), skip_bad_rows=True)).train
    assert [t.id for t in train] == ["t1", "t3"]
    warnings = [line for line in capsys.readouterr().err.splitlines() if "skipped" in line]
    assert warnings[0].startswith(f"warning: data.train: skipped 2 bad row(s) of {path} (first: {path}:2:")


def test_an_empty_or_all_bad_training_file_is_a_config_error(tmp_path):
    empty = write_rows(tmp_path / "empty.jsonl", [])
    with pytest.raises(ConfigError, match=re.escape(f"data.train: {empty} holds no tasks")):
        load_data(DataConfig(train=str(empty), test="synthetic"))
    bad = write_rows(tmp_path / "bad.jsonl", ["{", "{"])
    with pytest.raises(ConfigError, match="every row was skipped"):
        load_data(DataConfig(train=str(bad), test="synthetic", skip_bad_rows=True))


def test_evaluating_an_empty_task_file_is_an_error_not_a_zero(tmp_path, capsys):
    empty = write_rows(tmp_path / "empty.jsonl", [])
    assert main(["eval", "indomain", "--policy", "oracle", "--tasks", str(empty), "--out", str(tmp_path / "o")]) == 2
    assert "holds no tasks" in capsys.readouterr().err
    assert not (tmp_path / "o" / "summary.json").exists()


def test_a_ten_megabyte_word_does_not_stall_tokenizer_training():
    task = task_from_dict({**GOOD, "messages": [{"role": "user", "content": "look " + "x" * 10_000_000 + " up"}]})
    started = time.perf_counter()
    corpus = tokenizer_corpus([task])
    assert time.perf_counter() - started < 2.0
    assert max(len(word) for text in corpus for word in text.split()) <= MAX_WORD_CHARS
