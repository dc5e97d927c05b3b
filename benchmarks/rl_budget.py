"""Choose the RL budget by measurement: candidate budgets on one preset (the quick demo's reader by
default), each run as a small study — GRPO and SLCA over the same seeds from one shared SFT
checkpoint — and compared by the probe set's sampled R_tool gain (docs/training.md, "The probe
set": the expected reward of the policy RL trains, on tasks no update trains on) per minute of this
machine, with the greedy gain beside it.

    python benchmarks/rl_budget.py --out runs/rl-budget --seeds 3
    python benchmarks/rl_budget.py --out runs/rl-budget --candidates today,updates-4 --seeds 3
    python benchmarks/rl_budget.py --out runs/rl-budget --report-only

Every candidate's study lives in ``OUT/<candidate>/`` and resumes like ``slca study`` (finished runs
are kept; rerun the same command to continue). The SFT checkpoint is made once, in the first
candidate's folder, and copied to the others (candidates differ only in RL settings, so it is the
checkpoint each would make). Writes ``OUT/report.md`` and ``OUT/report.json``: per candidate, the
rollouts and optimizer updates per step, the probe set's R_tool at the start and its gain for each
estimator, sampled and greedy (mean [95% CI] over seeds, exact sign-flip p), minutes per run,
sampled gain per minute, and the
share of training rollouts cut off. Time it alone on the machine: minutes are what the
choice is made on.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from slca_grpo.study.arms import run_count
from slca_grpo.study.plan import StudyBudget, StudyPlan
from slca_grpo.study.report import write_study_report
from slca_grpo.study.runner import run_study

# name -> (RL steps, overrides). Each names what it changes against "today" (the quick demo's
# budget as shipped: 6 prompts × G = 8, one update per step).
CANDIDATES: dict[str, tuple[int, tuple[str, ...]]] = {
    "today": (16, ("rl.prompts_per_step=6", "rl.mini_batch_prompts=6", "rollout.group_size=8")),
    # The same rollouts, three updates per step: the PPO ratio leaves 1, so the clip acts.
    "updates-3": (16, ("rl.prompts_per_step=6", "rl.mini_batch_prompts=2", "rollout.group_size=8")),
    # Four times the prompts per step, four updates per step (a mini-batch of today's size).
    "prompts-24": (16, ("rl.prompts_per_step=24", "rl.mini_batch_prompts=6", "rollout.group_size=8")),
    # As many rollouts as prompts-24, in larger groups.
    "g16-prompts-12": (16, ("rl.prompts_per_step=12", "rl.mini_batch_prompts=3", "rollout.group_size=16")),
    # Three times the steps at today's step.
    "steps-48": (48, ("rl.prompts_per_step=6", "rl.mini_batch_prompts=6", "rollout.group_size=8")),
}
ESTIMATORS = ("grpo", "slca")
# The probe metrics reported, the first one chosen by: the sampled policy's R_tool, then the greedy one.
GAIN_METRICS = ("sampled_r_tool", "r_tool")


def candidate_plan(name: str, preset: str, seeds: int, extra: tuple[str, ...]) -> StudyPlan:
    steps, overrides = CANDIDATES[name]
    budget = StudyBudget(preset=preset, seeds=seeds, noise="none", steps=steps, evals=1, eval_tasks=40)
    return StudyPlan(budget, ESTIMATORS, overrides=(*overrides, *extra))


def share_sft(out: Path, names: list[str]) -> None:
    """Copy the first candidate's finished SFT checkpoint to the candidates that have none."""
    source = next((out / n for n in names if (out / n / "sft_summary.json").exists()), None)
    if source is None:
        return
    for name in names:
        target = out / name
        if not (target / "sft_summary.json").exists():
            target.mkdir(parents=True, exist_ok=True)
            shutil.copytree(source / "sft", target / "sft", dirs_exist_ok=True)
            shutil.copy2(source / "sft_summary.json", target / "sft_summary.json")


