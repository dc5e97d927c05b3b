"""A study's primary family (Holm over three comparisons, a task-level permutation test beside
each), how its episodes ended, and its BFCL tables: hand-computed answers on constructed runs."""

import json

import pytest
import yaml

from slca_grpo.study.outcomes import bfcl_scores, read_bfcl, read_items, task_level_p
from slca_grpo.study.plan import NoiseLevel, StudyBudget, StudyPlan, run_dir
from slca_grpo.study.report import write_study_report
from slca_grpo.study.runner import seed_start

TASKS = ("t0", "t1", "t2", "t3")


def items(successes, **extra):
    """Items of an evaluation: task i has success@0.7 ``successes[i]``."""
    return {task: {"task_id": task, "success@0.7": float(s), **extra} for task, s in zip(TASKS, successes)}


def test_the_task_level_test_averages_seeds_per_task_and_flips_signs_task_by_task():
    treatment = [items([1, 1, 0, 0]), items([1, 0, 0, 1])]
    baseline = [items([0, 0, 0, 0]), items([0, 0, 0, 1])]
    test = task_level_p(treatment, baseline, "success@0.7")
    # Per task, the seed mean of the difference: t0 (1 + 1) / 2 = 1, t1 (1 + 0) / 2 = 0.5, t2 0, t3 0.
    assert test["tasks"] == 4 and test["mean"] == pytest.approx(1.5 / 4)
    assert (test["tasks_up"], test["tasks_down"]) == (2, 0)
    # |±1 ± 0.5| reaches 1.5 when the two signs agree: 2 of the 4 patterns of the nonzero tasks.
    assert test["p"] == pytest.approx(0.5)
    # Only the tasks every item set has are compared; a missing item set gives no test.
    shorter = {task: row for task, row in treatment[0].items() if task != "t0"}
    assert task_level_p([shorter, treatment[1]], baseline, "success@0.7")["tasks"] == 3
    assert task_level_p([None, treatment[1]], baseline, "success@0.7") is None
    assert task_level_p([], [], "success@0.7") is None


def test_items_and_bfcl_summaries_are_read_or_none(tmp_path):
    path = tmp_path / "eval_items.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in items([1, 0, 1, 0]).values()))
    assert read_items(path)["t2"]["success@0.7"] == 1.0
    path.write_text('{"task_id": "t0"}\nnot json\n')
    assert read_items(path) is None and read_items(tmp_path / "missing.jsonl") is None
    summary = {
        "overall_accuracy": 0.5,
        "categories": {"simple_python": {"accuracy": 0.6}, "multiple": {"accuracy": 0.4}},
    }
    assert bfcl_scores(summary) == {"bfcl/simple_python": 0.6, "bfcl/multiple": 0.4, "bfcl/overall": 0.5}
    assert bfcl_scores(None) == {}
    # A summary that is damaged or not BFCL's is no scoring: the study scores the model again.
    write_bfcl(tmp_path, 0.5, 0.25)
    assert read_bfcl(tmp_path)["overall_accuracy"] == pytest.approx(0.375)
    for damaged in ('{"overall_accuracy": 0.5}', '{"overall_accuracy": "x", "categories": {}}', "[1]", "{"):
        (tmp_path / "bfcl" / "summary.json").write_text(damaged)
        assert read_bfcl(tmp_path) is None


def write_run(path, *, start, final, start_items=None, final_items=None, bfcl=None, forced=0.0, train_forced=0.0):
    """A finished run: held-out Success@0.7 ``start`` → ``final``; per-task items; a BFCL summary."""
    path.mkdir(parents=True)
    common = {"n": 4, "truncated": 0.25, "repeat_calls": 0.5}
    evals = [
        {"step": -1, **common, "success@0.7": start, "forced_answer": 0.5},
        {"step": 3, **common, "success@0.7": final, "forced_answer": forced},
    ]
    (path / "summary.json").write_text(json.dumps({"final_eval": evals[-1], "evals": evals}))
    rows = [{"step": s, "rollout/truncated": 0.1, "rollout/forced_answer": train_forced} for s in range(4)]
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (path / "config.yaml").write_text(yaml.safe_dump({"rl": {"steps": 4}, "rollout": {"group_size": 4}}))
    for name, rows in (("eval_items.jsonl", final_items), ("eval_start_items.jsonl", start_items)):
        if rows is not None:
            (path / name).write_text("".join(json.dumps(row) + "\n" for row in rows.values()))
    if bfcl is not None:
        write_bfcl(path, *bfcl)


