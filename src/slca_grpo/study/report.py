"""A study's report: per-cell means with bootstrap CIs over seeds, paired differences, curves.

Cells are (noise level, estimator). Every comparison is paired by seed: estimators within a level
(treatment − baseline), a level against the reference level within an estimator (noise effect),
and the two together (does the treatment − baseline gap grow with noise: the interaction the
paper's claim predicts).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from slca_grpo.report import TABLE_COLUMNS, load_run, moving_average
from slca_grpo.study.plan import TIMINGS_FILE, NoiseLevel, StudyPlan, read_json, run_dir
from slca_grpo.study.stats import Interval, bootstrap_ci, paired_difference_ci

STUDY_METRICS = ("success@0.7", "success@0.9", "name_f1", "arg_match", "process", "r_sum")
LABELS = {key: label for key, label, _ in TABLE_COLUMNS}
SCALES = {key: scale for key, _, scale in TABLE_COLUMNS}
STEP_PREFIX = "step/"  # held-out score of gold step j's turn (eval/indomain.py), on multi-step tasks


def study_metrics(runs: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The study's metrics, and ``step/<j>`` for every gold step the final evaluations score."""
    steps = sorted(
        {key for run in runs for key in run["final"] if key.startswith(STEP_PREFIX)},
        key=lambda key: int(key[len(STEP_PREFIX) :]),
    )
    return (*STUDY_METRICS, *steps)


def metric_label(metric: str) -> str:
    if metric.startswith(STEP_PREFIX):
        return f"Step {metric[len(STEP_PREFIX) :]}"
    return LABELS[metric]


def metric_scale(metric: str) -> float:
    return 100.0 if metric.startswith(STEP_PREFIX) else SCALES[metric]


GRAD_COSINE = "diag/grad_cosine_tool_summary"
TRAINING_KEYS = ("reward/tool", "reward/summary", GRAD_COSINE)
NOISE_KEYS = ("noise/mean", "noise/std", "noise/replaced_rate")


def per_step(metrics: Sequence[Mapping[str, Any]], key: str) -> dict[int, float]:
    """step → value of ``key`` in a run's metrics.jsonl (a resumed run's replayed steps: last wins)."""
    return {int(row["step"]): float(row[key]) for row in metrics if key in row and row[key] is not None}


def run_record(path: Path) -> dict[str, Any]:
    """What the report needs from one finished RL run."""
    run = load_run(path)
    summary, metrics = run["summary"], run["metrics"]
    evals = summary.get("evals", [])
    start = evals[0] if evals and evals[0].get("step") == -1 else {}
    cosines = list(per_step(metrics, GRAD_COSINE).values())
    config_path = path / "config.yaml"
    return {
        "config": yaml.safe_load(config_path.read_text(encoding="utf-8")) if config_path.exists() else {},
        "start": start,
        "final": summary.get("final_eval", {}),
        "evals": {int(e["step"]) + 1: e for e in evals},  # keyed by RL steps done
        "training": {key: per_step(metrics, key) for key in TRAINING_KEYS},
        "grad_cosine": sum(cosines) / len(cosines) if cosines else None,
        "noise": {key: _mean(per_step(metrics, key).values()) for key in NOISE_KEYS},
    }


def _mean(values: Any) -> float | None:
    items = list(values)
    return sum(items) / len(items) if items else None


def collect_runs(out_dir: Path, plan: StudyPlan) -> dict[str, dict[str, dict[int, dict[str, Any]]]]:
    """level name → estimator → seed → run record, for the runs that finished."""
    cells: dict[str, dict[str, dict[int, dict[str, Any]]]] = {}
    for level in plan.levels:
        for estimator in plan.estimators:
            seeds = {seed: run_dir(out_dir, level, estimator, seed) for seed in plan.seeds}
            cells.setdefault(level.name, {})[estimator] = {
                seed: run_record(path) for seed, path in seeds.items() if (path / "summary.json").exists()
            }
    return cells


def _values(runs: Mapping[int, dict[str, Any]], pick: Callable[[dict[str, Any]], float | None]) -> dict[int, float]:
    out = {}
    for seed, run in runs.items():
        value = pick(run)
        if value is not None and math.isfinite(value):
            out[seed] = float(value)
    return out