def summarise(name: str, report: dict[str, Any]) -> dict[str, Any]:
    """One row of the comparison from a candidate's study report."""
    settings = report["settings"]
    config_rl = dict(o.split("=", 1) for o in CANDIDATES[name][1])
    prompts, mini = int(config_rl["rl.prompts_per_step"]), int(config_rl["rl.mini_batch_prompts"])
    group = int(config_rl["rollout.group_size"])
    seconds = report["seconds"]
    minutes = (seconds.get("run_mean") or 0.0) / 60
    cells = report["cells"]["none"]
    gains = {m: {e: cells[e]["probe_delta"].get(m) for e in ESTIMATORS if e in cells} for m in GAIN_METRICS}
    chosen = [g["mean"] for g in gains[GAIN_METRICS[0]].values() if g]
    return {
        "candidate": name,
        "steps": settings["steps"],
        "rollouts_per_step": prompts * group,
        "updates_per_step": -(-prompts // mini),
        "seeds": settings["seeds"],
        "probe_start": {
            m: ((cells[ESTIMATORS[0]]["probe"].get(m) or {}).get("mean") or [None])[0] for m in GAIN_METRICS
        },
        "gain": gains,
        "minutes_per_run": minutes,
        "gain_per_minute": (sum(chosen) / len(chosen)) / minutes if chosen and minutes else None,
        "train_truncated": {e: (cells[e].get("train_truncated") or {}).get("mean") for e in ESTIMATORS if e in cells},
    }


def _interval(gain: dict[str, Any] | None) -> str:
    if not gain:
        return "–"
    low = "" if gain.get("low") is None else f" [{gain['low']:+.3f}, {gain['high']:+.3f}]"
    return f"{gain['mean']:+.3f}{low} p={gain['p']:.3f}"


def markdown(rows: list[dict[str, Any]], machine: str) -> str:
    lines = [
        "# RL budget sweep",
        "",
        f"Machine: {machine}. Probe-set R_tool gain (last evaluation − start), sampled (the mean over several "
        "rollouts a task at the training temperature) and greedy, mean [95% CI] over seeds with the exact "
        "sign-flip p; minutes: wall time of one RL run, SFT excluded; gain/min: the sampled gain, both "
        "estimators' mean, per minute.",
        "",
        "| candidate | steps | rollouts/step | updates/step | seeds | probe start sampled / greedy | "
        "sampled gain GRPO | sampled gain SLCA | greedy gain GRPO | greedy gain SLCA | "
        "min/run | gain/min | truncated (train) % GRPO / SLCA |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        truncated = " / ".join(
            "–" if row["train_truncated"].get(e) is None else f"{100 * row['train_truncated'][e]:.1f}"
            for e in ESTIMATORS
        )
        start = " / ".join(
            "–" if row["probe_start"][m] is None else f"{row['probe_start'][m]:.3f}" for m in GAIN_METRICS
        )
        per_minute = "–" if row["gain_per_minute"] is None else f"{row['gain_per_minute']:+.4f}"
        gains = " | ".join(_interval(row["gain"][m].get(e)) for m in GAIN_METRICS for e in ESTIMATORS)
        lines.append(
            f"| {row['candidate']} | {row['steps']} | {row['rollouts_per_step']} | {row['updates_per_step']} | "
            f"{row['seeds']} | {start} | {gains} | {row['minutes_per_run']:.1f} | {per_minute} | {truncated} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runs/rl-budget")
    parser.add_argument("--preset", default="demo-quick")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--candidates", default=",".join(CANDIDATES), help=f"from {', '.join(CANDIDATES)}")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="KEY=VALUE for every run")
    parser.add_argument("--machine", default="this machine", help="named in the report, e.g. 'E: 2-core EPYC'")
    parser.add_argument("--report-only", action="store_true", help="report the finished runs; run nothing")
    args = parser.parse_args()
    names = [n.strip() for n in args.candidates.split(",") if n.strip()]
    unknown = [n for n in names if n not in CANDIDATES]
    if unknown:
        print(f"error: unknown candidate(s) {', '.join(unknown)}; known: {', '.join(CANDIDATES)}", file=sys.stderr)
        return 2
    if args.seeds < 1:
        print(f"error: --seeds must be at least 1, got {args.seeds}", file=sys.stderr)
        return 2
    out = Path(args.out)
    rows = []
    for name in names:
        plan = candidate_plan(name, args.preset, args.seeds, tuple(args.overrides))
        if args.report_only:
            if not (out / name).is_dir():
                continue
            report = write_study_report(out / name, plan)
        else:
            share_sft(out, names)
            print(f"[budget] {name}: {run_count(plan)} runs", flush=True)
            report = run_study(out / name, plan, echo=True)
        rows.append(summarise(name, report))
    if not rows:
        print(f"error: {out} holds no candidate's study to report (run without --report-only first)", file=sys.stderr)
        return 2
    text = markdown(rows, args.machine)
    (out / "report.md").write_text(text, encoding="utf-8")
    (out / "report.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
