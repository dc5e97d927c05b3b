"""Hostile and damaged run folders: checkpoints that try to run code, point outside the run, or
are broken; runs whose numbers blow up. Each is a one-line error or a safe fallback."""

from __future__ import annotations

import pathlib
import random

import numpy as np
import pytest
import torch

from slca_grpo.cli import main
from slca_grpo.models import build_tiny
from slca_grpo.models.checkpoint import (
    CheckpointError,
    latest_checkpoint,
    load_latest_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return build_tiny("tiny", corpus_texts=["hello world tool call"] * 20, vocab_size=300)


def write(root, step, tiny):
    model, tokenizer = tiny
    state = {"trainer": {"weights": torch.arange(3.0), "lr": [0.1]}}
    return save_checkpoint(root, step, model=model, tokenizer=tokenizer, state=state, info={"history": {}})


class RunsCode:
    def __init__(self, marker: pathlib.Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (self.marker,))


def test_the_rng_state_round_trips_through_plain_values():
    state = rng_state()
    expected = (torch.rand(3), random.random(), np.random.rand(2))
    set_rng_state(state)
    again = (torch.rand(3), random.random(), np.random.rand(2))
    assert torch.equal(expected[0], again[0]) and expected[1] == again[1] and np.array_equal(expected[2], again[2])


def test_a_crafted_state_file_cannot_run_code_on_resume(tmp_path, tiny):
    root = tmp_path / "checkpoints"
    folder = write(root, 0, tiny)
    marker = tmp_path / "pwned"
    torch.save({"trainer": RunsCode(marker), "rng": rng_state()}, folder / "state.pt")
    with pytest.raises(CheckpointError, match="state.pt cannot be loaded safely"):
        load_latest_checkpoint(root)
    assert not marker.exists()


def test_latest_never_points_outside_the_run(tmp_path, tiny):
    root = tmp_path / "run" / "checkpoints"
    write(root, 1, tiny)
    elsewhere = write(tmp_path / "other" / "checkpoints", 7, tiny)
    (root / "latest").write_text(f"../../other/checkpoints/{elsewhere.name}\n")
    assert latest_checkpoint(root).name == "step-000001"
    (root / "latest").write_bytes(b"\x00\xff\xfe binary")
    folder, _, info = load_latest_checkpoint(root)
    assert folder.name == "step-000001" and info["step"] == 1


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda f: (f / "state.pt").write_bytes(b"garbage" * 10), "state.pt cannot be loaded safely"),
        (lambda f: (f / "state.pt").write_bytes(b""), "state.pt cannot be loaded safely"),
        (lambda f: (f / "state.pt").write_bytes((f / "state.pt").read_bytes()[:100]), "state.pt cannot be loaded"),
        (lambda f: (f / "trainer_state.json").write_text("{not json"), "trainer_state.json is unreadable"),
        (lambda f: (f / "trainer_state.json").write_text('{"step": "two"}'), "has no valid step"),
        (lambda f: truncate(f / "model" / "model.safetensors"), "model.safetensors is damaged"),
        (lambda f: (f / "model" / "config.json").unlink(), "has no config.json"),
    ],
)
def test_a_damaged_newest_checkpoint_falls_back_to_the_newest_intact_one(tmp_path, tiny, capsys, damage, message):
    root = tmp_path / "checkpoints"
    write(root, 1, tiny)
    newest = write(root, 2, tiny)
    damage(newest)
    folder, state, info = load_latest_checkpoint(root)
    assert (
        folder.name == "step-000001"
        and info["step"] == 1
        and torch.equal(state["trainer"]["weights"], torch.arange(3.0))
    )
    err = capsys.readouterr().err
    assert "skipping a damaged checkpoint" in err and message in err and "resuming from step-000001" in err
    damage(root / "step-000001")
    with pytest.raises(CheckpointError, match=f"no intact checkpoint under {root}"):
        load_latest_checkpoint(root)


def truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_no_checkpoint_at_all_is_a_fresh_start(tmp_path):
    assert load_latest_checkpoint(tmp_path / "missing") is None


def test_a_resume_from_a_damaged_run_is_a_one_line_error(tmp_path, tiny, capsys):
    out = tmp_path / "run"
    folder = write(out / "checkpoints", 0, tiny)
    (folder / "state.pt").write_bytes(b"\x80\x04junk")
    capsys.readouterr()  # the save's own progress output
    overrides = [f"train.out_dir={out}", "sft.steps=0", "rl.steps=1", "train.progress=false", "data.n_train=8"]
    code = main(["train", "demo-quick-tiny", "--resume", *[arg for o in overrides for arg in ("--set", o)]])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: no intact checkpoint") and len(err.strip().splitlines()) == 1