def _interval(values: Mapping[int, float]) -> dict[str, Any] | None:
    if not values:
        return None
    interval = bootstrap_ci(list(values.values()))
    assert isinstance(interval, Interval)
    return {**interval.to_dict(), "values": {str(s): v for s, v in values.items()}}


def _paired(treatment: Mapping[int, float], baseline: Mapping[int, float]) -> dict[str, Any] | None:
    if not set(treatment) & set(baseline):
        return None
    return paired_difference_ci(treatment, baseline).to_dict()


def _final(metric: str) -> Callable[[dict[str, Any]], float | None]:
    return lambda run: run["final"].get(metric)


def _delta(metric: str) -> Callable[[dict[str, Any]], float | None]:
    def pick(run: dict[str, Any]) -> float | None:
        final, start = run["final"].get(metric), run["start"].get(metric)
        return None if final is None or start is None else final - start

    return pick


def _curve(
    runs: Mapping[int, dict[str, Any]], series: Callable[[dict[str, Any]], Mapping[int, float]], smooth: bool = False
) -> dict[str, Any] | None:
    """Mean and CI per step over the seeds, on the steps every seed has."""
    per_seed = [series(run) for run in runs.values()]
    steps = sorted(set.intersection(*(set(s) for s in per_seed))) if per_seed else []
    if not steps:
        return None
    rows = [[s[step] for step in steps] for s in per_seed]
    if smooth:
        rows = [moving_average(row) for row in rows]
    intervals = bootstrap_ci(rows)
    assert isinstance(intervals, list)
    points = [i.to_dict() for i in intervals]
    return {"steps": steps, **{key: [p[key] for p in points] for key in ("mean", "low", "high")}}


def summarise_cell(runs: Mapping[int, dict[str, Any]], metrics: Sequence[str] = STUDY_METRICS) -> dict[str, Any]:
    return {
        "seeds": sorted(runs),
        "final": {m: _interval(_values(runs, _final(m))) for m in metrics},
        "delta": {m: _interval(_values(runs, _delta(m))) for m in metrics},
        "grad_cosine": _interval(_values(runs, lambda run: run["grad_cosine"])),
        "noise": {
            key.split("/")[1]: _mean(_values(runs, lambda run, k=key: run["noise"][k]).values()) for key in NOISE_KEYS
        },
        "curves": {
            m: _curve(runs, lambda run, m=m: {step: e[m] for step, e in run["evals"].items() if m in e})
            for m in metrics
        },
        "training": {
            key: _curve(runs, lambda run, k=key: run["training"][k], smooth=key != GRAD_COSINE) for key in TRAINING_KEYS
        },
    }


def reference_level(levels: Sequence[NoiseLevel]) -> NoiseLevel:
    """The level the others are compared with: no noise when it was run, else the first."""
    return next((level for level in levels if level.name == "none"), levels[0])


def comparisons(
    cells: Mapping[str, Mapping[str, Mapping[int, dict[str, Any]]]],
    plan: StudyPlan,
    metrics: Sequence[str] = STUDY_METRICS,
) -> dict[str, Any]:
    """Paired differences: treatment − baseline per level (and, with three or more estimators, each
    later non-baseline one − each earlier one); level − reference per estimator; and their
    interaction (treatment − baseline at a level, minus the same at the reference)."""
    baseline, reference = plan.baseline, reference_level(plan.levels).name
    others = [e for e in plan.estimators if e != baseline]
    noisy = [level.name for level in plan.levels if level.name != reference]

    def final(level: str, estimator: str, metric: str) -> dict[int, float]:
        return _values(cells[level][estimator], _final(metric))

    def gap(level: str, estimator: str, metric: str) -> dict[int, float]:
        treated, base = final(level, estimator, metric), final(level, baseline, metric)
        return {s: treated[s] - base[s] for s in set(treated) & set(base)}

    out: dict[str, Any] = {
        "baseline": baseline,
        "reference_level": reference,
        "paired": {},
        "noise_effect": {},
        "interaction": {},
    }
    # Each estimator against the baseline, then the other estimators against each other (later − earlier).
    pairs = [(e, baseline) for e in others] + [(b, a) for i, a in enumerate(others) for b in others[i + 1 :]]
    for level in cells:
        out["paired"][level] = {
            f"{t} - {b}": {m: _paired(final(level, t, m), final(level, b, m)) for m in metrics} for t, b in pairs
        }
    for estimator in plan.estimators:
        out["noise_effect"][estimator] = {
            f"{level} - {reference}": {
                m: _paired(final(level, estimator, m), final(reference, estimator, m)) for m in metrics
            }
            for level in noisy
        }
    for estimator in others:
        out["interaction"][f"{estimator} - {baseline}"] = {
            f"{level} - {reference}": {
                m: _paired(gap(level, estimator, m), gap(reference, estimator, m)) for m in metrics
            }
            for level in noisy
        }
    return out


