"""The held-out tasks of a finished study, sampled: does RL's gain on the sampled policy reach tasks
it never trained on?

A study evaluates its held-out tasks greedily; the probe set (training-distribution tasks) also
sampled. This evaluates the study's SFT start and every run's final model on the study's own
held-out tasks, each task ``--samples`` times at the runs' rollout temperature with one seed for
every model (common random numbers), and greedily beside it, each through ``slca eval indomain
--run`` (the run's own held-out tasks, limits, simulator and judge, through the loop its own
evaluations take). It writes ``OUT/report.md`` and ``OUT/report.json``: per (noise level,
estimator), the mean change from the start over seeds with its interval and exact sign-flip p
(Holm over the table), and SLCA − GRPO seed by seed.

    python benchmarks/study_sampled_eval.py runs/study --out runs/study-sampled-eval --samples 4

The runs must agree on their held-out tasks and how they roll out (their ``config.yaml``); the start
is evaluated through the first finished run (``--checkpoint start``).

Finished evaluations are kept: rerun the same command to continue. ``OUT/settings.json`` records
the study, ``--samples``, ``--seed`` and ``--limit``, and every kept evaluation is checked against
them: a rerun with other settings is refused (use another ``--out``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from slca_grpo.cli import main as slca
from slca_grpo.config import ConfigError, load_yaml_config
from slca_grpo.plugins import PluginError
from slca_grpo.study.arms import trained_level
from slca_grpo.study.plan import PLAN_FILE, StudyPlan, read_json, run_dir
from slca_grpo.study.stats import bootstrap_ci, holm_adjust, paired_difference_ci, sign_flip_p
from slca_grpo.study.tables import format_interval
from slca_grpo.trainer.run_config import RunConfig

# "r_tool seen" / "r_tool new": on the tasks whose tools the training split has, and on those with a
# held-out tool (the summary's by_tools).
METRICS = ("r_tool", "r_tool seen", "r_tool new", "success@0.7", "name_f1", "arg_match", "truncated")
PERCENT = {"success@0.7", "name_f1", "arg_match", "truncated"}
BY_TOOLS = {"r_tool seen": "seen_tools", "r_tool new": "new_tools"}
WAYS = ("sampled", "greedy")
SETTINGS_FILE = "settings.json"  # in OUT: what its kept evaluations were made with
MAX_SAMPLES = 64  # slca eval indomain's bound


def refuse(message: str) -> SystemExit:
    """The one-line error the script exits with (``raise refuse(...)``)."""
    return SystemExit("error: " + " ".join(message.split()))  # one line, whatever the message quotes


def final_model(run: Path) -> Path | None:
    """The model a finished run ended with (None while it runs or when it has none)."""
    latest = run / "checkpoints" / "latest"
    if not (run / "summary.json").is_file() or not latest.is_file():
        return None
    try:
        name = latest.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    model = run / "checkpoints" / name / "model"
    return model if name and "/" not in name and (model / "config.json").is_file() else None


def evaluate(
    run: Path, checkpoint: str | None, out: Path, way: str, args: argparse.Namespace, temperature: float
) -> dict:
    """``slca eval indomain --run`` of one model, kept in ``out`` (reused when it is there and was
    made with these settings; refused when it was not)."""
    summary = out / "summary.json"
    if summary.is_file():
        check_kept(summary, way, args.samples, args.seed, temperature, args.limit)
    else:
        command = ["eval", "indomain", "--run", str(run), "--out", str(out), "--force"]
        command += ["--checkpoint", checkpoint] if checkpoint else []
        command += ["--limit", str(args.limit)] if args.limit else []
        if way == "sampled":
            command += ["--samples", str(args.samples), "--seed", str(args.seed)]
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
    values = read_summary(summary)
    for metric, group in BY_TOOLS.items():
        values[metric] = values.get("by_tools", {}).get(group, {}).get("r_tool", float("nan"))
    return values


def read_summary(path: Path) -> dict[str, Any]:
    """A kept evaluation's summary.json; one line naming it when it cannot be read."""
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise refuse(f"{path} cannot be read ({type(exc).__name__}); delete its folder to evaluate again") from None
    if not isinstance(values, dict):
        raise refuse(f"{path} is not a JSON object; delete its folder to evaluate again")
    return values


