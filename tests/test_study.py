"""The credit-assignment study: plan parsing, the report on constructed runs, and a tiny end-to-end
study that checks pairing, resuming and the outputs."""

import argparse
import dataclasses
import json
import re

import pytest
import yaml

from slca_grpo.cli import main
from slca_grpo.cli.study import add_arguments, plan_from_args
from slca_grpo.config import ConfigError
from slca_grpo.study import runner as study_runner
from slca_grpo.study.arms import run_count, trained_once, trained_runs
from slca_grpo.study.noise import parse_noise_levels
from slca_grpo.study.plan import (
    DEFAULT_BUDGET,
    QUICK_BUDGET,
    NoiseLevel,
    StudyBudget,
    StudyPlan,
    run_dir,
)
from slca_grpo.study.report import write_study_report
from slca_grpo.study.tables import format_interval, significance_marker, wins_text


def test_noise_levels_parse_into_names_labels_and_overrides():
    levels = parse_noise_levels("none, std=0.5,prob=1,std=0.25+prob=0.5")
    assert [lv.name for lv in levels] == ["none", "std0.5", "prob1", "std0.25+prob0.5"]
    assert [lv.label for lv in levels] == ["none", "σ=0.5", "p=1", "σ=0.25+p=0.5"]
    assert levels[3].overrides() == ["reward.summary_noise_std=0.25", "reward.summary_noise_prob=0.5"]
    for spec, message in (
        ("none,sd=1", "cannot read 'sd=1'"),
        ("std=x", "std='x' is not a number"),
        ("prob=2", "summary_noise_prob must be in [0, 1]"),
        ("std=1+std=2", "std given twice"),
        ("none,prob=0.5,prob=.5", "level prob0.5 given twice"),
        (",", "at least one level"),
    ):
        with pytest.raises(ConfigError, match=re.escape(message)):
            parse_noise_levels(spec)


def parse(*argv):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return plan_from_args(parser.parse_args(argv))