# -- markdown ---------------------------------------------------------------------------------


def _number(value: float | None, scale: float, signed: bool = False) -> str:
    if value is None:
        return "–"
    digits = 1 if scale != 1.0 else 3
    return f"{value * scale:+.{digits}f}" if signed else f"{value * scale:.{digits}f}"


def format_interval(interval: Mapping[str, Any] | None, scale: float = 1.0, *, signed: bool = False) -> str:
    """``45.2 [41.0, 49.3]``; a difference whose CI excludes 0 is starred; no CI with one seed."""
    if not interval:
        return "–"
    mean = _number(interval["mean"], scale, signed)
    if interval.get("low") is None:
        return f"{mean} (n=1)"
    star = "*" if signed and (interval["low"] > 0 or interval["high"] < 0) else ""
    wins = f" {interval['wins']}/{interval['n']}" if "wins" in interval else ""
    return f"{mean} [{_number(interval['low'], scale, signed)}, {_number(interval['high'], scale, signed)}]{star}{wins}"


def _table(
    title: str,
    rows: Sequence[tuple[str, Mapping[str, Any]]],
    metrics: Sequence[str],
    *,
    signed: bool,
    note: str = "",
) -> list[str]:
    header = "| | " + " | ".join(metric_label(m) for m in metrics) + " |"
    lines = [f"### {title}", "", *([note, ""] if note else []), header, "|---|" + "---:|" * len(metrics)]
    for name, by_metric in rows:
        lines.append(
            f"| {name} | "
            + " | ".join(format_interval(by_metric.get(m), metric_scale(m), signed=signed) for m in metrics)
            + " |"
        )
    return lines + [""]


