"""The held-out tasks of a finished study, sampled: does RL's gain on the sampled policy reach tasks
it never trained on?

A study evaluates its held-out tasks greedily; the probe set (training-distribution tasks) also
sampled. This evaluates the study's SFT start and every run's final model on the study's own
held-out tasks, each task ``--samples`` times at the runs' rollout temperature with one seed for
every model (common random numbers), through ``slca eval indomain`` with the runs' turn and token
limits, and greedily through the same harness beside it. It writes ``OUT/report.md`` and
``OUT/report.json``: per (noise level, estimator), the mean change from the start over seeds with
its interval and exact sign-flip p (Holm over the table), and SLCA − GRPO seed by seed.

    python benchmarks/study_sampled_eval.py runs/study --out runs/study-sampled-eval --samples 4

Finished evaluations are kept: rerun the same command to continue.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from slca_grpo.cli import main as slca
from slca_grpo.config import load_yaml_config
from slca_grpo.data.tasks import write_tasks
from slca_grpo.study.arms import trained_level
from slca_grpo.study.plan import PLAN_FILE, StudyPlan, read_json, run_dir
from slca_grpo.study.stats import bootstrap_ci, holm_adjust, paired_difference_ci, sign_flip_p
from slca_grpo.study.tables import format_interval
from slca_grpo.trainer.run_config import RunConfig
from slca_grpo.trainer.run_data import load_data

# "r_tool seen" / "r_tool new": on the tasks whose tools the training split has, and on those with a
# held-out tool (the summary's by_tools).
METRICS = ("r_tool", "r_tool seen", "r_tool new", "success@0.7", "name_f1", "arg_match", "truncated")
PERCENT = {"success@0.7", "name_f1", "arg_match", "truncated"}
BY_TOOLS = {"r_tool seen": "seen_tools", "r_tool new": "new_tools"}
WAYS = ("sampled", "greedy")


def final_model(run: Path) -> Path | None:
    """The model a finished run ended with (None while it runs or when it has none)."""
    latest = run / "checkpoints" / "latest"
    if not (run / "summary.json").is_file() or not latest.is_file():
        return None
    model = run / "checkpoints" / latest.read_text().strip() / "model"
    return model if (model / "config.json").is_file() else None


def evaluate(model: Path, out: Path, tasks: Path, config: RunConfig, way: str, samples: int, seed: int) -> dict:
    """``slca eval indomain`` of one model, kept in ``out`` (reused when it is there)."""
    summary = out / "summary.json"
    if not summary.is_file():
        command = ["eval", "indomain", "--policy", f"hf:{model}", "--tasks", str(tasks), "--out", str(out), "--force"]
        command += ["--max-turns", str(config.rollout.max_turns)]
        command += ["--max-new-tokens", str(config.rollout.max_response_tokens)]
        command += ["--bf16", {True: "true", False: "false"}.get(config.rl.bf16, "auto")]  # as the runs evaluated
        command += ["--batch-size", "64"]  # episodes decoded together, as a run's evaluation batches them
        if way == "sampled":
            command += ["--samples", str(samples), "--temperature", str(config.rollout.temperature)]
            command += ["--seed", str(seed)]
        started = time.perf_counter()
        with open(out.parent / f"{out.name}.log", "w") as log:
            stdout, sys.stdout = sys.stdout, log
            try:
                code = slca(command)
            finally:
                sys.stdout = stdout
        if code != 0:
            raise SystemExit(f"slca {' '.join(command)} failed (rc {code})")
        print(f"  {out.name}: {time.perf_counter() - started:.0f} s", flush=True)
    values = json.loads(summary.read_text())
    for metric, group in BY_TOOLS.items():
        values[metric] = values.get("by_tools", {}).get(group, {}).get("r_tool", float("nan"))
    return values


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", type=Path, help="a finished study folder (slca study --out)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--samples", type=int, default=4, help="episodes per held-out task (default 4)")
    parser.add_argument("--seed", type=int, default=0, help="the sampling seed, the same for every model")
    parser.add_argument("--limit", type=int, default=None, help="only the first N held-out tasks (a quick check)")
    args = parser.parse_args()

    saved = read_json(args.study / PLAN_FILE, None)
    if not isinstance(saved, dict):
        raise SystemExit(f"{args.study} is not a study folder (no readable {PLAN_FILE})")
    plan = StudyPlan.from_dict(saved)
    runs = {
        (level.name, estimator, seed): run_dir(args.study, trained_level(plan, level, estimator), estimator, seed)
        for level in plan.levels
        for estimator in plan.estimators
        for seed in plan.seeds
    }
    finished = {key: final_model(run) for key, run in runs.items()}
    finished = {key: model for key, model in finished.items() if model is not None}
    if not finished:
        raise SystemExit(f"{args.study} holds no finished run")
    config = load_yaml_config(RunConfig, next(iter(runs.values())) / "config.yaml")
    args.out.mkdir(parents=True, exist_ok=True)
    tasks = args.out / "heldout.jsonl"
    heldout = load_data(config.data).test[: config.train.eval_tasks][: args.limit]  # the runs' own held-out tasks
    write_tasks(heldout, tasks)

    models = {"start": args.study / "sft", **{"/".join(map(str, key)): model for key, model in finished.items()}}
    distinct: dict[str, str] = {}  # a run trained once stands for every level: evaluated once
    for name, model in models.items():
        distinct.setdefault(str(model), name)
    results: dict[str, dict[str, dict]] = {}
    for model_path, name in distinct.items():
        folder = args.out / name.replace("/", "__")
        results[name] = {
            way: evaluate(
                Path(model_path), folder.with_name(f"{folder.name}-{way}"), tasks, config, way, args.samples, args.seed
            )
            for way in WAYS
        }
    value = {name: results[distinct[str(model)]] for name, model in models.items()}

    report: dict[str, Any] = {"samples": args.samples, "seed": args.seed, "tasks": len(heldout)}
    report["start"] = {way: {m: value["start"][way][m] for m in METRICS} for way in WAYS}
    cells, tests = {}, []
    for level in plan.levels:
        for estimator in plan.estimators:
            for way in WAYS:
                for metric in METRICS:
                    per_seed = {
                        seed: value[f"{level.name}/{estimator}/{seed}"][way][metric] - value["start"][way][metric]
                        for seed in plan.seeds
                        if f"{level.name}/{estimator}/{seed}" in value
                    }
                    if not per_seed:
                        continue
                    changes = list(per_seed.values())
                    cell = {**bootstrap_ci(changes).to_dict(), "p": sign_flip_p(changes), "per_seed": per_seed}
                    cells[f"{level.name}/{estimator}/{way}/{metric}"] = cell
                    if trained_level(plan, level, estimator) == level:  # a run trained once is one test
                        tests.append(cell)
    for cell, adjusted in zip(tests, holm_adjust([c["p"] for c in tests])):
        cell["holm_p"] = adjusted
    for key, cell in cells.items():  # the levels a run trained once stands for share its adjusted p
        level_name, estimator, rest = key.split("/", 2)
        level = next(level for level in plan.levels if level.name == level_name)
        cell["holm_p"] = cells[f"{trained_level(plan, level, estimator).name}/{estimator}/{rest}"]["holm_p"]
    report["changes"] = cells
    comparisons = {}
    if {"grpo", "slca"} <= set(plan.estimators):
        for level in plan.levels:
            for way in WAYS:
                for metric in METRICS:
                    slca_runs, grpo_runs = (
                        {
                            seed: value[f"{level.name}/{e}/{seed}"][way][metric]
                            for seed in plan.seeds
                            if f"{level.name}/{e}/{seed}" in value
                        }
                        for e in ("slca", "grpo")
                    )
                    if set(slca_runs) & set(grpo_runs):
                        comparisons[f"{level.name}/{way}/{metric}"] = paired_difference_ci(
                            slca_runs, grpo_runs
                        ).to_dict()
    report["slca_minus_grpo"] = comparisons
    (args.out / "report.json").write_text(json.dumps(report, indent=1))
    (args.out / "report.md").write_text(markdown(report, plan))
    print((args.out / "report.md").read_text())
    return 0


def _scale(metric: str) -> float:
    return 100.0 if metric in PERCENT else 1.0  # rates as percentages


def markdown(report: dict[str, Any], plan: StudyPlan) -> str:
    lines = [
        f"# The study's held-out tasks, sampled ({report['samples']} a task) and greedy, one harness",
        "",
        f"{report['tasks']} held-out tasks; change from the SFT start, mean [95% interval] over seeds, exact "
        "sign-flip p (Holm over this table's tests in brackets). Percentages for rates.",
        "",
    ]
    for way in WAYS:
        start = report["start"][way]
        lines += [f"## {way}", "", "| arm | " + " | ".join(METRICS) + " |", "|---|" + "---:|" * len(METRICS)]
        lines.append(
            "| start | " + " | ".join(format_interval({"mean": start[m]}, _scale(m)).split()[0] for m in METRICS) + " |"
        )
        for level in plan.levels:
            for estimator in plan.estimators:
                row = []
                for metric in METRICS:
                    cell = report["changes"].get(f"{level.name}/{estimator}/{way}/{metric}")
                    if cell is None:
                        row.append("–")
                        continue
                    interval = format_interval(cell, _scale(metric), signed=True)
                    row.append(f"{interval} p={cell['p']:.3f} ({cell['holm_p']:.2f})")
                lines.append(f"| {level.name} / {estimator} | " + " | ".join(row) + " |")
        lines.append("")
    if report["slca_minus_grpo"]:
        lines += ["## SLCA − GRPO, seed by seed", "", "| level / way | " + " | ".join(METRICS) + " |"]
        lines.append("|---|" + "---:|" * len(METRICS))
        for level in plan.levels:
            for way in WAYS:
                row = []
                for metric in METRICS:
                    d = report["slca_minus_grpo"].get(f"{level.name}/{way}/{metric}")
                    row.append(
                        "–" if d is None else f"{format_interval(d, _scale(metric), signed=True)} p={d['p']:.3f}"
                    )
                lines.append(f"| {level.name} / {way} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
