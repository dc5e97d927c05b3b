"""Tasks as verl rows (the shared row layout), read back; the ``slca verl data`` command. No verl needed."""

from __future__ import annotations

import json
import os

import pyarrow.parquet as pq
import pytest
from tool_schemas import weather_tool

from slca_grpo.chat import parse_tool_calls
from slca_grpo.cli import main
from slca_grpo.config import ConfigError
from slca_grpo.data.synthetic import generate_tasks
from slca_grpo.data.tasks import TaskFormatError
from slca_grpo.datatypes import SUBSET_IRRELEVANT, Task, ToolCall
from slca_grpo.integrations.verl.config import read_section
from slca_grpo.integrations.verl.rows import task_from_extra_info, task_to_row, tasks_to_rows, write_tasks_parquet

TOOL = weather_tool(
    description="Weather for a city",
    city_required=True,
    returns={"type": "object", "properties": {"temp": {"type": "number"}}},
)


def weather_task(**overrides) -> Task:
    fields = {
        "id": "w1",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}],
        "tools": [TOOL],
        "gold_calls": [[ToolCall("get_weather", {"city": "Paris"}), ToolCall("get_weather", {"city": "Lyon"})]],
        "metadata": {"fixtures": [{"name": "get_weather", "arguments": {"city": "Paris"}, "response": {"temp": 21}}]},
    }
    return Task(**{**fields, **overrides})


def test_a_row_has_the_shared_layout():
    row = task_to_row(weather_task(), 7, split="train")
    assert set(row) == {"data_source", "prompt", "tools", "ability", "reward_model", "extra_info"}
    assert row["data_source"] == "slca" and row["ability"] == "tool_call"
    assert row["prompt"] == weather_task().messages
    assert json.loads(row["tools"]) == [TOOL]
    assert row["reward_model"]["style"] == "rule"
    assert json.loads(row["reward_model"]["ground_truth"]) == {
        "allowed_tools": ["get_weather"],
        "gold_tool_calls": [
            [
                {"name": "get_weather", "arguments": {"city": "Paris"}},
                {"name": "get_weather", "arguments": {"city": "Lyon"}},
            ]
        ],
        "question_content": "Weather in Paris?",
        "tool_schemas": [TOOL],
        "subset_name": "tool_call",
    }
    assert {k: row["extra_info"][k] for k in ("index", "task_id", "split")} == {
        "index": 7,
        "task_id": "w1",
        "split": "train",
    }


def test_the_task_comes_back_whole_from_a_parquet_file(tmp_path):
    tasks = [weather_task(), weather_task(id="w2", gold_calls=[], subset=SUBSET_IRRELEVANT, metadata={})]
    tasks += generate_tasks(0, 5, "train")
    assert write_tasks_parquet(tasks, tmp_path / "train.parquet", split="train") == len(tasks)
    rows = pq.read_table(tmp_path / "train.parquet").to_pylist()
    assert [row["extra_info"]["index"] for row in rows] == list(range(len(tasks)))
    assert [task_from_extra_info(row["extra_info"]).to_dict() for row in rows] == [t.to_dict() for t in tasks]
    assert task_from_extra_info({"task": tasks[0].to_dict()}).to_dict() == tasks[0].to_dict()  # an object works too


@pytest.mark.parametrize(
    ("extra_info", "message"),
    [
        ({"index": 3}, "row 3 has no extra_info.task"),
        ({"index": 4, "task": "{oops"}, "row 4: extra_info.task: not JSON"),
        ({"index": 5, "task": json.dumps({"id": "x", "messages": []})}, "row 5: extra_info.task: 'messages'"),
        ({"index": 6, "task": 12}, "row 6: extra_info.task: must be a JSON string"),
        (None, "a row has no extra_info.task"),
    ],
)
def test_a_bad_row_names_its_index_and_field(extra_info, message):
    with pytest.raises(TaskFormatError, match=message):
        task_from_extra_info(extra_info)