def check_kept(summary: Path, way: str, samples: int, seed: int, temperature: float, limit: int | None) -> None:
    """Refuse a kept evaluation made with other settings than these (an earlier run of this
    script with other ``--samples``, ``--seed`` or ``--limit``, or other runs' temperature)."""
    values = read_summary(summary)
    sampled = way == "sampled"
    wanted = {
        "samples": samples if sampled else 1,
        "temperature": float(temperature) if sampled else 0.0,
        "limit": limit,
        **({"seed": seed} if sampled else {}),
    }
    found = {key: values.get(key) for key in wanted}
    if found != wanted:
        differ = ", ".join(f"{key} {found[key]!r} (now {wanted[key]!r})" for key in wanted if found[key] != wanted[key])
        raise refuse(
            f"{summary.parent} holds an evaluation made with other settings: {differ}; rerun with the settings "
            "it was made with, or use another --out"
        )


def read_plan(study: Path) -> StudyPlan:
    """The study's plan; one line naming ``study.json`` when it is missing or malformed."""
    path = study / PLAN_FILE
    saved = read_json(path, None)
    if not isinstance(saved, dict):
        raise refuse(f"{study} is not a study folder (no readable {PLAN_FILE})")
    try:
        plan = StudyPlan.from_dict(saved)
        # Everything used below, read once here so that a bad value is this one line.
        if not (plan.levels and plan.estimators and plan.seeds):
            raise ValueError("it names no noise level, estimator or seed")
        for level in plan.levels:
            for estimator in plan.estimators:
                run_dir(study, trained_level(plan, level, estimator), estimator, 0)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise refuse(f"{path} is not a study plan ({type(exc).__name__}: {exc})") from None
    return plan


def check_out(out: Path, study: Path, plan: StudyPlan) -> None:
    """Refuse an ``--out`` that is the study folder (its report.md would be overwritten) or lies
    in its SFT start or a run's folder."""
    where, home = out.resolve(), study.resolve()
    if where == home:
        raise refuse(f"--out {out} is the study folder: its report.md would be overwritten; use another folder")
    for inside in [home / "sft", *(home / level.name for level in plan.levels)]:
        if where.is_relative_to(inside):
            raise refuse(f"--out {out} is inside the study's {inside.name}/ folder; use a folder outside {study}")
    if out.exists() and not out.is_dir():
        raise refuse(f"--out {out} is a file, not a folder")


def run_config(run: Path) -> RunConfig:
    """The settings a run recorded (its config.yaml); one line naming it when it cannot be read."""
    try:
        return load_yaml_config(RunConfig, run / "config.yaml")
    except (ConfigError, PluginError) as exc:
        raise refuse(f"the settings run {run} recorded cannot be read: {exc}") from None


def eval_settings(config: RunConfig) -> dict[str, Any]:
    """The settings of a run that this evaluation takes: which held-out tasks, and how it rolls out."""
    return {
        "data": config.data,
        "train.eval_tasks": config.train.eval_tasks,
        "rollout.max_turns": config.rollout.max_turns,
        "rollout.max_response_tokens": config.rollout.max_response_tokens,
        "rollout.temperature": config.rollout.temperature,
        "rl.bf16": config.rl.bf16,
    }


def common_config(runs: list[Path]) -> RunConfig:
    """The settings the finished runs recorded (they must agree on :func:`eval_settings`)."""
    first, *rest = runs
    config = run_config(first)
    wanted = eval_settings(config)
    for run in rest:
        differ = [name for name, value in eval_settings(run_config(run)).items() if value != wanted[name]]
        if differ:
            raise refuse(
                f"runs {first} and {run} recorded other {', '.join(differ)}: their held-out evaluations differ"
            )
    return config


def out_settings(args: argparse.Namespace) -> dict[str, Any]:
    """What ``OUT``'s evaluations are made with: the study and the sampling."""
    return {"study": str(args.study.resolve()), "samples": args.samples, "seed": args.seed, "limit": args.limit}