def markdown_report(report: Mapping[str, Any], plan: StudyPlan) -> str:
    labels = {level.name: level.label for level in plan.levels}
    cells, compared, settings = report["cells"], report["comparisons"], report["settings"]
    metrics = report.get("metrics") or STUDY_METRICS
    baseline = compared["baseline"]
    lines = [
        "# Credit-assignment study",
        "",
        f"Preset `{settings['preset']}` · {settings['seeds']} seeds · {settings['steps']} RL steps × "
        f"{settings['prompts_per_step']} prompts × G = {settings['group_size']} · "
        f"held-out: {settings['eval_tasks']} tasks, greedy · "
        f"noise levels: {', '.join(labels.values())} · estimators: {', '.join(plan.estimators)}.",
        "",
        "Mean [95% CI] over seeds (expanded percentile bootstrap of the mean, docs/study.md). "
        "Rates in %, R_sum on its 0–1 scale. Differences are paired by seed; `*` marks a CI that excludes 0; "
        "`k/n`: seeds where the difference is positive.",
        "",
    ]
    start = report.get("start_eval") or {}
    if start:
        lines += [
            "Start (the SFT checkpoint, before RL): "
            + ", ".join(f"{metric_label(m)} {_number(start.get(m), metric_scale(m))}" for m in metrics),
            "",
        ]
    rows = [
        (f"{labels[level]} · {estimator}", cell["final"])
        for level, by_est in cells.items()
        for estimator, cell in by_est.items()
    ]
    lines += _table("Final held-out metrics", rows, metrics, signed=False)
    rows = [
        (f"{labels[level]} · {estimator}", cell["delta"])
        for level, by_est in cells.items()
        for estimator, cell in by_est.items()
    ]
    lines += _table("Change from the start (final − SFT checkpoint)", rows, metrics, signed=True)
    rows = [
        (f"{labels[level]} · {pair}", by_metric)
        for level, pairs in compared["paired"].items()
        for pair, by_metric in pairs.items()
    ]
    if rows:
        title = f"Paired difference against {baseline}" if len(plan.estimators) < 3 else "Paired differences"
        lines += _table(title, rows, metrics, signed=True)
    reference = labels[compared["reference_level"]]
    rows = [
        (f"{estimator} · {labels[pair.split(' - ')[0]]} − {reference}", by_metric)
        for estimator, pairs in compared["noise_effect"].items()
        for pair, by_metric in pairs.items()
    ]
    if rows:
        lines += _table(
            "Effect of the noise (level − reference, same estimator)",
            rows,
            metrics,
            signed=True,
            note="Negative: the estimator ends worse with noisy summary rewards than without.",
        )
    rows = [
        (f"({gap}) · {labels[pair.split(' - ')[0]]} − {reference}", by_metric)
        for gap, pairs in compared["interaction"].items()
        for pair, by_metric in pairs.items()
    ]
    if rows:
        lines += _table(
            "Interaction: how much the gap changes with noise",
            rows,
            metrics,
            signed=True,
            note=f"(treatment − {baseline}) at a level minus the same at {reference}. Positive: noise widens the "
            "treatment's lead — what the paper's claim predicts for SLCA against GRPO.",
        )
    lines += [
        "### Training diagnostics",
        "",
        "| | grad cosine tool·summary | noise: mean shift of R_sum | std of the shift | % replaced |",
        "|---|---:|---:|---:|---:|",
    ]
    for level, by_est in cells.items():
        for estimator, cell in by_est.items():
            noise = cell["noise"]
            lines.append(
                f"| {labels[level]} · {estimator} | {format_interval(cell['grad_cosine'], signed=True)} | "
                f"{_number(noise.get('mean'), 1.0, signed=True)} | {_number(noise.get('std'), 1.0)} | "
                f"{_number(noise.get('replaced_rate'), 100.0)} |"
            )
    lines += [
        "",
        "Charts: `curves.png` (held-out metrics per step, band = 95% CI over seeds), `training.png` (training "
        "R_tool and R_sum — the clean ones — and the gradient cosine per step), `noise_levels.png` (final metrics and "
        "paired differences against the noise level).",
        "",
    ]
    seconds = report.get("seconds") or {}
    if seconds.get("runs"):
        lines += [
            f"Cost: SFT {seconds.get('sft') or 0:.0f} s; {seconds['runs']} RL runs timed, "
            f"{seconds['run_mean']:.0f} s each on average.",
            "",
        ]
    return "\n".join(lines)


def write_study_report(out_dir: str | Path, plan: StudyPlan) -> dict[str, Any]:
    """Read the finished runs of ``out_dir`` and write ``report.json``, ``report.md`` and charts."""
    from slca_grpo.study.plots import plot_study

    out_dir = Path(out_dir)
    runs = collect_runs(out_dir, plan)
    finished = [run for by_est in runs.values() for cell in by_est.values() for run in cell.values()]
    if not finished:
        raise FileNotFoundError(f"{out_dir} holds no finished study run")
    starts = [run["start"] for run in finished if run["start"]]
    metrics = study_metrics(finished)
    config = finished[0]["config"]  # what the runs used (the preset may have changed since)
    rl = config.get("rl", {})
    timings = read_json(out_dir / TIMINGS_FILE, {})
    sft_summary = read_json(out_dir / "sft_summary.json", {})
    report = {
        "settings": {
            **plan.to_dict(),
            "preset": plan.budget.preset,
            "seeds": len(plan.seeds),
            "steps": rl.get("steps"),
            "prompts_per_step": rl.get("prompts_per_step"),
            "group_size": config.get("rollout", {}).get("group_size"),
            "eval_every": config.get("train", {}).get("eval_every"),
            "eval_tasks": starts[0].get("n") if starts else None,
            "level_labels": {level.name: level.label for level in plan.levels},
        },
        "metrics": list(metrics),
        "start_eval": starts[0] if starts else None,
        "cells": {
            level: {estimator: summarise_cell(cell, metrics) for estimator, cell in by_est.items()}
            for level, by_est in runs.items()
        },
        "comparisons": comparisons(runs, plan, metrics),
        "seconds": {
            "sft": sft_summary.get("seconds"),
            "runs": len(timings),
            "run_mean": sum(timings.values()) / len(timings) if timings else None,
            "by_run": timings,
        },
    }
    (out_dir / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    (out_dir / "report.md").write_text(markdown_report(report, plan), encoding="utf-8")
    plot_study(report, plan, out_dir)
    return report
