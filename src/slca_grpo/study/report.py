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

from slca_grpo.config import ConfigError
from slca_grpo.provenance import ProvenanceDamaged, describe, pairing_key, printable, read_provenance
from slca_grpo.report import PROBE_METRICS, load_run, moving_average, train_truncation
from slca_grpo.study.arms import trained_level
from slca_grpo.study.metrics import (
    GRAD_COSINE,
    HELD_OUT_TRUNCATED,
    NOISE_KEYS,
    STUDY_METRICS,
    TRAINING_KEYS,
    TRAINING_TRUNCATED,
    study_metrics,
)
from slca_grpo.study.outcomes import (
    BFCL_OVERALL,
    BFCL_PREFIX,
    ENDING_METRICS,
    START_FOLDER,
    TRAIN_FORCED,
    TRAINING_FORCED,
    bfcl_scores,
    read_bfcl,
    read_items,
    task_level_p,
)
from slca_grpo.study.plan import BFCL_TIMINGS_FILE, TIMINGS_FILE, StudyPlan, read_json, reference_level, run_dir
from slca_grpo.study.plots import plot_study
from slca_grpo.study.stats import Interval, bootstrap_ci, holm_adjust, paired_difference_ci, sign_flip_p
from slca_grpo.study.tables import markdown_report


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
        "final": {**summary.get("final_eval", {}), **bfcl_scores(read_bfcl(path))},
        # Per task, greedy: the last evaluation's and the one before RL (kept by the run that made it).
        "items": read_items(path / "eval_items.jsonl"),
        "start_items": read_items(path / "eval_start_items.jsonl"),
        TRAINING_FORCED: _mean(per_step(metrics, TRAIN_FORCED).values()),
        "evals": {int(e["step"]) + 1: e for e in evals},  # keyed by RL steps done
        "probes": {int(p["step"]) + 1: p for p in summary.get("probes", [])},
        "training": {key: per_step(metrics, key) for key in TRAINING_KEYS},
        "grad_cosine": sum(cosines) / len(cosines) if cosines else None,
        "noise": {key: _mean(per_step(metrics, key).values()) for key in NOISE_KEYS},
        TRAINING_TRUNCATED: train_truncation(metrics),
        "provenance": _provenance_or_damage(path),
    }


def _provenance_or_damage(path: Path) -> dict[str, Any] | None:
    """The run's provenance, or ``{"damaged": why}`` where its provenance.json cannot be read."""
    try:
        return read_provenance(path)
    except ProvenanceDamaged as exc:
        return {"damaged": str(exc)}


def _mean(values: Any) -> float | None:
    items = list(values)
    return sum(items) / len(items) if items else None


def collect_runs(out_dir: Path, plan: StudyPlan) -> dict[str, dict[str, dict[int, dict[str, Any]]]]:
    """level name → estimator → seed → run record, for the runs that finished."""
    cells: dict[str, dict[str, dict[int, dict[str, Any]]]] = {}
    for level in plan.levels:
        for estimator in plan.estimators:
            trained = trained_level(plan, level, estimator)  # a noise-blind arm's one run stands for every level
            seeds = {seed: run_dir(out_dir, trained, estimator, seed) for seed in plan.seeds}
            cells.setdefault(level.name, {})[estimator] = {
                seed: run_record(path) for seed, path in seeds.items() if (path / "summary.json").exists()
            }
    # What every run of a seed shares: the start's BFCL scores, and its held-out items (kept by
    # the run that evaluated the start; the seed's other runs were given its record).
    start_bfcl = bfcl_scores(read_bfcl(out_dir / START_FOLDER))
    runs = [(seed, run) for by_est in cells.values() for cell in by_est.values() for seed, run in cell.items()]
    start_items = {seed: run["start_items"] for seed, run in runs if run["start_items"] is not None}
    for seed, run in runs:
        if run["start"]:
            run["start"] = {**run["start"], **start_bfcl}
        if run["start_items"] is None:
            run["start_items"] = start_items.get(seed)
    return cells


def _values(runs: Mapping[int, dict[str, Any]], pick: Callable[[dict[str, Any]], float | None]) -> dict[int, float]:
    out = {}
    for seed, run in runs.items():
        value = pick(run)
        if value is not None and math.isfinite(value):
            out[seed] = float(value)
    return out