def test_earlier_calls_in_the_prompt_are_hermes_text_in_the_row_and_whole_in_its_task():
    history = [
        {"role": "user", "content": "Weather in Oslo, then Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]},
        {"role": "tool", "content": '{"temp": 3}'},
        {"role": "user", "content": "And Paris?"},
    ]
    (row,) = tasks_to_rows([weather_task(messages=history)])
    assert all(set(message) == {"role", "content"} for message in row["prompt"])
    assert parse_tool_calls(row["prompt"][1]["content"]).calls == [ToolCall("get_weather", {"city": "Oslo"})]
    assert task_from_extra_info(row["extra_info"]).messages == history


def test_the_slca_section_is_checked_and_filled_from_defaults():
    section = read_section({"slca": {"advantage": {"lambda_tool": 2}}}, defaults={"advantage": {"norm_std": False}})
    assert (section.advantage.lambda_tool, section.advantage.norm_std) == (2.0, False)
    assert read_section(None).max_tool_response_tokens == 2048
    with pytest.raises(ConfigError, match="slca.simulatr"):
        read_section({"slca": {"simulatr": {}}})
    with pytest.raises(ConfigError, match="summary-reward noise"):
        read_section({"slca": {"reward": {"summary_noise_std": 0.1}}})


def test_slca_verl_data_writes_train_test_and_probe_files(tmp_path, capsys):
    code = main(
        ["verl", "data", "demo-quick-tiny", "--out", str(tmp_path), "--set", "data.n_train=8", "--set", "data.n_test=2"]
    )
    assert code == 0, capsys.readouterr().err
    train, test, probe = (pq.read_table(tmp_path / f"{s}.parquet").to_pylist() for s in ("train", "test", "probe"))
    assert (len(train), len(test), len(probe)) == (6, 2, 2)  # a quarter of the 8 training tasks is the probe set
    assert {row["extra_info"]["split"] for row in train} == {"train"}
    assert not {row["extra_info"]["task_id"] for row in train} & {row["extra_info"]["task_id"] for row in probe}
    assert main(["verl", "data", "no-such-preset", "--out", str(tmp_path)]) == 2


def test_rows_are_written_a_group_at_a_time_and_an_empty_source_leaves_no_file(tmp_path, monkeypatch):
    from slca_grpo.integrations.verl import rows as rows_module

    monkeypatch.setattr(rows_module, "ROWS_PER_GROUP", 2)
    tasks = generate_tasks(1, 5, "train")
    assert write_tasks_parquet(iter(tasks), tmp_path / "train.parquet") == 5
    written = pq.ParquetFile(tmp_path / "train.parquet")
    assert written.metadata.num_row_groups == 3
    back = [task_from_extra_info(row["extra_info"]).to_dict() for row in written.read().to_pylist()]
    assert back == [t.to_dict() for t in tasks]
    with pytest.raises(ValueError, match="no rows to write"):
        write_tasks_parquet(iter([]), tmp_path / "empty.parquet")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.parquet"]


def test_the_per_turn_reward_needs_the_loops_turn_texts_and_bad_extras_name_their_rollout():
    from slca_grpo.integrations.verl.advantages import rewards_from_extras
    from slca_grpo.integrations.verl.reward import TURN_TEXTS_FIELD, compute_score

    task = weather_task()
    row = task_to_row(task, 0)
    with pytest.raises(ValueError, match="needs each turn's text"):
        compute_score("slca", "", row["reward_model"]["ground_truth"], row["extra_info"], estimator="slca-turn")
    texts = ['<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>', "Sunny."]
    extra = {**row["extra_info"], TURN_TEXTS_FIELD: texts, "slca_response_text": "".join(texts)}
    scored = compute_score("slca", "", row["reward_model"]["ground_truth"], extra, estimator="slca-turn")
    assert json.loads(scored["turn"])[0] > 0
    with pytest.raises(ValueError, match=r"rollout k7: reward_extra_info\['turn'\] is not JSON"):
        rewards_from_extras([{"turn": "[0.5,"}], ["turn"], ["k7"])


def test_rows_go_through_a_pipe_or_a_link_and_never_replace_them(tmp_path):
    import threading

    from slca_grpo.data.output import OutputPathError
    from slca_grpo.integrations.verl.rows import write_rows

    rows = [{"a": 1}, {"a": 2}]
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    received = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_bytes()))
    reader.start()
    assert write_rows(rows, pipe) == 2
    reader.join(timeout=60)
    assert pipe.is_fifo() and received[0][:4] == b"PAR1"  # the pipe stays; a parquet file went through it
    real = tmp_path / "real.parquet"
    link = tmp_path / "link.parquet"
    link.symlink_to(real)
    assert write_rows(rows, link) == 2 and link.is_symlink() and real.read_bytes()[:4] == b"PAR1"
    with pytest.raises(OutputPathError, match="is a folder"):
        write_rows(rows, tmp_path)


def test_on_verl_a_rollout_the_simulator_failed_is_void_and_out_of_its_groups_statistics():
    import torch

    from slca_grpo.algos import compute_advantages
    from slca_grpo.integrations.verl.advantages import batch_advantages
    from slca_grpo.integrations.verl.reward import SIMULATOR_FAULT_FIELD, compute_score

    row = task_to_row(weather_task(), 0)
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    texts = [call + "Sunny in Oslo today.", call + "It rains.", "No idea.", call + "Sunny, 20 degrees in Oslo."]
    faults = ["", "backend_error", "", ""]
    infos = []
    for text, fault in zip(texts, faults):
        extra = {**row["extra_info"], "slca_response_text": text, SIMULATOR_FAULT_FIELD: fault}
        infos.append(compute_score("slca", "", row["reward_model"]["ground_truth"], extra, estimator="slca"))
    assert [info["void"] for info in infos] == [False, True, False, False]
    # A rollout from another agent loop carries no fault field: it is valid.
    plain = compute_score("slca", "", row["reward_model"]["ground_truth"], row["extra_info"], estimator="slca")
    assert plain["void"] is False

    mask = torch.tensor([[1.0, 1.0, 0.0, 0.0, 1.0, 1.0]] * 4)  # a call turn, a tool response, an answer
    advantages, segments = batch_advantages(
        "slca", group_ids=["u"] * 4, response_mask=mask, reward_infos=infos, rollouts=["k0", "k1", "k2", "k3"]
    )
    assert (advantages[1] == 0).all()
    keep = [0, 2, 3]
    rewards = {
        "score": torch.tensor([infos[i]["score"] for i in keep]),
        "tool": torch.tensor([infos[i]["r_tool"] for i in keep]),
        "summary": torch.tensor([infos[i]["r_sum"] for i in keep]),
        "no_call": torch.tensor([infos[i]["no_call"] for i in keep]),
    }
    alone = compute_advantages("slca", group_ids=["u"] * 3, segment_ids=segments[keep], rewards=rewards)
    assert torch.equal(advantages[keep], alone) and bool(alone.abs().sum() > 0)
