"""The probe set: training-distribution tasks no update trains on, evaluated every few RL steps,
reported per run (demo report) and over seeds (study report)."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from smoke_run import smoke_config

from slca_grpo.config import ConfigError
from slca_grpo.data.config import DataConfig
from slca_grpo.datatypes import Task
from slca_grpo.report import compare_runs
from slca_grpo.rollout.loop import AgentLoop
from slca_grpo.study.plan import NoiseLevel, StudyBudget, StudyPlan, run_dir
from slca_grpo.study.report import write_study_report
from slca_grpo.trainer.logger import read_metrics
from slca_grpo.trainer.run import train
from slca_grpo.trainer.run_data import load_data, set_aside_probe


def _tasks(n):
    return [Task(id=f"t{i}", messages=[{"role": "user", "content": str(i)}], tools=[]) for i in range(n)]


@given(st.integers(0, 60), st.integers(0, 40), st.integers(0, 5))
def test_the_probe_set_is_a_seeded_disjoint_share_of_at_most_a_quarter(n, count, seed):
    tasks = _tasks(n)
    rest, probe = set_aside_probe(tasks, count, seed)
    assert len(probe) == min(count, n // 4)
    assert {t.id for t in rest} | {t.id for t in probe} == {t.id for t in tasks}
    assert not {t.id for t in rest} & {t.id for t in probe}
    order = [t.id for t in tasks]
    for part in (rest, probe):  # both keep the tasks' order
        assert [order.index(t.id) for t in part] == sorted(order.index(t.id) for t in part)
    assert set_aside_probe(tasks, count, seed) == (rest, probe)


def test_the_probe_set_depends_on_the_seed_and_comes_out_of_training():
    picks = {tuple(t.id for t in set_aside_probe(_tasks(200), 16, seed)[1]) for seed in range(4)}
    assert len(picks) == 4
    train, test, probe = load_data(DataConfig(n_train=40, n_test=4, probe_tasks=8))
    assert (len(train), len(test), len(probe)) == (32, 4, 8)
    everything = load_data(DataConfig(n_train=40, n_test=4, probe_tasks=0))
    assert everything.probe == [] and [t.id for t in everything.train] == sorted(
        [t.id for t in train + probe], key=[t.id for t in everything.train].index
    )
    with pytest.raises(ConfigError, match="probe_tasks must be >= 0"):
        DataConfig(probe_tasks=-1)


@pytest.mark.slow
def test_a_run_probes_every_k_steps_on_tasks_no_update_trains_on(tmp_path, monkeypatch):
    import slca_grpo.trainer.sft_cache as sft_cache

    sft_ids, rl_ids, probe_ids = set(), set(), []
    real_sft, real_run = sft_cache.run_sft, AgentLoop.run

    def sft_spy(config, model, tokenizer, tasks, *args, **kwargs):
        sft_ids.update(t.id for t in tasks)
        return real_sft(config, model, tokenizer, tasks, *args, **kwargs)

    sampled, held_out_sampled = [], []

    def run_spy(self, tasks, **kwargs):
        if kwargs.get("session_prefix", "").startswith("eval-sampled-"):
            held_out_sampled.append(([t.id for t in tasks], kwargs["sampling"].temperature))
        elif kwargs.get("session_prefix", "").startswith("probe-sampled-"):
            sampled.append(([t.id for t in tasks], kwargs["sampling"].temperature, kwargs["generator"].initial_seed()))
        elif kwargs.get("session_prefix", "").startswith("probe-"):
            probe_ids.append([t.id for t in tasks])
        elif kwargs.get("group_size") != 1:
            rl_ids.update(t.id for t in tasks)
        return real_run(self, tasks, **kwargs)

    monkeypatch.setattr(sft_cache, "run_sft", sft_spy)
    monkeypatch.setattr(AgentLoop, "run", run_spy)
    settings = {"train.probe_every": 2, "rl.steps": 3, "data.probe_tasks": 6, "train.probe_samples": 2}
    settings |= {"train.eval_samples": 3, "train.eval_tasks": 2}
    config = smoke_config(tmp_path / "run", **settings)
    summary = train(config, echo=False)
    expected = [t.id for t in load_data(config.data).probe]
    assert len(expected) == 6 and probe_ids == [expected] * 3  # before RL, after step 2 (2 done), after the last
    # ... and each probe task twice at the training temperature, drawn with the same seed every time
    twice = [task for task in expected for _ in range(2)]
    assert [ids for ids, _, _ in sampled] == [twice] * 3
    assert {(t, seed) for _, t, seed in sampled} == {(config.rollout.temperature, config.train.seed)}
    assert config.rollout.temperature > 0
    assert not (sft_ids | rl_ids) & set(expected) and sft_ids and rl_ids
    assert [p["step"] for p in summary["probes"]] == [-1, 1, 2] and summary["final_probe"] == summary["probes"][-1]
    logged = [row for row in read_metrics(tmp_path / "run" / "metrics.jsonl") if "probe/r_tool" in row]
    assert [row["step"] for row in logged] == [-1, 1, 2]
    assert {"probe/score", "probe/success@0.7", "probe/arg_match", "probe/truncated"} <= set(logged[0])
    assert {"probe/sampled_r_tool", "probe/sampled_success@0.7", "probe/sampled_truncated"} <= set(logged[0])
    assert logged[-1]["probe/r_tool"] == pytest.approx(summary["final_probe"]["r_tool"])
    assert (tmp_path / "run" / "probe_items.jsonl").read_text().count("\n") == 6
    items = [json.loads(line) for line in (tmp_path / "run" / "probe_sampled_items.jsonl").read_text().splitlines()]
    assert len(items) == 12
    mean = sum(item["r_tool"] for item in items) / 12
    assert summary["final_probe"]["sampled_r_tool"] == pytest.approx(mean)  # the mean over every sampled rollout
    # The held-out tasks too (train.eval_samples): each evaluated task three times, sampled.
    held_out = [t.id for t in load_data(config.data).test[:2]]
    assert held_out_sampled == [([t for t in held_out for _ in range(3)], config.rollout.temperature)] * len(
        summary["evals"]
    )
    assert all({"sampled_r_tool", "sampled_success@0.7", "sampled_arg_match"} <= set(e) for e in summary["evals"])
    items = [json.loads(line) for line in (tmp_path / "run" / "eval_sampled_items.jsonl").read_text().splitlines()]
    assert len(items) == 6
    assert summary["final_eval"]["sampled_arg_match"] == pytest.approx(sum(i["arg_match"] for i in items) / 6)


@pytest.mark.slow
def test_sampling_the_probe_set_changes_no_training_step(tmp_path):
    def scores(samples):
        settings = {"rl.steps": 3, "train.probe_every": 1, "data.probe_tasks": 6, "train.probe_samples": samples}
        config = smoke_config(tmp_path / f"run{samples}", **settings)
        train(config, echo=False)
        rows = read_metrics(tmp_path / f"run{samples}" / "metrics.jsonl")
        return [(row["step"], row["reward/score"], row.get("train/pg_loss")) for row in rows if "reward/score" in row]

    without, with_samples = scores(0), scores(3)
    assert len(without) == 3 and without == with_samples


def _fake_run(path, estimator, probe_r_tool, evals=True):
    path.mkdir(parents=True)
    probes = [{"step": s, "n": 16, "r_tool": r, "score": r / 2, "success@0.7": 0.0, "arg_match": r, "truncated": 0.0}
              for s, r in zip((-1, 1, 3), probe_r_tool)]  # fmt: skip
    held_out = [{"step": -1, "n": 8, "name_f1": 0.4}, {"step": 3, "n": 8, "name_f1": 0.5}] if evals else []
    summary = {"estimator": estimator, "steps": 4, "final_eval": held_out[-1] if held_out else {}, "evals": held_out,
               "probes": probes, "final_probe": probes[-1]}  # fmt: skip
    (path / "summary.json").write_text(json.dumps(summary))
    (path / "metrics.jsonl").write_text(json.dumps({"step": 0, "reward/score": 0.1}) + "\n")
    return path


def test_the_demo_report_shows_the_probe_set_before_rl_and_after_each_run(tmp_path):
    runs = [_fake_run(tmp_path / "a", "grpo", (0.5, 0.55, 0.625)), _fake_run(tmp_path / "b", "slca", (0.5, 0.6, 0.75))]
    report = compare_runs(runs, tmp_path / "out")
    table = (tmp_path / "out" / "report.md").read_text()
    assert "Probe set (16 training-distribution tasks" in table
    assert "| start (before RL) | 0.500 | 0.250 | 0.00 | 50.00 | 0.00 |" in table
    assert "| grpo | 0.625 |" in table and "| slca | 0.750 | 0.375 | 0.00 | 75.00 | 0.00 |" in table
    assert report["start_probe"]["r_tool"] == 0.5 and report["runs"][1]["final_probe"]["r_tool"] == 0.75
    assert "Held-out, sampled" not in table  # these runs sampled no held-out task
    sampled = _fake_run(tmp_path / "c", "grpo", (0.5, 0.55, 0.625))
    summary = json.loads((sampled / "summary.json").read_text())
    for evaluation, value in zip(summary["evals"], (0.25, 0.5)):
        evaluation |= {"sampled_r_tool": value, "sampled_success@0.7": value / 2, "sampled_arg_match": value}
    summary["final_eval"] = summary["evals"][-1]
    (sampled / "summary.json").write_text(json.dumps(summary))
    compare_runs([sampled], tmp_path / "out-sampled")
    table = (tmp_path / "out-sampled" / "report.md").read_text()
    assert "| Method | R_tool sampled | Success@0.7 sampled % | ArgMatch sampled % |" in table
    assert "| start (before RL) | 0.250 | 12.50 | 25.00 |" in table and "| grpo | 0.500 | 25.00 | 50.00 |" in table
    old = tmp_path / "old"  # a run from before probes: no table, no error
    old.mkdir()
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    (old / "summary.json").write_text(json.dumps({k: v for k, v in summary.items() if "probe" not in k}))
    compare_runs([old], tmp_path / "out-old")
    assert "Probe set" not in (tmp_path / "out-old" / "report.md").read_text()


def test_the_study_reports_the_probe_curve_and_its_gain_with_an_exact_test(tmp_path):
    budget = StudyBudget("demo-quick-tiny", seeds=4, noise="none", steps=4, evals=1, eval_tasks=8)
    plan = StudyPlan(budget, ("grpo", "slca"))
    for seed in range(4):
        _fake_run(run_dir(tmp_path, NoiseLevel(), "grpo", seed), "grpo", (0.5, 0.5 + 0.01 * seed, 0.5 + 0.05 * seed))
        _fake_run(run_dir(tmp_path, NoiseLevel(), "slca", seed), "slca", (0.5, 0.6, 0.7 + 0.01 * seed))
    report = write_study_report(tmp_path, plan)
    slca = report["cells"]["none"]["slca"]
    assert slca["probe"]["r_tool"]["steps"] == [0, 2, 4]
    assert slca["probe"]["r_tool"]["mean"] == pytest.approx([0.5, 0.6, 0.715])
    gain = slca["probe_delta"]["r_tool"]
    assert gain["mean"] == pytest.approx(0.215) and gain["p"] == pytest.approx(2 / 2**4)  # all four seeds gain
    grpo_gain = report["cells"]["none"]["grpo"]["probe_delta"]["r_tool"]
    assert grpo_gain["mean"] == pytest.approx(0.075) and grpo_gain["p"] == pytest.approx(0.25)  # seed 0: no change
    assert report["settings"]["probe_tasks"] == 16
    table = (tmp_path / "report.md").read_text()
    assert "### Probe set: the learning curve" in table and "| greedy | step 0 | step 2 | step 4 |" in table
    assert "| sampled | step 0" not in table  # these runs sampled nothing
    assert "Truncated % |" in table and "% %" not in table  # a percentage column is marked once
    assert "| none · slca | 0.500 [0.500, 0.500] | 0.600 [0.600, 0.600] |" in table
    assert "| none · slca | +0.215 [" in table and "holm_p" in json.dumps(slca["probe_delta"])


def test_the_study_tests_the_held_out_sampled_outcomes_where_the_runs_sampled_them(tmp_path):
    budget = StudyBudget("demo-quick-tiny", seeds=4, noise="none", steps=4, evals=1, eval_tasks=8)
    plan = StudyPlan(budget, ("grpo", "slca"))
    for seed in range(4):
        for estimator, gain in (("grpo", 0.1), ("slca", 0.0)):
            path = _fake_run(run_dir(tmp_path, NoiseLevel(), estimator, seed), estimator, (0.5, 0.5, 0.5))
            summary = json.loads((path / "summary.json").read_text())
            for evaluation, value in zip(summary["evals"], (0.3, 0.3 + gain + 0.01 * seed)):
                evaluation |= {"sampled_r_tool": value, "sampled_success@0.7": 0.0, "sampled_arg_match": value}
            summary["final_eval"] = summary["evals"][-1]
            (path / "summary.json").write_text(json.dumps(summary))
    report = write_study_report(tmp_path, plan)
    assert {"sampled_r_tool", "sampled_success@0.7", "sampled_arg_match"} <= set(report["metrics"])
    gain = report["cells"]["none"]["grpo"]["delta"]["sampled_r_tool"]
    assert gain["mean"] == pytest.approx(0.115) and gain["p"] == pytest.approx(2 / 2**4)
    assert report["cells"]["none"]["slca"]["delta"]["sampled_r_tool"]["mean"] == pytest.approx(0.015)
    table = (tmp_path / "report.md").read_text()
    assert "R_tool sampled" in table and "ArgMatch sampled" in table
    unsampled = tmp_path / "unsampled"  # runs that sampled nothing report no sampled outcome
    for seed in range(4):
        for estimator in ("grpo", "slca"):
            _fake_run(run_dir(unsampled, NoiseLevel(), estimator, seed), estimator, (0.5, 0.5, 0.5))
    assert not {m for m in write_study_report(unsampled, plan)["metrics"] if m.startswith("sampled_")}


def test_the_probe_table_marks_each_percentage_column_once():
    from slca_grpo.report import probe_table

    probe = {"n": 4, "r_tool": 0.5, "score": 0.6, "success@0.7": 0.25, "arg_match": 0.4, "truncated": 0.5}
    runs = [{"name": "grpo", "summary": {"probes": [{**probe, "step": -1}], "final_probe": probe}}]
    lines = probe_table(runs)
    header = next(line for line in lines if line.startswith("| Method"))
    assert "% %" not in header and "Truncated %" in header and "Success@0.7 %" in header
    assert lines[-1] == "| grpo | 0.500 | 0.600 | 25.00 | 40.00 | 50.00 | – | – |"  # greedy only: no sampled columns
    sampled = {**probe, "sampled_r_tool": 0.375, "sampled_success@0.7": 0.125}
    lines = probe_table([{"name": "grpo", "summary": {"probes": [{**sampled, "step": -1}], "final_probe": sampled}}])
    assert "| R_tool sampled | Success@0.7 sampled % |" in lines[3]
    assert lines[-1] == "| grpo | 0.500 | 0.600 | 25.00 | 40.00 | 50.00 | 0.375 | 12.50 |"
