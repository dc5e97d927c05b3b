"""MetricsLogger: JSONL and stdout always; TensorBoard and W&B (offline) read back after a run."""

from __future__ import annotations

import io
import math
import sys
import types

import pytest

from slca_grpo.trainer.logger import MetricsLogger, clock, progress_note, read_metrics


def test_jsonl_and_stdout_carry_every_step(tmp_path):
    out = io.StringIO()
    logger = MetricsLogger(tmp_path, stdout=out)
    logger.log(0, {"reward/score": 0.5, "train/kl": 1, "note": "text", "flag": True})
    logger.log(1, {"reward/score": 0.25, "eval/success@0.9": 0.125}, echo=True)
    logger.log(2, {"reward/score": 1.0}, echo=False)
    logger.close()
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert rows[0] == {"step": 0, "reward/score": 0.5, "train/kl": 1.0, "note": "text", "flag": True}
    lines = out.getvalue().splitlines()
    assert lines == ["step 0: score=0.5 kl=1", "step 1: score=0.25 eval/success@0.9=0.125"]


def test_the_step_line_shows_every_registered_reward_and_the_progress(tmp_path):
    from slca_grpo.rewards import register_reward
    from slca_grpo.rewards.registry import unregister_reward_family

    register_reward("calls_seen_by_logger")(lambda parsed, task, config: 1.0)
    try:
        out = io.StringIO()
        logger = MetricsLogger(tmp_path, stdout=out)
        metrics = {"reward/score": 0.5, "reward/calls_seen_by_logger": 2.0, "reward/judge_requests": 8.0}
        logger.log(3, metrics, progress=progress_note(4, 16, 42.0, done_here=2))
        logger.close()
    finally:
        unregister_reward_family("calls_seen_by_logger")
    # Counters (judge_requests) stay in metrics.jsonl; rewards, a plugin's too, are on the line.
    assert out.getvalue() == "step 3: score=0.5 calls_seen_by_logger=2 [4/16, 42s, ETA 4m12s]\n"


def test_progress_notes_count_the_steps_this_process_ran():
    assert progress_note(1, 10, 5.0) == "1/10, 5s, ETA 45s"
    assert progress_note(10, 10, 65.0) == "10/10, 1m05s"  # nothing left: no ETA
    assert progress_note(6, 10, 10.0, done_here=1) == "6/10, 10s, ETA 40s"  # resumed at step 5
    assert progress_note(5, 10, 0.0, done_here=0) == "5/10, 0s"
    assert clock(3725) == "1h02m"


def test_resume_appends_and_a_fresh_run_truncates(tmp_path):
    first = MetricsLogger(tmp_path, stdout=None)
    first.log(0, {"a": 1.0})
    first.close()
    resumed = MetricsLogger(tmp_path, stdout=None, resume=True)
    resumed.log(1, {"a": 2.0})
    resumed.close()
    assert [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [0, 1]
    fresh = MetricsLogger(tmp_path, stdout=None)
    fresh.log(5, {"a": 3.0})
    fresh.close()
    assert [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [5]


def test_tensorboard_events_hold_the_numeric_metrics(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logger = MetricsLogger(tmp_path, stdout=None, tensorboard=True)
    logger.log(0, {"reward/score": 0.5, "train/kl": math.nan, "note": "skipped"})
    logger.log(3, {"reward/score": 0.75, "train/kl": 0.01})
    logger.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert sorted(events.Tags()["scalars"]) == ["reward/score", "train/kl"]
    assert [(e.step, e.value) for e in events.Scalars("reward/score")] == [(0, 0.5), (3, 0.75)]
    assert [(e.step, pytest.approx(e.value)) for e in events.Scalars("train/kl")] == [(3, pytest.approx(0.01))]


class FakeRun:
    def __init__(self, **kwargs):
        self.init_kwargs = kwargs
        self.logged: list[tuple[dict, int]] = []
        self.finished = False

    def log(self, values, step):
        self.logged.append((dict(values), step))

    def finish(self):
        self.finished = True


@pytest.fixture
def fake_wandb(monkeypatch):
    runs: list[FakeRun] = []
    module = types.ModuleType("wandb")

    def init(**kwargs):
        runs.append(FakeRun(**kwargs))
        return runs[-1]

    module.init = init
    monkeypatch.setitem(sys.modules, "wandb", module)
    return runs


def test_wandb_gets_numeric_metrics_per_step_and_a_resumed_run_keeps_its_id(tmp_path, fake_wandb):
    logger = MetricsLogger(tmp_path, stdout=None, wandb=True, wandb_project="proj", run_name="demo", config={"lr": 0.1})
    logger.log(0, {"reward/score": 0.5, "note": "text", "bad": math.inf})
    logger.close()
    run = fake_wandb[0]
    assert run.init_kwargs["project"] == "proj" and run.init_kwargs["name"] == "demo"
    assert run.init_kwargs["config"] == {"lr": 0.1} and run.init_kwargs["dir"] == str(tmp_path)
    first_id = run.init_kwargs["id"]
    assert len(first_id) == 12 and run.init_kwargs["resume"] == "allow"
    assert run.logged == [({"reward/score": 0.5}, 0)] and run.finished

    MetricsLogger(tmp_path, stdout=None, wandb=True, resume=True).close()
    assert fake_wandb[1].init_kwargs["id"] == first_id  # the same W&B run continues
    MetricsLogger(tmp_path, stdout=None, wandb=True).close()
    assert fake_wandb[2].init_kwargs["id"] != first_id  # a fresh run gets a fresh id


def test_missing_optional_packages_are_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(RuntimeError, match="pip install wandb"):
        MetricsLogger(tmp_path, stdout=None, wandb=True)
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with pytest.raises(RuntimeError, match="pip install tensorboard"):
        MetricsLogger(tmp_path, stdout=None, tensorboard=True)


@pytest.mark.slow
def test_real_wandb_offline_run_records_the_metrics(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    logger = MetricsLogger(tmp_path, stdout=None, wandb=True, run_name="offline", config={"seed": 7})
    logger.log(0, {"reward/distinct_metric_name": 0.625})
    logger.close()
    # finish() only asks the wandb service to close the run's stream and does not wait for it, so
    # the record file may still lack its last records; teardown waits until the service has exited.
    import wandb

    wandb.teardown()
    run_id = (tmp_path / "metrics.wandb_id").read_text()
    records = list((tmp_path / "wandb").glob(f"offline-run-*-{run_id}/run-{run_id}.wandb"))
    assert len(records) == 1
    # The run file is a log of protobuf records: keys and JSON values are stored as plain bytes.
    data = records[0].read_bytes()
    assert b"reward/distinct_metric_name" in data and b"0.625" in data