def _interval(values: Mapping[int, float], *, test: bool = False) -> dict[str, Any] | None:
    """Mean and bootstrap CI over seeds; with ``test``, also the exact sign-flip p of "mean = 0"."""
    if not values:
        return None
    interval = bootstrap_ci(list(values.values()))
    assert isinstance(interval, Interval)
    out = {**interval.to_dict(), "values": {str(s): v for s, v in values.items()}}
    if test:
        out["p"] = sign_flip_p(list(values.values()))
    return out


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


def _probe_gain(metric: str) -> Callable[[dict[str, Any]], float | None]:
    """The probe set's change of ``metric`` from its start (0 steps done) to its last evaluation."""

    def pick(run: dict[str, Any]) -> float | None:
        probes = run["probes"]
        if 0 not in probes or len(probes) < 2:
            return None
        first, last = probes[0].get(metric), probes[max(probes)].get(metric)
        return None if first is None or last is None else last - first

    return pick


def summarise_cell(runs: Mapping[int, dict[str, Any]], metrics: Sequence[str] = STUDY_METRICS) -> dict[str, Any]:
    return {
        "seeds": sorted(runs),
        "final": {m: _interval(_values(runs, _final(m))) for m in (*metrics, HELD_OUT_TRUNCATED)},
        "delta": {
            **{m: _interval(_values(runs, _delta(m)), test=True) for m in metrics},
            HELD_OUT_TRUNCATED: _interval(_values(runs, _delta(HELD_OUT_TRUNCATED))),
        },
        TRAINING_TRUNCATED: _interval(_values(runs, lambda run: run[TRAINING_TRUNCATED])),
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
        "probe": {
            m: _curve(runs, lambda run, m=m: {step: p[m] for step, p in run["probes"].items() if m in p})
            for m in PROBE_METRICS
        },
        "probe_delta": {m: _interval(_values(runs, _probe_gain(m)), test=True) for m in PROBE_METRICS},
    }


def family_cell(runs: Mapping[int, dict[str, Any]], metrics: Sequence[str]) -> dict[str, Any]:
    """Final values and changes from the start (exact test) of ``metrics`` over a cell's seeds."""
    return {
        "final": {m: _interval(_values(runs, _final(m))) for m in metrics},
        "delta": {m: _interval(_values(runs, _delta(m)), test=True) for m in metrics},
    }


def primary_family(runs: Mapping[str, Mapping[int, dict[str, Any]]], metric: str, baseline: str) -> dict[str, Any]:
    """The primary comparisons at one noise level (``runs``: estimator → seed → run record): each
    estimator − start, then each other estimator − ``baseline``, paired by seed; the task-level test
    beside each (over the same seeds' items); Holm over all of them."""

    def start(run: dict[str, Any]) -> float | None:
        return run["start"].get(metric)

    pairs = [(estimator, "start", start, "start_items", estimator) for estimator in runs]
    pairs += [(e, baseline, _final(metric), "items", baseline) for e in runs if e != baseline and baseline in runs]
    tests = []
    for estimator, against, pick, items, other in pairs:
        test = _paired(_values(runs[estimator], _final(metric)), _values(runs[other], pick))
        if test is None:
            continue
        seeds = test["seeds"]
        test["task_level"] = task_level_p(
            [runs[estimator][s]["items"] for s in seeds], [runs[other][s][items] for s in seeds], metric
        )
        tests.append({"comparison": f"{estimator} - {against}", **test})
    add_holm(tests)
    return {"metric": metric, "tests": tests}


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
    for family in ("paired", "noise_effect", "interaction"):
        add_holm(
            [test for pairs in out[family].values() for by_metric in pairs.values() for test in by_metric.values()]
        )
    return out


def add_holm(tests: Sequence[dict[str, Any] | None]) -> None:
    """Set ``holm_p`` on each test of one table (a family): its Holm–Bonferroni adjusted p-value."""
    present = [test for test in tests if test is not None and test.get("p") is not None]
    for test, adjusted in zip(present, holm_adjust([test["p"] for test in present])):
        test["holm_p"] = adjusted


def _bfcl_order(metric: str) -> tuple[bool, str]:
    return metric == BFCL_OVERALL, metric  # categories first, then overall