def write_bfcl(folder, simple, multiple):
    (folder / "bfcl").mkdir(parents=True)
    categories = {"simple_python": {"accuracy": simple}, "multiple": {"accuracy": multiple}}
    summary = {"overall_accuracy": (simple + multiple) / 2, "categories": categories}
    (folder / "bfcl" / "summary.json").write_text(json.dumps(summary))


def test_the_primary_family_endings_and_bfcl_of_an_eight_seed_study(tmp_path):
    budget = StudyBudget(
        "demo-quick-tiny", seeds=8, noise="none", steps=4, evals=1, eval_tasks=4, bfcl="simple", primary="success@0.7"
    )
    plan = StudyPlan(budget, ("grpo", "slca"), (NoiseLevel(),))
    start_items = items([1, 0, 0, 0])  # Success@0.7 0.25 at the start
    write_bfcl(tmp_path / "start", 0.5, 0.3)
    for seed in range(8):
        # GRPO gains one task on every seed (t1); SLCA gains t1 on every seed and t2 on even seeds.
        slca_final = items([1, 1, 1, 0]) if seed % 2 == 0 else items([1, 1, 0, 0])
        runs = {
            "grpo": (0.5, items([1, 1, 0, 0]), (0.5, 0.4), 0.25),
            "slca": (0.75 if seed % 2 == 0 else 0.5, slca_final, (0.6, 0.3), 0.0),
        }
        for estimator, (final, final_items, bfcl, forced) in runs.items():
            write_run(
                run_dir(tmp_path, NoiseLevel(), estimator, seed),
                start=0.25,
                final=final,
                # Only the seed's first run evaluated the start: the other was given its record.
                start_items=start_items if estimator == "grpo" else None,
                final_items=final_items,
                bfcl=bfcl,
                forced=forced,
                train_forced=0.125,
            )
    report = write_study_report(tmp_path, plan)
    tests = {test["comparison"]: test for test in report["primary"]["tests"]}
    assert list(tests) == ["grpo - start", "slca - start", "slca - grpo"]
    # Every seed up: exact p = 2/2⁸ for both estimators against the start; SLCA − GRPO is +0.25 on
    # the 4 even seeds and 0 on the odd ones, so p = 2/2⁴ (ties carry no sign).
    assert tests["grpo - start"]["mean"] == pytest.approx(0.25) and tests["grpo - start"]["p"] == pytest.approx(2 / 256)
    assert tests["slca - start"]["mean"] == pytest.approx(0.375) and tests["slca - start"]["p"] == pytest.approx(
        2 / 256
    )
    assert tests["slca - grpo"]["mean"] == pytest.approx(0.125) and tests["slca - grpo"]["p"] == pytest.approx(2 / 16)
    # Holm over the three: the two smallest p's times 3 and 2 (monotone), the largest times 1.
    assert tests["grpo - start"]["holm_p"] == pytest.approx(3 * 2 / 256)
    assert tests["slca - start"]["holm_p"] == pytest.approx(3 * 2 / 256)
    assert tests["slca - grpo"]["holm_p"] == pytest.approx(0.125)
    # Task level: GRPO − start is +1 on t1 only, so one nonzero task: p = 1. SLCA − start: t1 +1, t2 +0.5.
    grpo_tasks, slca_tasks = tests["grpo - start"]["task_level"], tests["slca - start"]["task_level"]
    assert (grpo_tasks["tasks"], grpo_tasks["tasks_up"], grpo_tasks["p"]) == (4, 1, pytest.approx(1.0))
    assert slca_tasks["mean"] == pytest.approx(1.5 / 4) and slca_tasks["tasks_up"] == 2
    assert tests["slca - grpo"]["task_level"]["mean"] == pytest.approx(0.5 / 4)

    cell = report["cells"]["none"]["grpo"]
    assert cell["endings"]["final"]["forced_answer"]["mean"] == pytest.approx(0.25)
    assert cell["endings"]["delta"]["forced_answer"]["mean"] == pytest.approx(-0.25)
    assert cell["endings"]["delta"]["forced_answer"]["p"] == pytest.approx(2 / 256)
    assert cell["train_forced_answer"]["mean"] == pytest.approx(0.125)
    assert report["endings"] == ["truncated", "forced_answer", "repeat_calls"]
    assert report["bfcl"]["metrics"] == ["bfcl/multiple", "bfcl/simple_python", "bfcl/overall"]
    assert report["bfcl"]["start"] == {"bfcl/simple_python": 0.5, "bfcl/multiple": 0.3, "bfcl/overall": 0.4}
    slca = report["cells"]["none"]["slca"]["bfcl"]
    assert slca["delta"]["bfcl/simple_python"]["mean"] == pytest.approx(0.1)
    assert slca["delta"]["bfcl/multiple"]["mean"] == pytest.approx(0.0)
    paired = report["bfcl"]["paired"]["none"]["slca - grpo"]
    assert paired["bfcl/simple_python"]["mean"] == pytest.approx(0.1)

    table = (tmp_path / "report.md").read_text()
    assert "### Primary outcome: held-out Success@0.7" in table
    assert "| grpo − start | +25.0** | [+25.0, +25.0] | 0.008 | 0.023 | 8/8 | 1.000 | 1 / 0 |" in table
    assert "| slca − grpo | +12.5 |" in table and "| 0.125 | 0.125 | 4/8, 4 tied |" in table
    assert "### How episodes ended" in table and "Forced answer % 50.0" in table
    assert "| none · grpo | 25.0 [25.0, 25.0] | 25.0 [25.0, 25.0] | 0.500 [0.500, 0.500] |" in table
    assert "| start | 30.0 | 50.0 | 40.0 |" in table and "### BFCL: paired differences" in table


