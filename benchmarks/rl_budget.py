"""Choose the RL budget by measurement: candidate budgets on one model's preset, each run as a
small study — the estimators over the same seeds from one shared SFT checkpoint — compared by the
probe set's gain (docs/training.md, "The probe set": training-distribution tasks no update trains
on) per hour of this machine.

    python benchmarks/rl_budget.py --out runs/rl-budget --seeds 3                  # the reader
    python benchmarks/rl_budget.py --out runs/rl-budget --candidates today,updates-3 --seeds 3
    python benchmarks/rl_budget.py --model smollm2 --out runs/pilot --seeds 2 --estimators grpo
    python benchmarks/rl_budget.py --out runs/rl-budget --report-only

``--model reader`` (the quick demo's preset) chooses by the sampled policy's R_tool, the quantity
RL raises there, with the greedy gain beside it. ``--model smollm2`` (``demo-smollm2``, held out
on 64 tasks) chooses by the greedy policy's R_tool, the policy the evaluations score, with greedy
Success@0.7 and the sampled gains beside it; each of its candidates names what it changes against
the preset's RL (steps, prompts per step, G, lr, full weights or LoRA).

Every candidate's study lives in ``OUT/<candidate>/`` and resumes like ``slca study`` (finished runs
are kept; rerun the same command, from the same commit, to continue). The SFT checkpoint is made
once, in the first candidate's folder, and copied to the others (candidates differ only in RL
settings, so it is the checkpoint each would make). Writes ``OUT/report.md`` and
``OUT/report.json``: per candidate, the rollouts and optimizer updates per step, the probe set at
the start and the gains for each estimator (mean [95% CI] over seeds, exact sign-flip p), minutes
per run, the chosen gain per hour, and the share of training rollouts cut off. Time it alone on
the machine: minutes are what the choice is made on.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slca_grpo.config import ConfigError
from slca_grpo.registry import UnknownNameError
from slca_grpo.study.arms import run_count
from slca_grpo.study.plan import StudyBudget, StudyPlan
from slca_grpo.study.report import write_study_report
from slca_grpo.study.runner import run_study

# name -> (RL steps, overrides). Each names what it changes against "today" (the quick demo's
# budget as shipped: 6 prompts × G = 8, one update per step).
READER_CANDIDATES: dict[str, tuple[int, tuple[str, ...]]] = {
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
# Against demo-smollm2's RL as shipped (10 steps of 4 prompts × G = 4, lr 5e-6, every weight).
_SMOLLM2_STEP = ("rl.prompts_per_step=4", "rl.mini_batch_prompts=4", "rollout.group_size=4")
SMOLLM2_CANDIDATES: dict[str, tuple[int, tuple[str, ...]]] = {
    "today": (10, (*_SMOLLM2_STEP, "rl.lr=5e-6")),
    # Four times the learning rate: does a step move the greedy policy at all?
    "lr-2e-5": (10, (*_SMOLLM2_STEP, "rl.lr=2e-5")),
    # Three times the steps at twice the rate.
    "steps-30-lr-1e-5": (30, (*_SMOLLM2_STEP, "rl.lr=1e-5")),
    # Groups of 8: more contrast within a group, twice the rollouts a step.
    "g8-lr-1e-5": (10, ("rl.prompts_per_step=4", "rl.mini_batch_prompts=4", "rollout.group_size=8", "rl.lr=1e-5")),
    # Rank-16 adapters at an adapter's usual rate: a cheaper backward pass, the base kept as reference.
    "lora-r16-lr-1e-4": (10, (*_SMOLLM2_STEP, "model.lora.r=16", "rl.lr=1e-4")),
}


@dataclass(frozen=True)
class Model:
    """What a model's sweep runs on and chooses by."""

    preset: str
    candidates: dict[str, tuple[int, tuple[str, ...]]]
    gain_metrics: tuple[str, ...]  # the probe metrics reported; the first is the one chosen by
    eval_tasks: int
    overrides: tuple[str, ...] = ()  # for every candidate


MODELS = {
    "reader": Model("demo-quick", READER_CANDIDATES, ("sampled_r_tool", "r_tool"), eval_tasks=40),
    # The probe set sampled twice a task beside the greedy pass (the preset evaluates greedily only).
    "smollm2": Model(
        "demo-smollm2",
        SMOLLM2_CANDIDATES,
        ("r_tool", "success@0.7", "sampled_r_tool", "sampled_success@0.7"),
        eval_tasks=64,
        overrides=("train.probe_samples=2",),
    ),
}
ESTIMATORS = ("grpo", "slca")


def candidate_plan(
    model: Model, name: str, seeds: int, estimators: tuple[str, ...], extra: tuple[str, ...]
) -> StudyPlan:
    steps, overrides = model.candidates[name]
    budget = StudyBudget(
        preset=model.preset, seeds=seeds, noise="none", steps=steps, evals=1, eval_tasks=model.eval_tasks
    )
    return StudyPlan(budget, estimators, overrides=(*model.overrides, *overrides, *extra))


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