def test_budgets_and_command_line_options():
    plan = parse()
    assert plan.budget == DEFAULT_BUDGET and plan.estimators == ("grpo", "slca", "slca-no-summary")
    assert plan.baseline == "grpo" and DEFAULT_BUDGET.seeds >= 8 and QUICK_BUDGET.seeds >= 8
    assert len(plan.levels) >= 2 and plan.levels[0].name == "none" and plan.seeds == tuple(range(DEFAULT_BUDGET.seeds))
    overrides = plan.budget_overrides()
    assert f"rl.prompts_per_step={DEFAULT_BUDGET.prompts_per_step}" in overrides
    assert f"rl.mini_batch_prompts={DEFAULT_BUDGET.prompts_per_step}" in overrides
    assert f"data.n_test={DEFAULT_BUDGET.eval_tasks}" in overrides  # a synthetic test split that large exists
    assert parse("--quick").budget == QUICK_BUDGET
    plan = parse(
        "--quick",
        "--seeds",
        "4",
        "--steps",
        "7",
        "--eval-tasks",
        "9",
        "--prompts",
        "3",
        "--noise",
        "none,std=1",
        "--estimators",
        "slca",
        "toolpo",
        "--set",
        "rl.lr=0.01",
    )
    assert (plan.budget.seeds, plan.budget.steps, plan.budget.eval_tasks, plan.budget.prompts_per_step) == (4, 7, 9, 3)
    assert (
        run_count(plan) == 4 * (2 + 1) and plan.baseline == "slca"
    )  # toolpo: one level, the noise cannot reach it and plan.overrides == ("rl.lr=0.01",)
    every = -(-7 // QUICK_BUDGET.evals)  # evenly spaced, the last at the end
    assert "rl.steps=7" in plan.budget_overrides() and f"train.eval_every={every}" in plan.budget_overrides()
    assert StudyPlan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan
    for argv, message in (
        (("--seeds", "0"), "--seeds must be >= 1"),
        (("--prompts", "0"), "--prompts must be >= 1"),
        (("--estimators", "grpo", "grpo"), "given twice"),
    ):
        with pytest.raises(ConfigError, match=message):
            parse(*argv)


def test_intervals_significance_and_wins_are_formatted():
    assert format_interval({"mean": 0.1234, "low": 0.1, "high": 0.15, "n": 5}, 100.0) == "12.3 [10.0, 15.0]"
    # A bootstrap CI that excludes 0 is not a test: no marker comes from it.
    assert format_interval({"mean": 0.02, "low": 0.01, "high": 0.04, "n": 5}, 100.0, signed=True) == "+2.0 [+1.0, +4.0]"
    assert (
        format_interval({"mean": 0.02, "low": -0.01, "high": 0.04, "n": 5}, 1.0, signed=True)
        == "+0.020 [-0.010, +0.040]"
    )
    assert format_interval({"mean": 0.5, "low": None, "high": None, "n": 1}) == "0.500 (n=1)"
    assert format_interval(None) == "–"
    # Significance is the exact test's: * below 0.05, ** when the Holm-adjusted p is too.
    assert significance_marker({"p": 0.0625}) == "" and significance_marker(None) == ""
    assert significance_marker({"p": 0.0078, "holm_p": 0.09}) == "*"
    assert significance_marker({"p": 0.0078, "holm_p": 0.04}) == "**"
    assert wins_text({"wins": 6, "n": 8, "ties": 0}) == "6/8"
    assert wins_text({"wins": 5, "n": 8, "ties": 1}) == "5/8, 1 tied"


def fake_run(path, *, start, final, cosine, extra=None, truncated=None, provenance=None):
    """A finished RL run: held-out Name-F1 ``start`` → ``final``, a constant gradient cosine;
    ``extra`` metrics in every evaluation; ``truncated``: each step's ``rollout/truncated``;
    ``provenance``: the run's recorded code and environment."""
    path.mkdir(parents=True)
    if provenance is not None:
        (path / "provenance.json").write_text(json.dumps(provenance))
    evals = [
        {"step": -1, "n": 8, "name_f1": start, "r_sum": 0.1, **(extra or {})},
        {"step": 1, "n": 8, "name_f1": (start + final) / 2, "r_sum": 0.2, **(extra or {})},
        {"step": 3, "n": 8, "name_f1": final, "r_sum": 0.3, **(extra or {})},
    ]
    (path / "summary.json").write_text(
        json.dumps({"estimator": path.parent.name, "steps": 4, "final_eval": evals[-1], "evals": evals})
    )
    rows = [
        {"step": s, "reward/tool": 0.1 * s, "reward/summary": 0.2, "diag/grad_cosine_tool_summary": cosine}
        for s in range(4)
    ]
    for row, value in zip(rows, truncated or ()):
        row["rollout/truncated"] = value
    rows.append(
        {"step": 3, "reward/tool": 0.3, "reward/summary": 0.2, "diag/grad_cosine_tool_summary": cosine}
    )  # replayed
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (path / "config.yaml").write_text(
        yaml.safe_dump({"rl": {"steps": 4, "prompts_per_step": 2}, "rollout": {"group_size": 3}})
    )


def test_the_report_on_constructed_runs_has_the_known_answers(tmp_path):
    levels = (NoiseLevel(), NoiseLevel(prob=1.0))
    plan = StudyPlan(
        StudyBudget("demo-quick-tiny", seeds=4, noise="none,prob=1", steps=4, evals=2, eval_tasks=8),
        ("grpo", "slca"),
        levels,
    )
    seed_offset = [0.0, 0.2, -0.1, 0.3]  # shared by both estimators of a seed: pairing removes it
    for seed, offset in enumerate(seed_offset):
        for level, noise_cost in zip(levels, (0.0, 0.1)):
            fake_run(run_dir(tmp_path, level, "grpo", seed), start=0.4, final=0.5 + offset - noise_cost, cosine=-0.2)
            fake_run(run_dir(tmp_path, level, "slca", seed), start=0.4, final=0.55 + offset, cosine=0.1)
    report = write_study_report(tmp_path, plan)
    cells, compared = report["cells"], report["comparisons"]
    grpo = cells["none"]["grpo"]
    assert grpo["final"]["name_f1"]["mean"] == pytest.approx(0.5 + sum(seed_offset) / 4)
    assert grpo["delta"]["name_f1"]["mean"] == pytest.approx(0.1 + sum(seed_offset) / 4)
    assert grpo["grad_cosine"]["mean"] == pytest.approx(-0.2) and grpo["grad_cosine"]["low"] == pytest.approx(-0.2)
    assert grpo["curves"]["name_f1"]["steps"] == [0, 2, 4]
    assert grpo["training"]["reward/tool"]["steps"] == [0, 1, 2, 3]
    # SLCA − GRPO is exactly 0.05 without noise and 0.15 with it, on every seed: zero-width CIs.
    for level, gap in (("none", 0.05), ("prob1", 0.15)):
        difference = compared["paired"][level]["slca - grpo"]["name_f1"]
        assert difference["mean"] == pytest.approx(gap) and difference["low"] == pytest.approx(gap)
        assert difference["wins"] == 4 and difference["seeds"] == [0, 1, 2, 3]
    assert compared["noise_effect"]["grpo"]["prob1 - none"]["name_f1"]["mean"] == pytest.approx(-0.1)
    assert compared["noise_effect"]["slca"]["prob1 - none"]["name_f1"]["high"] == pytest.approx(0.0)
    assert compared["interaction"]["slca - grpo"]["prob1 - none"]["name_f1"]["mean"] == pytest.approx(0.1)
    # Four seeds all one way: the exact sign-flip p is 2/2⁴, which no test at 0.05 can pass.
    assert compared["paired"]["prob1"]["slca - grpo"]["name_f1"]["p"] == pytest.approx(0.125)
    assert compared["paired"]["prob1"]["slca - grpo"]["name_f1"]["t_low"] == pytest.approx(0.15)
    table = (tmp_path / "report.md").read_text()
    assert "| p=1 · slca − grpo | Name-F1 | +15.0 | [+15.0, +15.0] | [+15.0, +15.0] | 0.125 | 0.500 | 4/4 |" in table
    assert report["settings"]["steps"] == 4 and report["settings"]["eval_tasks"] == 8
    for chart in ("curves.png", "training.png", "noise_levels.png"):
        assert (tmp_path / chart).stat().st_size > 5000
    assert json.loads((tmp_path / "report.json").read_text())["metrics"][2] == "name_f1"


def test_three_estimators_are_compared_pairwise_with_per_step_scores(tmp_path):
    plan = StudyPlan(
        StudyBudget("demo-quick-tiny", seeds=3, noise="none", steps=4, evals=2, eval_tasks=8),
        ("grpo", "slca", "slca-turn"),
        (NoiseLevel(),),
    )
    for seed in range(3):
        for estimator, step2 in (("grpo", 0.4), ("slca", 0.5), ("slca-turn", 0.7)):
            extra = {"step/1": 0.8, "step/2": step2 + 0.1 * seed}
            fake_run(run_dir(tmp_path, NoiseLevel(), estimator, seed), start=0.4, final=0.5, cosine=0.0, extra=extra)
    report = write_study_report(tmp_path, plan)
    assert report["metrics"][-2:] == ["step/1", "step/2"]
    paired = report["comparisons"]["paired"]["none"]
    assert list(paired) == ["slca - grpo", "slca-turn - grpo", "slca-turn - slca"]
    assert paired["slca-turn - slca"]["step/2"]["mean"] == pytest.approx(0.2)
    assert paired["slca-turn - slca"]["step/1"]["mean"] == pytest.approx(0.0)
    table = (tmp_path / "report.md").read_text()
    assert "### Paired differences" in table and "| Step 1 | Step 2 |" in table
    assert "| none · slca-turn − slca | Name-F1 | +0.0 |" in table and "| Step 2 | +20.0 | [+20.0, +20.0] |" in table


def test_eight_seeds_exact_tests_holm_truncation_and_one_provenance(tmp_path):
    from slca_grpo.provenance import provenance

    plan = StudyPlan(
        StudyBudget("demo-quick-tiny", seeds=8, noise="none", steps=4, evals=2, eval_tasks=8),
        ("grpo", "slca", "slca-no-summary"),
        (NoiseLevel(),),
    )
    here = provenance()
    for seed in range(8):
        # slca beats grpo by 0.1 on every seed; the control differs from grpo by ±0.05, alternating.
        finals = {"grpo": 0.5, "slca": 0.6, "slca-no-summary": 0.5 + (0.05 if seed % 2 else -0.05)}
        for estimator, final in finals.items():
            truncated = [0.5, 0.25, 0.25, 0.0] if estimator == "grpo" else [0.0] * 4
            fake_run(
                run_dir(tmp_path, NoiseLevel(), estimator, seed),
                start=0.4,
                final=final + 0.01 * seed,
                cosine=0.0,
                extra={"truncated": 0.125 if estimator == "grpo" else 0.0},
                truncated=truncated,
                provenance=here,
            )
    report = write_study_report(tmp_path, plan)
    paired = report["comparisons"]["paired"]["none"]
    lead = paired["slca - grpo"]["name_f1"]
    assert lead["p"] == pytest.approx(2 / 2**8) and (lead["wins"], lead["losses"], lead["ties"]) == (8, 0, 0)
    # Holm over the table: 3 pairs × the 2 metrics these runs have = 6 tests. Two have p = 2/2⁸
    # (slca − grpo, and slca-no-summary − slca, whose seeds all lose), four have p = 1 (R_sum is
    # tied on every seed; the control's ±0.05 sums to 0): the smallest is multiplied by 6.
    assert lead["holm_p"] == pytest.approx(6 * 2 / 2**8)
    assert paired["slca-no-summary - slca"]["name_f1"]["holm_p"] == pytest.approx(6 * 2 / 2**8)
    control = paired["slca-no-summary - grpo"]["name_f1"]
    assert control["p"] == pytest.approx(1.0) and (control["wins"], control["losses"]) == (4, 4)
    cell = report["cells"]["none"]["grpo"]
    assert cell["train_truncated"]["mean"] == pytest.approx(0.25)
    assert cell["final"]["truncated"]["mean"] == pytest.approx(0.125)
    assert report["settings"]["code"].startswith(("commit", "no git checkout"))
    table = (tmp_path / "report.md").read_text()
    assert f"Code and environment of every run: {report['settings']['code']}." in table
    # 8 seeds one way: p = 0.0078, and 0.047 after Holm: two stars.
    assert "| none · slca − grpo | Name-F1 | +10.0** |" in table
    assert "| none · grpo | – | – | 53.5 [" in table and "| 12.5 [12.5, 12.5] | 25.0 [25.0, 25.0] |" in table
    # The change table shows them too: the held-out share's change (0 here) and the training share.
    assert "| +0.0 [+0.0, +0.0] | 25.0 [25.0, 25.0] |" in table
    # Runs of different code are never paired in one report.
    other = {**here, "source_digest": "0" * 16, "commit": "f" * 40}
    (run_dir(tmp_path, NoiseLevel(), "slca", 3) / "provenance.json").write_text(json.dumps(other))
    with pytest.raises(ConfigError, match="different code or environments, and are not paired"):
        write_study_report(tmp_path, plan)
    # A damaged record (a list where a version goes) is said in the report, not a crash, and the
    # report is written anew.
    (run_dir(tmp_path, NoiseLevel(), "slca", 3) / "provenance.json").write_text(json.dumps({**here, "torch": [2]}))
    (tmp_path / "report.md").write_text("old")
    report = write_study_report(tmp_path, plan)
    assert report["settings"]["code"].startswith("not known: 1 of ")
    assert "torch is list, not text" in report["settings"]["code"]
    assert "Code and environment of every run: not known: 1 of " in (tmp_path / "report.md").read_text()


def test_the_report_says_when_the_runs_thread_settings_differ(tmp_path):
    from slca_grpo.provenance import provenance

    plan = StudyPlan(
        StudyBudget("demo-quick-tiny", seeds=2, noise="none", steps=4, evals=2, eval_tasks=8),
        ("grpo", "slca"),
        (NoiseLevel(),),
    )
    two = {"torch_threads": 2, "mkl_dynamic": "FALSE", "mkl_cbwr": "AUTO", "omp_dynamic": "FALSE"}
    for seed in range(2):
        for estimator in plan.estimators:
            fake_run(
                run_dir(tmp_path, NoiseLevel(), estimator, seed),
                start=0.4,
                final=0.5,
                cosine=0.0,
                provenance={**provenance(), "threads": two},
            )
    report = write_study_report(tmp_path, plan)
    assert report["settings"]["threads"] == {
        "text": "2 torch threads, MKL_DYNAMIC=FALSE, MKL_CBWR=AUTO, OMP_DYNAMIC=FALSE",
        "differ": False,
    }
    assert "Threads of every run: 2 torch threads, MKL_DYNAMIC=FALSE" in (tmp_path / "report.md").read_text()
    # One run resumed on one thread: its steps mix the two, and the report says the runs differ.
    one = run_dir(tmp_path, NoiseLevel(), "slca", 1) / "provenance.json"
    one.write_text(json.dumps({**json.loads(one.read_text()), "threads_resumed": {**two, "torch_threads": 1}}))
    report = write_study_report(tmp_path, plan)
    assert report["settings"]["threads"]["differ"] is True
    shown = report["settings"]["threads"]["text"]
    assert "1 torch threads, MKL_DYNAMIC=FALSE, MKL_CBWR=AUTO, OMP_DYNAMIC=FALSE (1 runs)" in shown
    assert "**The runs' thread settings differ**" in (tmp_path / "report.md").read_text()


TINY = (
    "data.n_train=40",
    "data.n_test=4",
    "sft.steps=4",
    "sft.batch_size=4",
    "rollout.group_size=3",
    "rollout.max_response_tokens=48",
    "rollout.max_turns=2",
    "rl.prompts_per_step=2",
    "rl.mini_batch_prompts=2",
    "rl.micro_batch_rollouts=6",
    "rl.diagnostics_every=1",
    "data.probe_tasks=2",  # the probe set's curve is tested in tests/test_probe.py
)


@pytest.mark.slow
def test_a_tiny_study_end_to_end_with_paired_prompts_and_resume(tmp_path, monkeypatch, capsys):
    from slca_grpo.trainer.rl import RLTrainer

    seen: dict[tuple, list[str]] = {}
    original_step = RLTrainer.step

    def recording_step(self, tasks, step_index):
        key = (self.seed, self.reward_config.summary_noise_prob, self.config.estimator, step_index)
        seen[key] = [t.id for t in tasks]
        return original_step(self, tasks, step_index)

    monkeypatch.setattr(RLTrainer, "step", recording_step)
    scored = []

    def fake_bfcl(model, folder, categories, limit, *, scratch, **options):
        """BFCL scoring as the study asks for it (scored for real in tests/test_study_outcomes.py)."""
        scored.append((model, folder, categories, limit))
        (folder / "bfcl").mkdir(parents=True)
        summary = {"overall_accuracy": 0.5, "categories": {"simple_python": {"accuracy": 0.5}}}
        (folder / "bfcl" / "summary.json").write_text(json.dumps(summary))
        return 1.0

    monkeypatch.setattr(study_runner, "score_on_bfcl", fake_bfcl)
    out = tmp_path / "study"
    argv = [
        "study",
        "--preset",
        "demo-quick-tiny",
        "--out",
        str(out),
        "--seeds",
        "2",
        "--steps",
        "2",
        "--eval-tasks",
        "2",
        "--noise",
        "none,std=0.5+prob=0.5",
        "--estimators",
        "grpo",
        "slca",
        "--bfcl",
        "simple",
        "--bfcl-limit",
        "1",
        "--primary",
        "success@0.7",
        *[arg for item in TINY for arg in ("--set", item)],
    ]
    assert main(argv) == 0
    # BFCL: the start once, then every run's last checkpoint.
    assert [(m.relative_to(out).as_posix(), f.relative_to(out).as_posix()) for m, f, *_ in scored[:2]] == [
        ("sft", "start"),
        ("none/grpo/seed-0/checkpoints/step-000001/model", "none/grpo/seed-0"),
    ]
    assert len(scored) == 9 and all(entry[2:] == (["simple"], 1) for entry in scored)
    # The runs of a seed share its start: the first evaluated it (and kept its items), the others
    # were given its record.
    first, other = run_dir(out, NoiseLevel(), "grpo", 0), run_dir(out, NoiseLevel(0.5, 0.5), "slca", 0)
    assert (first / "eval_start_items.jsonl").is_file() and not (other / "eval_start_items.jsonl").exists()
    starts = [json.loads((run / "summary.json").read_text())["evals"][0] for run in (first, other)]
    assert starts[0] == starts[1] and starts[0]["step"] == -1
    assert len(seen) == 2 * 2 * 2 * 2  # seeds × levels × estimators × steps
    for (seed, _prob, _estimator, step), ids in seen.items():
        # Pairing: both estimators of a seed, at every noise level, saw the same prompts.
        assert ids == seen[(seed, 0.0, "grpo", step)]
    assert seen[(0, 0.0, "grpo", 0)] != seen[(1, 0.0, "grpo", 0)]

    report = json.loads((out / "report.json").read_text())
    assert set(report) >= {"settings", "start_eval", "cells", "comparisons", "seconds", "metrics"}
    assert set(report["cells"]) == {"none", "std0.5+prob0.5"}
    cell = report["cells"]["std0.5+prob0.5"]["slca"]
    assert cell["seeds"] == [0, 1] and cell["final"]["name_f1"]["n"] == 2
    assert set(cell) >= {"final", "delta", "grad_cosine", "noise", "curves", "training"}
    assert cell["curves"]["name_f1"]["steps"] == [0, 1, 2]
    assert set(report["comparisons"]["paired"]["none"]["slca - grpo"]) == set(report["metrics"])
    assert report["seconds"]["runs"] == 8
    assert report["bfcl"]["metrics"] == ["bfcl/simple_python", "bfcl/overall"] and len(report["bfcl"]["seconds"]) == 9
    primary = [test["comparison"] for test in report["primary"]["tests"]]
    assert primary == ["grpo - start", "slca - start", "slca - grpo"]
    assert all(test["task_level"]["tasks"] == 2 for test in report["primary"]["tests"])
    for name in ("report.md", "curves.png", "training.png", "noise_levels.png", "study.json", "sft/config.json"):
        assert (out / name).exists(), name
    noisy_metrics = (run_dir(out, NoiseLevel(0.5, 0.5), "grpo", 0) / "metrics.jsonl").read_text()
    assert '"noise/std"' in noisy_metrics and '"reward/summary"' in noisy_metrics
    assert '"noise/' not in (run_dir(out, NoiseLevel(), "grpo", 0) / "metrics.jsonl").read_text()
    assert "[study] 8/8 std0.5+prob0.5/slca/seed-1" in capsys.readouterr().out

    # Finished runs are skipped; runs made with other settings are refused, not mixed in.
    seen.clear()
    assert main(argv) == 0 and not seen and len(scored) == 9
    assert main([*argv, "--set", "rl.lr=0.123"]) == 2
    assert "was run with other settings (rl.lr:" in capsys.readouterr().err
    assert main([*argv, "--set", "sft.steps=5"]) == 2
    assert "runs from an SFT checkpoint made with other settings" in capsys.readouterr().err
    assert main(["study", "--report-only", "--out", str(out)]) == 0
    assert report["settings"]["code"] and (run_dir(out, NoiseLevel(), "slca", 1) / "provenance.json").exists()
    # A run made with other code (or without a record of it) is never paired with runs made now.
    recorded = run_dir(out, NoiseLevel(), "slca", 1) / "provenance.json"
    saved = json.loads(recorded.read_text())
    recorded.write_text(json.dumps({**saved, "source_digest": "0" * 16}))
    assert main(argv) == 2
    assert "cannot be paired with runs made now: it was run with" in capsys.readouterr().err
    recorded.unlink()
    assert main(argv) == 2
    assert "did not record its code and environment" in capsys.readouterr().err
    recorded.write_text(json.dumps(saved))
    assert main(["study", "--report-only", "--out", str(tmp_path / "nothing")]) == 2
    for broken in ('{"budget": {"x": 1}}', "[1, 2]"):
        bad = tmp_path / "broken"
        bad.mkdir(exist_ok=True)
        (bad / "study.json").write_text(broken)
        assert main(["study", "--report-only", "--out", str(bad)]) == 2
    assert main(["study", "--out", str(tmp_path / "x"), "--noise", "std=-1"]) == 2
    assert "summary_noise_std must be >= 0" in capsys.readouterr().err


def test_a_study_refuses_a_training_runs_folder_a_file_and_a_checkpoint_before_any_work(tmp_path, capsys):
    from slca_grpo.cli import main

    run = tmp_path / "run"
    (run / "checkpoints" / "step-000003").mkdir(parents=True)
    (run / "summary.json").write_text("{}")
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    for out, message in (
        (run, f"error: --out {run} holds a training run (summary.json, checkpoints), not a study; give the study"),
        (a_file, f"error: --out {a_file} is a file, not a folder"),
        (run / "checkpoints" / "step-000003" / "s", "is inside the checkpoint"),
    ):
        assert main(["study", "--out", str(out), "--quick"]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    assert sorted(p.name for p in run.iterdir()) == ["checkpoints", "summary.json"] and a_file.read_text() == "mine"


def test_a_saved_config_that_predates_a_key_matches_its_default(tmp_path):
    from slca_grpo.config import save_yaml_config, to_dict
    from slca_grpo.study.runner import settings_difference
    from slca_grpo.trainer.run import RunConfig

    config = RunConfig()
    saved = tmp_path / "config.yaml"
    save_yaml_config(config, saved)
    older = yaml.safe_load(saved.read_text())
    del older["train"]["plugins"]
    saved.write_text(yaml.safe_dump(older))
    assert settings_difference(saved, config) is None

    data = to_dict(config)
    data["rl"]["lr"] = config.rl.lr * 2
    saved.write_text(yaml.safe_dump(data))
    assert settings_difference(saved, config).startswith("rl.lr:")


def test_an_arm_the_noise_cannot_reach_is_trained_once_and_reported_at_every_level(tmp_path):
    from slca_grpo.algos import estimator_spec

    # slca-no-summary declares it; toolpo and rltr read neither summary nor score; the others are reached.
    assert [estimator_spec(e).noise_blind for e in ("grpo", "slca", "slca-no-summary", "toolpo", "rltr")] == [
        False,
        False,
        True,
        True,
        True,
    ]
    levels = (NoiseLevel(), NoiseLevel(prob=1.0))
    plan = StudyPlan(
        StudyBudget("demo-quick-tiny", seeds=2, noise="none,prob=1", steps=2, evals=1, eval_tasks=8),
        ("grpo", "slca-no-summary"),
        levels,
    )
    assert list(trained_runs(plan)) == [
        (0, levels[0], "grpo"),
        (0, levels[0], "slca-no-summary"),
        (0, levels[1], "grpo"),
        (1, levels[0], "grpo"),
        (1, levels[0], "slca-no-summary"),
        (1, levels[1], "grpo"),
    ]
    assert run_count(plan) == 6
    # Whatever the order of the levels: the control is trained once, at the reference (no noise).
    reversed_plan = dataclasses.replace(plan, levels=levels[::-1])
    assert trained_once(plan) == trained_once(reversed_plan) == ["slca-no-summary"]
    assert {level for _, level, e in trained_runs(reversed_plan) if e == "slca-no-summary"} == {levels[0]}
    assert trained_once(dataclasses.replace(plan, levels=levels[:1])) == []
    for seed in range(2):
        fake_run(run_dir(tmp_path, levels[0], "grpo", seed), start=0.4, final=0.5, cosine=0.0)
        fake_run(run_dir(tmp_path, levels[1], "grpo", seed), start=0.4, final=0.45, cosine=0.0)
        fake_run(run_dir(tmp_path, levels[0], "slca-no-summary", seed), start=0.4, final=0.6 + 0.1 * seed, cosine=0.0)
    report = write_study_report(tmp_path, plan)
    blind = {name: report["cells"][name]["slca-no-summary"] for name in ("none", "prob1")}
    assert blind["prob1"]["seeds"] == [0, 1] and blind["prob1"]["final"] == blind["none"]["final"]
    assert not (tmp_path / "prob1" / "slca-no-summary").exists()
    # Its lead over GRPO under noise is paired with its one run per seed: 0.6, 0.7 against 0.45.
    lead = report["comparisons"]["paired"]["prob1"]["slca-no-summary - grpo"]["name_f1"]
    assert lead["mean"] == pytest.approx(0.65 - 0.45)