def test_the_runs_of_a_seed_share_the_start_evaluated_by_the_first(tmp_path):
    plan = StudyPlan(StudyBudget("demo-quick-tiny", seeds=2, noise="none", steps=4, evals=1, eval_tasks=4))
    runs = [(seed, NoiseLevel(), estimator) for seed in (0, 1) for estimator in ("grpo", "slca")]
    assert seed_start(tmp_path, runs, 0) is None
    write_run(run_dir(tmp_path, NoiseLevel(), "grpo", 0), start=0.25, final=0.5)
    assert seed_start(tmp_path, runs, 0)["success@0.7"] == 0.25 and seed_start(tmp_path, runs, 0)["step"] == -1
    assert seed_start(tmp_path, runs, 1) is None  # another seed samples other draws
    assert seed_start(tmp_path, runs, 0, "probes") is None  # this run evaluated no probe set
    assert plan.budget.bfcl == "" and plan.budget.primary == ""


@pytest.fixture
def tiny_model_folder(tmp_path_factory):
    from slca_grpo.models import load_model

    folder = tmp_path_factory.mktemp("tiny-model")
    model, tokenizer = load_model("tiny")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_a_model_is_scored_on_bfcl_once_and_a_failed_scoring_leaves_nothing(tmp_path, monkeypatch, tiny_model_folder):
    from slca_grpo.study import bfcl

    monkeypatch.setattr(bfcl, "MAX_NEW_TOKENS", 8)  # what is scored does not matter here, only where it goes
    scratch = tmp_path / ".scratch"
    seconds = bfcl.score_on_bfcl(tiny_model_folder, tmp_path / "start", ["simple"], 1, scratch=scratch, bf16=False)
    summary = read_bfcl(tmp_path / "start")
    assert seconds > 0 and summary["num_entries"] == 1 and list(summary["categories"]) == ["simple_python"]
    assert (tmp_path / "start" / "bfcl" / "per_item.jsonl").is_file() and not scratch.exists()

    def fail(*args, **kwargs):
        raise RuntimeError("stopped mid-way")

    monkeypatch.setattr(bfcl, "run_bfcl", fail)
    assert bfcl.score_on_bfcl(tiny_model_folder, tmp_path / "start", ["simple"], 1, scratch=scratch) == 0.0
    with pytest.raises(RuntimeError):
        bfcl.score_on_bfcl(tiny_model_folder, tmp_path / "run", ["simple"], 1, scratch=scratch)
    (tmp_path / "start" / "bfcl" / "summary.json").write_text("{")  # damaged: scored again, not kept
    with pytest.raises(RuntimeError):
        bfcl.score_on_bfcl(tiny_model_folder, tmp_path / "start", ["simple"], 1, scratch=scratch)
    assert read_bfcl(tmp_path / "run") is None and not (tmp_path / "run" / "bfcl").exists() and not scratch.exists()
    with pytest.raises(FileNotFoundError, match="holds no checkpoint"):
        bfcl.final_model(tmp_path / "run")
