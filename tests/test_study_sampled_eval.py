"""benchmarks/study_sampled_eval.py on a made-up finished study, with ``slca eval indomain``
replaced by a stub: every model is evaluated through its run (``--run``), kept evaluations are
reused only with the settings they were made with, a malformed study is one line, and ``--out``
never overwrites the study."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from slca_grpo.config import load_yaml_config, save_yaml_config
from slca_grpo.study.plan import PLAN_FILE, StudyBudget, StudyPlan
from slca_grpo.trainer.run_config import RunConfig, run_settings

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "study_sampled_eval.py"
_spec = importlib.util.spec_from_file_location("benchmarks_study_sampled_eval", _PATH)
sampled_eval = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = sampled_eval
_spec.loader.exec_module(sampled_eval)

PLAN = StudyPlan(
    StudyBudget(preset="demo-quick", seeds=2, noise="none", steps=1, evals=1, eval_tasks=4), ("grpo", "slca")
)
# The first run of the plan (none/grpo/seed-0) is missing: the others are finished.
FINISHED = ("none/slca/seed-0", "none/grpo/seed-1", "none/slca/seed-1")


def run_config(**data) -> RunConfig:
    base = RunConfig()
    return dataclasses.replace(
        base,
        data=dataclasses.replace(base.data, n_train=40, n_test=4, probe_tasks=0, **data),
        train=dataclasses.replace(base.train, eval_tasks=4),
    )


def make_run(folder: Path, config: RunConfig) -> None:
    model = folder / "checkpoints" / "step-000000" / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (folder / "checkpoints" / "latest").write_text("step-000000\n")
    (folder / "summary.json").write_text("{}")
    save_yaml_config(run_settings(config), folder / "config.yaml")


@pytest.fixture
def study(tmp_path: Path) -> Path:
    folder = tmp_path / "study"
    folder.mkdir()
    (folder / PLAN_FILE).write_text(json.dumps(PLAN.to_dict()))
    (folder / "report.md").write_text("the study's own report\n")
    (folder / "sft").mkdir()
    (folder / "sft" / "config.json").write_text("{}")
    config = run_config()
    for name in FINISHED:
        make_run(folder / name, config)
    return folder


@pytest.fixture
def evaluations(monkeypatch) -> list[list[str]]:
    """``slca eval indomain`` stubbed: a summary with the settings it was asked for."""
    calls: list[list[str]] = []

    def value(command: list[str], flag: str, default: str) -> str:
        return command[command.index(flag) + 1] if flag in command else default

    def slca(command: list[str]) -> int:
        calls.append(command)
        assert command[:3] == ["eval", "indomain", "--run"] and "--policy" not in command
        out = Path(value(command, "--out", ""))
        out.mkdir(parents=True, exist_ok=True)
        sampled = "--samples" in command
        samples = int(value(command, "--samples", "1"))
        limit = int(value(command, "--limit", "0")) or None
        run = load_yaml_config(RunConfig, Path(value(command, "--run", "")) / "config.yaml")
        score = 0.4 if value(command, "--checkpoint", "") == "start" else 0.6
        summary = {  # what slca eval indomain --run writes of its settings
            "n": (limit or run.train.eval_tasks) * samples,
            "samples": samples,
            "temperature": run.rollout.temperature if sampled else 0.0,
            "seed": int(value(command, "--seed", str(run.train.seed))),
            "limit": limit,
            "r_tool": score,
            "success@0.7": score,
            "name_f1": score,
            "arg_match": score,
            "truncated": 0.0,
            "by_tools": {"seen_tools": {"r_tool": score}, "new_tools": {"r_tool": score}},
        }
        (out / "summary.json").write_text(json.dumps(summary))
        return 0

    monkeypatch.setattr(sampled_eval, "slca", slca)
    return calls


def refused(argv: list[str]) -> str:
    with pytest.raises(SystemExit) as stop:
        sampled_eval.main(argv)
    message = str(stop.value.code)
    assert message.startswith("error: ") and "\n" not in message, message
    return message


def test_a_rerun_reuses_only_evaluations_made_with_its_settings(study, tmp_path, evaluations, capsys):
    out = tmp_path / "sampled"
    assert sampled_eval.main([str(study), "--out", str(out), "--samples", "2"]) == 0
    assert len(evaluations) == 8  # the start and three runs, sampled and greedy
    err = capsys.readouterr().err
    assert f"note: 1 run(s) are missing or unfinished, left out: {study / 'none' / 'grpo' / 'seed-0'}" in err
    report = json.loads((out / "report.json").read_text())
    assert (report["samples"], report["seed"], report["limit"], report["tasks"]) == (2, 0, None, 4)
    assert "each run's own held-out tasks" in report["tasks_source"]
    start = [command for command in evaluations if "start" in command]
    assert len(start) == 2 and all(str(study / "none" / "grpo" / "seed-1") in command for command in start)
    kept = {path: path.read_bytes() for path in out.glob("*/summary.json")}
    assert sampled_eval.main([str(study), "--out", str(out), "--samples", "2"]) == 0
    assert len(evaluations) == 8  # the same settings: every evaluation kept
    for other, shown in (
        (["--samples", "3"], "samples 2 (now 3)"),
        (["--samples", "2", "--seed", "1"], "seed 0 (now 1)"),
        (["--samples", "2", "--limit", "2"], "limit None (now 2)"),
    ):
        message = refused([str(study), "--out", str(out), *other])
        assert f"{out} holds evaluations made with other settings: " in message and shown in message, message
    assert len(evaluations) == 8 and {p: p.read_bytes() for p in out.glob("*/summary.json")} == kept
    # An OUT of the earlier script (no settings.json): each kept evaluation is checked instead.
    (out / sampled_eval.SETTINGS_FILE).unlink()
    message = refused([str(study), "--out", str(out), "--samples", "3"])
    assert "holds an evaluation made with other settings: samples 2 (now 3)" in message, message
    assert not (out / sampled_eval.SETTINGS_FILE).exists()  # nothing recorded for settings it does not hold
    assert sampled_eval.main([str(study), "--out", str(out), "--samples", "2"]) == 0
    assert len(evaluations) == 8 and json.loads((out / sampled_eval.SETTINGS_FILE).read_text())["samples"] == 2


def test_out_is_never_the_study_or_inside_its_runs(study, evaluations):
    for out in (study, study / "none" / "grpo", study / "sft" / "x"):
        assert "--out" in refused([str(study), "--out", str(out)])
    assert (study / "report.md").read_text() == "the study's own report\n" and not evaluations


@pytest.mark.parametrize(
    "plan",
    [
        "[]",
        "{not json",
        json.dumps({"budget": {}}),
        json.dumps({**PLAN.to_dict(), "estimators": []}),
        json.dumps({**PLAN.to_dict(), "estimators": ["no-such-estimator"]}),
        json.dumps({**PLAN.to_dict(), "levels": [{"std": "high"}]}),
        json.dumps({**PLAN.to_dict(), "budget": {**PLAN.to_dict()["budget"], "seeds": "eight"}}),
    ],
)
def test_a_malformed_study_plan_is_one_line_naming_it(study, tmp_path, evaluations, plan):
    (study / PLAN_FILE).write_text(plan)
    message = refused([str(study), "--out", str(tmp_path / "out")])
    assert PLAN_FILE in message and not evaluations


def test_missing_runs_sft_or_settings_are_one_line(study, tmp_path, evaluations):
    out = str(tmp_path / "out")
    (study / "none" / "slca" / "seed-1" / "config.yaml").write_text("rl: [unclosed\n")
    assert "seed-1" in refused([str(study), "--out", out])
    save_yaml_config(run_settings(run_config(seed=7)), study / "none" / "slca" / "seed-1" / "config.yaml")
    assert "recorded other data" in refused([str(study), "--out", out])
    for name in FINISHED:
        (study / name / "summary.json").unlink()
    assert "holds no finished run" in refused([str(study), "--out", out])
    assert not evaluations