def summarise(model: Model, name: str, report: dict[str, Any], estimators: tuple[str, ...]) -> dict[str, Any]:
    """One row of the comparison from a candidate's study report."""
    settings = report["settings"]
    config_rl = dict(o.split("=", 1) for o in model.candidates[name][1])
    prompts, mini = int(config_rl["rl.prompts_per_step"]), int(config_rl["rl.mini_batch_prompts"])
    group = int(config_rl["rollout.group_size"])
    seconds = report["seconds"]
    minutes = (seconds.get("run_mean") or 0.0) / 60
    cells = report["cells"]["none"]
    gains = {m: {e: cells[e]["probe_delta"].get(m) for e in estimators if e in cells} for m in model.gain_metrics}
    chosen = [g["mean"] for g in gains[model.gain_metrics[0]].values() if g]
    return {
        "candidate": name,
        "steps": settings["steps"],
        "rollouts_per_step": prompts * group,
        "updates_per_step": -(-prompts // mini),
        "seeds": settings["seeds"],
        "probe_start": {
            m: ((cells[estimators[0]]["probe"].get(m) or {}).get("mean") or [None])[0] for m in model.gain_metrics
        },
        "gain": gains,
        "minutes_per_run": minutes,
        "gain_per_hour": (sum(chosen) / len(chosen)) / (minutes / 60) if chosen and minutes else None,
        "train_truncated": {e: (cells[e].get("train_truncated") or {}).get("mean") for e in estimators if e in cells},
    }


def _interval(gain: dict[str, Any] | None) -> str:
    if not gain:
        return "–"
    low = "" if gain.get("low") is None else f" [{gain['low']:+.3f}, {gain['high']:+.3f}]"
    return f"{gain['mean']:+.3f}{low} p={gain['p']:.3f}"


def markdown(rows: list[dict[str, Any]], model: Model, estimators: tuple[str, ...], machine: str) -> str:
    metrics = model.gain_metrics
    gain_headers = " | ".join(f"{m} gain {e.upper()}" for m in metrics for e in estimators)
    lines = [
        "# RL budget sweep",
        "",
        f"Machine: {machine}. Preset {model.preset}. Probe-set gains (last evaluation − start; `sampled_`: the "
        "mean over several rollouts a task at the training temperature, else greedy), mean [95% CI] over seeds "
        "with the exact sign-flip p; minutes: wall time of one RL run, SFT excluded; gain/h: the "
        f"{metrics[0]} gain, the estimators' mean, per hour of this machine.",
        "",
        f"| candidate | steps | rollouts/step | updates/step | seeds | probe start {' / '.join(metrics)} | "
        f"{gain_headers} | min/run | gain/h | truncated (train) % {' / '.join(e.upper() for e in estimators)} |",
        "|---|---:|---:|---:|---:|---:|" + "---:|" * (len(metrics) * len(estimators)) + "---:|---:|---:|",
    ]
    for row in rows:
        truncated = " / ".join(
            "–" if row["train_truncated"].get(e) is None else f"{100 * row['train_truncated'][e]:.1f}"
            for e in estimators
        )
        start = " / ".join("–" if row["probe_start"][m] is None else f"{row['probe_start'][m]:.3f}" for m in metrics)
        per_hour = "–" if row["gain_per_hour"] is None else f"{row['gain_per_hour']:+.3f}"
        gains = " | ".join(_interval(row["gain"][m].get(e)) for m in metrics for e in estimators)
        lines.append(
            f"| {row['candidate']} | {row['steps']} | {row['rollouts_per_step']} | {row['updates_per_step']} | "
            f"{row['seeds']} | {start} | {gains} | {row['minutes_per_run']:.1f} | {per_hour} | {truncated} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runs/rl-budget")
    parser.add_argument("--model", default="reader", choices=sorted(MODELS), help="whose preset and candidates")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--candidates", help="comma-separated (default: all of the model's)")
    parser.add_argument(
        "--estimators", default=",".join(ESTIMATORS), help=f"comma-separated (default: {','.join(ESTIMATORS)})"
    )
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="KEY=VALUE for every run")
    parser.add_argument("--machine", default="this machine", help="named in the report, e.g. 'E: 2-core EPYC'")
    parser.add_argument("--report-only", action="store_true", help="report the finished runs; run nothing")
    args = parser.parse_args()
    model = MODELS[args.model]
    names = [n.strip() for n in (args.candidates or ",".join(model.candidates)).split(",") if n.strip()]
    unknown = [n for n in names if n not in model.candidates]
    if unknown:
        known = ", ".join(model.candidates)
        print(f"error: unknown candidate(s) {', '.join(unknown)} for {args.model}; known: {known}", file=sys.stderr)
        return 2
    estimators = tuple(e.strip() for e in args.estimators.split(",") if e.strip())
    if not estimators:
        print("error: --estimators names none", file=sys.stderr)
        return 2
    if args.seeds < 1:
        print(f"error: --seeds must be at least 1, got {args.seeds}", file=sys.stderr)
        return 2
    out = Path(args.out)
    rows = []
    for name in names:
        plan = candidate_plan(model, name, args.seeds, estimators, tuple(args.overrides))
        try:
            if args.report_only:
                if not (out / name).is_dir():
                    continue
                report = write_study_report(out / name, plan)
            else:
                share_sft(out, names)
                print(f"[budget] {name}: {run_count(plan)} runs", flush=True)
                report = run_study(out / name, plan, echo=True)
        except (ConfigError, UnknownNameError) as exc:  # a bad --set or estimator, runs of other settings
            message = exc.args[0] if isinstance(exc, UnknownNameError) else exc  # a KeyError's str() quotes it
            print(f"error: {name}: {message}", file=sys.stderr)
            return 2
        rows.append(summarise(model, name, report, estimators))
    if not rows:
        print(f"error: {out} holds no candidate's study to report (run without --report-only first)", file=sys.stderr)
        return 2
    text = markdown(rows, model, estimators, args.machine)
    (out / "report.md").write_text(text, encoding="utf-8")
    (out / "report.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