def run_provenance(runs: Sequence[Mapping[str, Any]]) -> str | None:
    """One line describing the code and environment every run shares; an error when they differ
    (the study pairs runs seed by seed, which holds only within one commit and one environment)."""
    records = [run["provenance"] for run in runs]
    damaged = [record["damaged"] for record in records if record and "damaged" in record]
    if damaged:
        # Said in the report, not raised: the numbers stand, their pairing cannot be checked.
        return (
            f"not known: {len(damaged)} of {len(records)} runs' provenance.json is damaged "
            f"({printable(damaged[0])}{'; …' if len(damaged) > 1 else ''}), so whether the runs share one "
            "commit and environment cannot be checked"
        )
    if all(record is None for record in records):
        return None  # runs made before provenance was recorded
    keys = {pairing_key(record) if record else None for record in records}
    if len(keys) > 1:
        shown = sorted({describe(record) if record else "not recorded" for record in records})
        raise ConfigError(
            "the study's runs were made with different code or environments, and are not paired: " + " | ".join(shown)
        )
    return describe(records[0])


def _threads_text(threads: Mapping[str, Any]) -> str:
    return (
        f"{threads.get('torch_threads')} torch threads, MKL_DYNAMIC={threads.get('mkl_dynamic')}, "
        f"MKL_CBWR={threads.get('mkl_cbwr')}, OMP_DYNAMIC={threads.get('omp_dynamic')}"
    )


def run_threads(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The thread settings the runs computed with (``{"text", "differ"}``; None where no run
    recorded them). A run's digits depend on them, so runs made with others are said to differ."""
    seen: dict[str, int] = {}
    for run in runs:
        record = run["provenance"] or {}
        for key in ("threads", "threads_resumed"):
            if isinstance(record.get(key), dict):
                text = _threads_text(record[key])
                seen[text] = seen.get(text, 0) + 1
    if not seen:
        return None
    if len(seen) == 1:
        return {"text": next(iter(seen)), "differ": False}
    return {"text": " | ".join(f"{text} ({count} runs)" for text, count in sorted(seen.items())), "differ": True}


def write_study_report(out_dir: str | Path, plan: StudyPlan) -> dict[str, Any]:
    """Read the finished runs of ``out_dir`` and write ``report.json``, ``report.md`` and charts."""
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
    cells = {
        level: {estimator: summarise_cell(cell, metrics) for estimator, cell in by_est.items()}
        for level, by_est in runs.items()
    }
    add_holm([cell["delta"][m] for by_est in cells.values() for cell in by_est.values() for m in metrics])
    endings = [m for m in ENDING_METRICS if any(m in run["final"] for run in finished)]
    bfcl = sorted({m for run in finished for m in run["final"] if m.startswith(BFCL_PREFIX)}, key=_bfcl_order)
    for key, family in (("endings", endings), ("bfcl", bfcl)):
        for level, by_est in runs.items():
            for estimator, cell in by_est.items():
                cells[level][estimator][key] = family_cell(cell, family)
        add_holm([cell[key]["delta"][m] for by_est in cells.values() for cell in by_est.values() for m in family])
    for level, by_est in runs.items():
        for estimator, cell in by_est.items():
            cells[level][estimator][TRAINING_FORCED] = _interval(_values(cell, lambda run: run[TRAINING_FORCED]))
    reference = reference_level(plan.levels).name
    add_holm([cell["probe_delta"][m] for by_est in cells.values() for cell in by_est.values() for m in PROBE_METRICS])
    sft_provenance = sft_summary.get("provenance")
    report = {
        "settings": {
            **plan.to_dict(),
            "code": run_provenance(finished),
            "threads": run_threads(finished),
            "sft_code": describe(sft_provenance) if isinstance(sft_provenance, dict) else None,
            "preset": plan.budget.preset,
            "seeds": len(plan.seeds),
            "steps": rl.get("steps"),
            "prompts_per_step": rl.get("prompts_per_step"),
            "group_size": config.get("rollout", {}).get("group_size"),
            "eval_every": config.get("train", {}).get("eval_every"),
            "eval_tasks": starts[0].get("n") if starts else None,
            "probe_every": config.get("train", {}).get("probe_every"),
            "probe_tasks": next((run["probes"][0].get("n") for run in finished if 0 in run["probes"]), None),
            "level_labels": {level.name: level.label for level in plan.levels},
        },
        "metrics": list(metrics),
        "start_eval": starts[0] if starts else None,
        "cells": cells,
        "comparisons": comparisons(runs, plan, metrics),
        "primary": primary_family(runs[reference], plan.budget.primary, plan.baseline) if plan.budget.primary else None,
        "endings": endings,
        "bfcl": {
            "metrics": bfcl,
            "start": {m: v for m, v in (starts[0] if starts else {}).items() if m.startswith(BFCL_PREFIX)},
            "paired": comparisons(runs, plan, bfcl)["paired"] if bfcl else {},
            "seconds": read_json(out_dir / BFCL_TIMINGS_FILE, {}),
        },
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