def check_settings(out: Path, settings: dict[str, Any], kept: list[tuple[Path, str]], check: Any) -> None:
    """Refuse an ``OUT`` whose kept evaluations were made with other settings, then record these.

    ``kept`` is every (evaluation folder, way) this run will read; without ``settings.json`` (an
    ``OUT`` of an earlier version of this script) each one there is checked with ``check`` first.
    """
    path = out / SETTINGS_FILE
    if path.exists():
        earlier = read_json(path, None)
        if not isinstance(earlier, dict):
            raise refuse(
                f"{path} cannot be read: what {out}'s evaluations were made with is not known; use another --out"
            )
        differ = [key for key in settings if earlier.get(key) != settings[key]]
        if differ:
            shown = ", ".join(f"{key} {earlier.get(key)!r} (now {settings[key]!r})" for key in differ)
            raise refuse(
                f"{out} holds evaluations made with other settings: {shown}; rerun with those, or use another --out"
            )
        return
    for folder, way in kept:
        if (folder / "summary.json").is_file():
            check(folder / "summary.json", way)
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=1), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", type=Path, help="a finished study folder (slca study --out)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--samples", type=int, default=4, help="sampled episodes per held-out task (default 4)")
    parser.add_argument("--seed", type=int, default=0, help="the sampling seed, the same for every model")
    parser.add_argument("--limit", type=int, default=None, help="only the first N held-out tasks (a quick check)")
    args = parser.parse_args(argv)
    if not 1 <= args.samples <= MAX_SAMPLES:
        raise refuse(f"--samples must be between 1 and {MAX_SAMPLES}, got {args.samples}")
    if args.limit is not None and args.limit < 1:
        raise refuse(f"--limit must be >= 1 (leave it out for every task), got {args.limit}")

    plan = read_plan(args.study)
    check_out(args.out, args.study, plan)
    runs = {
        (level.name, estimator, seed): run_dir(args.study, trained_level(plan, level, estimator), estimator, seed)
        for level in plan.levels
        for estimator in plan.estimators
        for seed in plan.seeds
    }
    finished = {key: final_model(run) for key, run in runs.items()}
    finished = {key: model for key, model in finished.items() if model is not None}
    if not finished:
        raise refuse(f"{args.study} holds no finished run")
    unfinished = sorted({str(run) for key, run in runs.items() if key not in finished})
    if unfinished:
        shown = ", ".join(unfinished[:3]) + (f" and {len(unfinished) - 3} more" if len(unfinished) > 3 else "")
        print(f"note: {len(unfinished)} run(s) are missing or unfinished, left out: {shown}", file=sys.stderr)
    config = common_config([runs[key] for key in finished])
    first = runs[min(finished)]  # the start, evaluated through one run: every run starts from it
    models = {"start": (first, "start"), **{"/".join(map(str, key)): (runs[key], None) for key in finished}}
    # A run trained once stands for every level: evaluated once.
    distinct: dict[tuple[str, str | None], str] = {}
    for name, (run, checkpoint) in models.items():
        distinct.setdefault((str(run.resolve()), checkpoint), name)

    def folder(name: str, way: str) -> Path:
        return args.out / f"{name.replace('/', '__')}-{way}"

    def check(summary: Path, way: str) -> None:
        check_kept(summary, way, args.samples, args.seed, config.rollout.temperature, args.limit)

    settings = out_settings(args)
    check_settings(args.out, settings, [(folder(name, way), way) for name in distinct.values() for way in WAYS], check)
    results = {
        name: {
            way: evaluate(Path(run), checkpoint, folder(name, way), way, args, config.rollout.temperature)
            for way in WAYS
        }
        for (run, checkpoint), name in distinct.items()
    }
    value = {name: results[distinct[(str(run.resolve()), checkpoint)]] for name, (run, checkpoint) in models.items()}

    report: dict[str, Any] = {
        "samples": args.samples,
        "seed": args.seed,
        "limit": args.limit,
        "tasks": value["start"]["greedy"].get("n"),
        "tasks_source": "each run's own held-out tasks (slca eval indomain --run); the runs' config.yaml agree on them",
    }
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
