"""The study's charts: learning curves with CI bands, and final metrics against the noise level."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from slca_grpo.plotting import agg_pyplot
from slca_grpo.report import TRAIN_TRUNCATED
from slca_grpo.study.metrics import GRAD_COSINE, STUDY_METRICS, metric_label, metric_scale
from slca_grpo.study.plan import StudyPlan

TRAINING_TITLES = {
    "reward/tool": "training R_tool (smoothed)",
    "reward/summary": "training R_sum, clean (smoothed)",
    TRAIN_TRUNCATED: "training rollouts truncated (smoothed)",
    GRAD_COSINE: "grad cosine tool·summary",
}


def _title(metric: str) -> str:
    return f"{metric_label(metric)} (%)" if metric_scale(metric) == 100.0 else metric_label(metric)


def _band(axis: Any, curve: Mapping[str, Any] | None, scale: float, label: str, color: str) -> None:
    """A mean line with its CI band (no band where there was a single seed)."""
    if not curve:
        return
    steps = curve["steps"]
    axis.plot(
        steps,
        [m * scale for m in curve["mean"]],
        marker="o" if len(steps) < 12 else None,
        ms=3,
        label=label,
        color=color,
    )
    if all(value is not None for value in curve["low"]):
        axis.fill_between(
            steps, [v * scale for v in curve["low"]], [v * scale for v in curve["high"]], alpha=0.2, color=color
        )


def _legend(axes: Any, **style: Any) -> None:
    """One legend for a row of panels, on its first panel that has labelled lines."""
    for axis in axes:
        if axis.get_legend_handles_labels()[0]:
            axis.legend(**style)
            return


def _grid(
    report: Mapping[str, Any], plan: StudyPlan, rows: Sequence[tuple[str, str, float, str]], path: Path, xlabel: str
) -> None:
    """One panel per (row, noise level); a line and band per estimator. ``rows``: (section, key,
    scale, title) with section ``curves`` or ``training``."""
    plt = agg_pyplot()
    colors = {e: f"C{i}" for i, e in enumerate(plan.estimators)}
    levels = plan.levels
    figure, axes = plt.subplots(
        len(rows), len(levels), figsize=(4.2 * len(levels), 2.8 * len(rows)), squeeze=False, sharex=True
    )
    for r, (section, key, scale, title) in enumerate(rows):
        for c, level in enumerate(levels):
            axis = axes[r][c]
            for estimator, cell in report["cells"][level.name].items():
                _band(axis, cell.get(section, {}).get(key), scale, estimator, colors[estimator])
            axis.set_title(f"{title} · noise {level.label}", fontsize=9)
            axis.grid(alpha=0.3)
            if r == len(rows) - 1:
                axis.set_xlabel(xlabel)
    _legend(axes.flatten(), fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _errorbars(
    axis: Any, positions: Sequence[float], intervals: Sequence[Mapping[str, Any] | None], scale: float, **style: Any
) -> None:
    points = [(x, i) for x, i in zip(positions, intervals) if i]
    if not points:
        return
    xs = [x for x, _ in points]
    means = [i["mean"] * scale for _, i in points]
    errors = [
        [(i["mean"] - i["low"]) * scale if i["low"] is not None else 0 for _, i in points],
        [(i["high"] - i["mean"]) * scale if i["high"] is not None else 0 for _, i in points],
    ]
    axis.errorbar(xs, means, yerr=errors, marker="o", capsize=3, **style)


def _pair_color(pair: str, index: int, plan: StudyPlan) -> str:
    """A pair against the baseline takes its treatment's colour; one between two other estimators
    (three or more in a study) a colour of its own, after the estimators' ones."""
    treatment, base = pair.split(" - ")
    return f"C{plan.estimators.index(treatment)}" if base == plan.baseline else f"C{len(plan.estimators) + index}"


def plot_noise_levels(report: Mapping[str, Any], plan: StudyPlan, path: Path) -> None:
    """Top: each estimator's final metric per noise level; bottom: paired differences against the
    baseline per level (when there is more than one estimator). Error bars: 95% CI over seeds."""
    plt = agg_pyplot()
    levels = [level.name for level in plan.levels]
    paired = report["comparisons"]["paired"]
    pairs = list(next(iter(paired.values()), {}))
    metrics = report.get("metrics") or STUDY_METRICS
    figure, axes = plt.subplots(
        2 if pairs else 1, len(metrics), figsize=(3.3 * len(metrics), 6 if pairs else 3.2), squeeze=False
    )
    offset = 0.08
    for c, metric in enumerate(metrics):
        factor = metric_scale(metric)
        top = axes[0][c]
        for e, estimator in enumerate(plan.estimators):
            shift = (e - (len(plan.estimators) - 1) / 2) * offset
            intervals = [report["cells"][level][estimator]["final"].get(metric) for level in levels]
            _errorbars(top, [i + shift for i in range(len(levels))], intervals, factor, label=estimator, color=f"C{e}")
        top.set_title(f"final {_title(metric)}", fontsize=9)
        if pairs:
            bottom = axes[1][c]
            for p, pair in enumerate(pairs):
                shift = (p - (len(pairs) - 1) / 2) * offset
                intervals = [paired[level][pair].get(metric) for level in levels]
                _errorbars(
                    bottom,
                    [i + shift for i in range(len(levels))],
                    intervals,
                    factor,
                    label=pair,
                    color=_pair_color(pair, p, plan),
                )
            bottom.axhline(0, color="black", lw=0.8)
            bottom.set_title(f"paired difference, {_title(metric)}", fontsize=9)
        for row in axes:
            row[c].set_xticks(range(len(levels)), [level.label for level in plan.levels], fontsize=8)
            row[c].grid(alpha=0.3)
    for row in axes:
        _legend(row, fontsize=8)
    figure.supxlabel("summary-reward noise", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def plot_study(report: Mapping[str, Any], plan: StudyPlan, out_dir: Path) -> list[Path]:
    """``curves.png``, ``training.png`` and ``noise_levels.png`` in ``out_dir``."""
    paths = [out_dir / "curves.png", out_dir / "training.png", out_dir / "noise_levels.png"]
    held_out = [("curves", m, metric_scale(m), f"held-out {_title(m)}") for m in report.get("metrics") or STUDY_METRICS]
    _grid(report, plan, held_out, paths[0], "RL steps done")
    training = [("training", key, 1.0, title) for key, title in TRAINING_TITLES.items()]
    training += [
        ("probe", m, metric_scale(m), f"probe set {_title(m)}") for m in ("r_tool", "sampled_r_tool", "success@0.7")
    ]
    _grid(report, plan, training, paths[1], "RL step")
    plot_noise_levels(report, plan, paths[2])
    return paths