def test_a_run_whose_gradients_blow_up_stops_at_that_step_and_keeps_the_last_good_checkpoint(tmp_path, capsys):
    from slca_grpo.algos import register_estimator, unregister_estimator

    calls = []

    @register_estimator("explodes-second", rewards=("score",))
    def explodes(group_index, segment_ids, rewards, config):
        calls.append(1)
        value = float("nan") if len(calls) >= 2 else 1.0
        return torch.full(segment_ids.shape, value) * (segment_ids > 0)

    out = tmp_path / "run"
    overrides = [
        f"train.out_dir={out}",
        "rl.estimator=explodes-second",
        "data.n_train=40",
        "data.n_test=2",
        "sft.steps=2",
        "sft.batch_size=4",
        "rl.steps=3",
        "rl.prompts_per_step=2",
        "rl.mini_batch_prompts=2",
        "rollout.group_size=2",
        "rollout.max_response_tokens=16",
        "train.eval_tasks=0",
        "train.save_every=1",
        "train.progress=false",
    ]
    try:
        code = main(["train", "demo-quick-tiny", *[arg for o in overrides for arg in ("--set", o)]])
    finally:
        unregister_estimator("explodes-second")
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after transformers' progress bars
    assert code == 2 and err.startswith("error: training stopped: ")
    assert "RL step 1: the gradient norm is nan; no optimizer step was taken" in err
    assert "checkpoints/step-000000, is intact" in err
    folder, _, info = load_latest_checkpoint(out / "checkpoints")
    assert info["step"] == 0
    from safetensors.torch import load_file

    assert all(torch.isfinite(t).all() for t in load_file(folder / "model" / "model.safetensors").values())


def test_a_save_that_fails_midway_leaves_the_run_resumable(tmp_path, tiny, monkeypatch):
    import errno

    import slca_grpo.models.checkpoint as checkpoint

    root = tmp_path / "checkpoints"
    write(root, 1, tiny)

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    def torch_disk_full(*args, **kwargs):  # how a full disk reaches torch.save's zip writer
        raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 64 vs 0\nmore lines")

    for failure, message in ((disk_full, "No space left on device"), (torch_disk_full, "inline_container")):
        with monkeypatch.context() as patch:
            patch.setattr(checkpoint.torch, "save", failure)
            with pytest.raises(checkpoint.CheckpointWriteError) as raised:
                write(root, 2, tiny)
        assert str(raised.value).startswith(f"checkpoint step-000002 could not be written under {root} (")
        assert message in str(raised.value) and "\n" not in str(raised.value)
        assert str(raised.value).endswith("the earlier checkpoints are kept")
        assert isinstance(raised.value, OSError)  # the commands' OSError handlers make it one line
        assert not any(p.name.startswith(".tmp-") for p in root.iterdir())  # nothing half-written left
        folder, _, info = load_latest_checkpoint(root)
        assert folder.name == "step-000001" and info["step"] == 1
        assert (root / "latest").read_text().strip() == folder.name
    write(root, 2, tiny)
    assert load_latest_checkpoint(root)[2]["step"] == 2


def test_a_cache_path_that_is_a_directory_is_a_one_line_error(tmp_path, capsys):
    assert main(["train", "demo-quick-tiny", "--set", f"simulator.cache_path={tmp_path}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: simulator.cache_path '{tmp_path}' is a directory; give the SQLite file's path"


def test_no_progress_bars_when_progress_is_off(tmp_path, capfd):
    from slca_grpo.config import load_yaml_config
    from slca_grpo.presets import resolve_config_path
    from slca_grpo.trainer.run import RunConfig, train

    overrides = [f"train.out_dir={tmp_path}", "data.n_train=20", "data.n_test=2", "sft.steps=1", "sft.batch_size=4",
                 "rl.steps=0", "train.eval_tasks=0", "train.progress=false"]  # fmt: skip
    train(load_yaml_config(RunConfig, resolve_config_path("demo-quick-tiny"), overrides), echo=False)
    err = capfd.readouterr().err
    assert "Writing model shards" not in err and "Loading weights" not in err
