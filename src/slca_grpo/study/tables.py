"""The study's ``report.md``: its tables, written from the numbers in ``report.json``.

Cell tables (final metrics, change from the start) have one row per noise level × estimator.
Comparison tables (paired differences, the effect of the noise, the interaction) have one row per
comparison and metric, with the mean difference, its bootstrap and t-intervals, the exact sign-flip
p-value, the Holm-adjusted p over the table, and the seeds won, lost and tied. Significance is
read off the exact test only: ``*`` p < 0.05, ``**`` also after the Holm correction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from slca_grpo.report import PROBE_METRICS, percent_label
from slca_grpo.study.metrics import (
    HELD_OUT_TRUNCATED,
    SIGNIFICANCE,
    STUDY_METRICS,
    TRAINING_TRUNCATED,
    metric_label,
    metric_scale,
)
from slca_grpo.study.outcomes import TRAINING_FORCED
from slca_grpo.study.plan import StudyPlan

__all__ = ["format_interval", "markdown_report", "significance_marker"]


def _number(value: float | None, scale: float, signed: bool = False) -> str:
    if value is None:
        return "–"
    digits = 1 if scale != 1.0 else 3
    return f"{value * scale:+.{digits}f}" if signed else f"{value * scale:.{digits}f}"


def _bounds(low: float | None, high: float | None, scale: float, signed: bool) -> str:
    return "–" if low is None else f"[{_number(low, scale, signed)}, {_number(high, scale, signed)}]"


def format_interval(interval: Mapping[str, Any] | None, scale: float = 1.0, *, signed: bool = False) -> str:
    """``45.2 [41.0, 49.3]`` (mean and bootstrap CI); ``(n=1)`` when one seed gives no interval."""
    if not interval:
        return "–"
    mean = _number(interval["mean"], scale, signed)
    if interval.get("low") is None:
        return f"{mean} (n=1)"
    return f"{mean} {_bounds(interval['low'], interval['high'], scale, signed)}"


def significance_marker(test: Mapping[str, Any] | None) -> str:
    """``*`` when the exact test's p is below 0.05, ``**`` when its Holm-adjusted p is too."""
    p = (test or {}).get("p")
    if p is None or p >= SIGNIFICANCE:
        return ""
    holm = test.get("holm_p")  # type: ignore[union-attr]
    return "**" if holm is not None and holm < SIGNIFICANCE else "*"


def wins_text(difference: Mapping[str, Any]) -> str:
    """``6/8`` seeds positive, with ties and the rest shown apart: ``5/8, 1 tied``."""
    text = f"{difference['wins']}/{difference['n']}"
    return f"{text}, {difference['ties']} tied" if difference.get("ties") else text


def _p(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.4f}" if value < 0.001 else f"{value:.3f}"


def _cell_table(
    title: str,
    rows: Sequence[tuple[str, Mapping[str, Any], Sequence[str]]],
    metrics: Sequence[str],
    *,
    signed: bool,
    note: str = "",
) -> list[str]:
    """Rows of (name, metric → interval, the two truncation cells); ``signed`` tables are
    differences, marked by their exact test."""
    extra_headers = ["Truncated %", "Truncated (train) %"]
    header = "| | " + " | ".join([*(metric_label(m) for m in metrics), *extra_headers]) + " |"
    lines = [f"### {title}", "", *([note, ""] if note else []), header]
    lines.append("|---|" + "---:|" * (len(metrics) + len(extra_headers)))
    for name, by_metric, extra in rows:
        cells = [
            format_interval(by_metric.get(m), metric_scale(m), signed=signed)
            + (significance_marker(by_metric.get(m)) if signed else "")
            for m in metrics
        ]
        lines.append(f"| {name} | " + " | ".join([*cells, *extra]) + " |")
    return lines + [""]


def _comparison_table(
    title: str,
    rows: Sequence[tuple[str, str, Mapping[str, Any]]],
    metrics: Sequence[str],
    *,
    note: str = "",
) -> list[str]:
    """One row per (comparison, metric): rows of (comparison, truncation text, metric → difference)."""
    lines = [
        f"### {title}",
        "",
        *([note, ""] if note else []),
        "| comparison | metric | mean | bootstrap 95% | t 95% | exact p | Holm p | seeds + | truncated (train) % |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for comparison, truncation, by_metric in rows:
        first = True
        for metric in metrics:
            difference = by_metric.get(metric)
            if not difference:
                continue
            scale = metric_scale(metric)
            lines.append(
                f"| {comparison if first else ''} | {metric_label(metric)} | "
                f"{_number(difference['mean'], scale, True)}{significance_marker(difference)} | "
                f"{_bounds(difference.get('low'), difference.get('high'), scale, True)} | "
                f"{_bounds(difference.get('t_low'), difference.get('t_high'), scale, True)} | "
                f"{_p(difference.get('p'))} | {_p(difference.get('holm_p'))} | {wins_text(difference)} | "
                f"{truncation if first else ''} |"
            )
            first = False
    return lines + [""]


def _comparison_rows(
    family: Mapping[str, Mapping[str, Mapping[str, Any]]], describe: Callable[[str, str], tuple[str, str]]
) -> list[tuple[str, str, Mapping[str, Any]]]:
    """Rows of a comparison table from one family of ``report.json``'s comparisons (outer key →
    comparison → metric → difference); ``describe(outer, comparison)`` gives (label, truncation)."""
    return [(*describe(outer, name), by_metric) for outer, pairs in family.items() for name, by_metric in pairs.items()]


def _truncation(cells: Mapping[str, Any], level: str, estimator: str) -> str:
    interval = cells.get(level, {}).get(estimator, {}).get(TRAINING_TRUNCATED)
    return _number(interval["mean"], 100.0) if interval else "–"


def _header(report: Mapping[str, Any], plan: StudyPlan, labels: Mapping[str, str]) -> list[str]:
    settings = report["settings"]
    lines = [
        "# Credit-assignment study",
        "",
        f"Preset `{settings['preset']}` · {settings['seeds']} seeds · {settings['steps']} RL steps × "
        f"{settings['prompts_per_step']} prompts × G = {settings['group_size']} · "
        f"held-out: {settings['eval_tasks']} tasks, greedy · "
        f"noise levels: {', '.join(labels.values())} · estimators: {', '.join(plan.estimators)}.",
        "",
    ]
    code = settings.get("code")
    if code:
        lines += [f"Code and environment of every run: {code}.", ""]
    threads = settings.get("threads")
    if threads and threads["differ"]:
        lines += [
            f"**The runs' thread settings differ**: {threads['text']}. A run's digits depend on them (how its "
            "sums are split), so paired differences hold that too.",
            "",
        ]
    elif threads:
        lines += [f"Threads of every run: {threads['text']}.", ""]
    sft_code = settings.get("sft_code")
    if sft_code and sft_code != code:
        lines += [f"The shared SFT start was made with: {sft_code}.", ""]
    lines += [
        "Mean [95% CI] over seeds (expanded percentile bootstrap of the mean, docs/study.md). Rates in %, R_sum "
        "on its 0–1 scale. Truncated: rollouts cut off by `max_turns` or the token budget before an answer (held "
        "out at the end; training: `rollout/truncated` over the run's steps). Differences are paired by seed. "
        "Significance comes from the exact sign-flip test only: `*` p < 0.05, `**` also after the Holm–Bonferroni "
        "correction over the table; a difference with a single `*` would not survive that correction. With n "
        "seeds the smallest possible exact p is 2/2ⁿ (0.0625 at 5 seeds, 0.0078 at 8).",
        "",
    ]
    return lines


def markdown_report(report: Mapping[str, Any], plan: StudyPlan) -> str:
    labels = {level.name: level.label for level in plan.levels}
    cells, compared = report["cells"], report["comparisons"]
    metrics = report.get("metrics") or STUDY_METRICS
    baseline = compared["baseline"]
    lines = _header(report, plan, labels)
    start = report.get("start_eval") or {}
    if start:
        shown = [*metrics, HELD_OUT_TRUNCATED]
        lines += [
            "Start (the SFT checkpoint, before RL): "
            + ", ".join(f"{metric_label(m)} {_number(start.get(m), metric_scale(m))}" for m in shown if m in start),
            "",
        ]
    lines += _primary_table(report)
    rows = [
        (
            f"{labels[level]} · {estimator}",
            cell["final"],
            [
                format_interval(cell["final"].get(HELD_OUT_TRUNCATED), 100.0),
                format_interval(cell.get(TRAINING_TRUNCATED), 100.0),
            ],
        )
        for level, by_est in cells.items()
        for estimator, cell in by_est.items()
    ]
    lines += _cell_table("Final held-out metrics", rows, metrics, signed=False)
    rows = [
        (
            f"{labels[level]} · {estimator}",
            cell["delta"],
            [
                format_interval(cell["delta"].get(HELD_OUT_TRUNCATED), 100.0, signed=True),
                format_interval(cell.get(TRAINING_TRUNCATED), 100.0),
            ],
        )
        for level, by_est in cells.items()
        for estimator, cell in by_est.items()
    ]
    lines += _cell_table(
        "Change from the start (final − SFT checkpoint)",
        rows,
        metrics,
        signed=True,
        note="Markers: the exact sign-flip test of the per-seed changes against 0 (Holm over this table). "
        "Truncated: the change of the held-out share, and the training share (as in the table above).",
    )
    lines += _endings_table(report, labels)
    lines += _bfcl_tables(report, labels)
    lines += _probe_tables(report, labels)
    reference = compared["reference_level"]

    def truncation(level: str, names: str) -> str:
        """``treatment / baseline`` training truncation of an ``"a - b"`` pair at ``level``."""
        return " / ".join(_truncation(cells, level, name) for name in names.split(" - "))

    def paired_row(level: str, pair: str) -> tuple[str, str]:
        return f"{labels[level]} · {pair.replace(' - ', ' − ')}", truncation(level, pair)

    def noise_row(estimator: str, levels: str) -> tuple[str, str]:
        level = levels.split(" - ")[0]
        trunc = f"{_truncation(cells, level, estimator)} / {_truncation(cells, reference, estimator)}"
        return f"{estimator} · {labels[level]} − {labels[reference]}", trunc

    def interaction_row(gap: str, levels: str) -> tuple[str, str]:
        level = levels.split(" - ")[0]
        trunc = "; ".join(truncation(at, gap) for at in (level, reference))
        return f"({gap.replace(' - ', ' − ')}) · {labels[level]} − {labels[reference]}", trunc

    rows = _comparison_rows(compared["paired"], paired_row)
    if rows:
        title = f"Paired difference against {baseline}" if len(plan.estimators) < 3 else "Paired differences"
        lines += _comparison_table(title, rows, metrics, note="Truncated: treatment / baseline.")
    rows = _comparison_rows(compared["noise_effect"], noise_row)
    if rows:
        lines += _comparison_table(
            "Effect of the noise (level − reference, same estimator)",
            rows,
            metrics,
            note="Negative: the estimator ends worse with noisy summary rewards than without. Truncated: level / "
            "reference.",
        )
    rows = _comparison_rows(compared["interaction"], interaction_row)
    if rows:
        lines += _comparison_table(
            "Interaction: how much the gap changes with noise",
            rows,
            metrics,
            note=f"(treatment − {baseline}) at a level minus the same at {labels[reference]}. Positive: noise widens "
            "the treatment's lead — what the paper's claim predicts for SLCA against GRPO. Truncated: treatment / "
            "baseline at the level; the same at the reference.",
        )
    lines += _diagnostics(cells, labels)
    seconds = report.get("seconds") or {}
    if seconds.get("runs"):
        lines += [
            f"Cost: SFT {seconds.get('sft') or 0:.0f} s; {seconds['runs']} RL runs timed, "
            f"{seconds['run_mean']:.0f} s each on average.",
            "",
        ]
    return "\n".join(lines)


def _primary_table(report: Mapping[str, Any]) -> list[str]:
    """The pre-registered primary family: each comparison's paired difference over seeds with its
    exact p and the Holm-adjusted p over the family, and the task-level permutation test beside it."""
    primary = report.get("primary")
    if not primary or not primary.get("tests"):
        return []
    metric = primary["metric"]
    scale = metric_scale(metric)
    lines = [
        f"### Primary outcome: held-out {metric_label(metric)}",
        "",
        "Named before the runs. Paired by seed: mean difference, bootstrap 95% interval, the exact sign-flip p over "
        "seeds and its Holm-adjusted p over the comparisons of this table (`**`: below 0.05 after Holm). Beside it, "
        "the task-level paired permutation test: per task, the seed mean of the difference, its signs flipped task "
        "by task; tasks up / down.",
        "",
        "| comparison | mean | bootstrap 95% | exact p | Holm p | seeds + | task-level p | tasks up / down |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for test in primary["tests"]:
        tasks = test.get("task_level") or {}
        lines.append(
            f"| {test['comparison'].replace(' - ', ' − ')} | {_number(test['mean'], scale, True)}"
            f"{significance_marker(test)} | {_bounds(test.get('low'), test.get('high'), scale, True)} | "
            f"{_p(test.get('p'))} | {_p(test.get('holm_p'))} | {wins_text(test)} | {_p(tasks.get('p'))} | "
            f"{tasks.get('tasks_up', '–')} / {tasks.get('tasks_down', '–')} |"
        )
    return lines + [""]


def _endings_table(report: Mapping[str, Any], labels: Mapping[str, str]) -> list[str]:
    """How the held-out episodes ended (cut off, forced to answer, repeated calls), at the end and
    changed from the start, with the training shares beside them."""
    endings = report.get("endings") or []
    if not endings:
        return []
    start = report.get("start_eval") or {}
    lines = [
        "### How episodes ended",
        "",
        "Held out, greedy: the share cut off before an answer, the share asked for a final answer by the loop "
        "(`rollout.answer_at_limit` / `answer_on_repeat`) and identical calls repeated per task; final, then the "
        "change from the start (markers: exact sign-flip test against 0, Holm over the changes of this table). "
        "Training: the shares over the run's rollouts. Start: "
        + ", ".join(f"{metric_label(m)} {_number(start.get(m), metric_scale(m))}" for m in endings if m in start)
        + ".",
        "",
        _family_header(endings, ["Truncated (train) %", "Forced (train) %"]),
        "|---|" + "---:|" * (2 * len(endings) + 2),
    ]
    for level, by_est in report["cells"].items():
        for estimator, cell in by_est.items():
            training = [
                format_interval(cell.get(TRAINING_TRUNCATED), 100.0),
                format_interval(cell.get(TRAINING_FORCED), 100.0),
            ]
            cells = [*_family_cells(cell["endings"], endings), *training]
            lines.append(f"| {labels[level]} · {estimator} | " + " | ".join(cells) + " |")
    return lines + [""]


def _family_header(metrics: Sequence[str], extra: Sequence[str] = ()) -> str:
    """The header of a family's table: each metric's final value, then its change, then ``extra``."""
    names = [*(metric_label(m) for m in metrics), *(f"Δ {metric_label(m)}" for m in metrics), *extra]
    return "| | " + " | ".join(names) + " |"


def _family_cells(family: Mapping[str, Any], metrics: Sequence[str]) -> list[str]:
    """A cell's final values of ``metrics``, then their changes from the start marked by the exact test."""
    final = [format_interval(family["final"].get(m), metric_scale(m)) for m in metrics]
    changes = family["delta"]
    delta = [
        format_interval(changes.get(m), metric_scale(m), signed=True) + significance_marker(changes.get(m))
        for m in metrics
    ]
    return [*final, *delta]


def _bfcl_tables(report: Mapping[str, Any], labels: Mapping[str, str]) -> list[str]:
    """BFCL accuracy of the start and each cell, the change from the start, and the paired
    differences between estimators (exact p, Holm over each table)."""
    bfcl = report.get("bfcl") or {}
    metrics = bfcl.get("metrics") or []
    if not metrics:
        return []
    start = bfcl.get("start") or {}
    lines = [
        "### BFCL",
        "",
        "Accuracy (%) with bfcl-eval's own checkers, greedy, the first entries of each category "
        "(`StudyBudget.bfcl_limit`); overall is the unweighted mean of the categories. Final [95% CI] and the "
        "change from the start (markers: exact sign-flip test against 0, Holm over the changes).",
        "",
        _family_header(metrics),
        "|---|" + "---:|" * (2 * len(metrics)),
        "| start | " + " | ".join([*(_number(start.get(m), 100.0) for m in metrics), *("" for _ in metrics)]) + " |",
    ]
    for level, by_est in report["cells"].items():
        for estimator, cell in by_est.items():
            cells = _family_cells(cell["bfcl"], metrics)
            lines.append(f"| {labels[level]} · {estimator} | " + " | ".join(cells) + " |")
    lines.append("")
    rows = [
        (f"{labels[level]} · {pair.replace(' - ', ' − ')}", "–", by_metric)
        for level, pairs in (bfcl.get("paired") or {}).items()
        for pair, by_metric in pairs.items()
    ]
    if rows:
        lines += _comparison_table("BFCL: paired differences", rows, metrics)
    return lines


def _probe_tables(report: Mapping[str, Any], labels: Mapping[str, str]) -> list[str]:
    """The learning curve on the probe set: R_tool per evaluated step (greedy, and sampled where
    the runs sampled it), and each probe metric's change from the start with its exact test (Holm
    over that table)."""
    cells, settings = report["cells"], report["settings"]
    names = [
        (f"{labels[level]} · {estimator}", cell)
        for level, by_est in cells.items()
        for estimator, cell in by_est.items()
    ]
    curves = {
        metric: [(name, cell.get("probe", {}).get(metric)) for name, cell in names]
        for metric in ("r_tool", "sampled_r_tool")
    }
    steps = sorted({step for _, curve in curves["r_tool"] if curve for step in curve["steps"]})
    if not steps:
        return []
    lines = [
        "### Probe set: the learning curve",
        "",
        f"{settings.get('probe_tasks') or '–'} training-distribution tasks that no update trains on "
        f"(`data.probe_tasks`), evaluated greedily every {settings.get('probe_every') or '–'} RL steps "
        "(`train.probe_every`) and, where the runs sampled them (`train.probe_samples`), each rolled out "
        "several times at the training temperature. R_tool, mean [95% CI] over seeds, by RL steps done:",
    ]
    for metric, title in (("r_tool", "greedy"), ("sampled_r_tool", "sampled")):
        if not any(curve for _, curve in curves[metric]):
            continue
        lines += [
            "",
            f"| {title} | " + " | ".join(f"step {step}" for step in steps) + " |",
            "|---|" + "---:|" * len(steps),
        ]
        for name, curve in curves[metric]:
            by_step = dict(zip(curve["steps"], zip(curve["mean"], curve["low"], curve["high"]))) if curve else {}
            cells_text = [
                format_interval(dict(zip(("mean", "low", "high"), by_step[step]))) if step in by_step else "–"
                for step in steps
            ]
            lines.append(f"| {name} | " + " | ".join(cells_text) + " |")
    lines += [
        "",
        "Change on the probe set from the start to the last evaluation (markers: the exact sign-flip test against "
        "0, Holm over this table):",
        "",
        "| | " + " | ".join(percent_label(metric_label(m), metric_scale(m)) for m in PROBE_METRICS) + " |",
        "|---|" + "---:|" * len(PROBE_METRICS),
    ]
    for name, cell in names:
        delta = cell.get("probe_delta", {})
        cells_text = [
            format_interval(delta.get(m), metric_scale(m), signed=True) + significance_marker(delta.get(m))
            for m in PROBE_METRICS
        ]
        lines.append(f"| {name} | " + " | ".join(cells_text) + " |")
    return lines + [""]


def _diagnostics(cells: Mapping[str, Any], labels: Mapping[str, str]) -> list[str]:
    lines = [
        "### Training diagnostics",
        "",
        "| | grad cosine tool·summary | noise: mean shift of R_sum | std of the shift | % replaced | "
        "truncated (train) % |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for level, by_est in cells.items():
        for estimator, cell in by_est.items():
            noise = cell["noise"]
            lines.append(
                f"| {labels[level]} · {estimator} | {format_interval(cell['grad_cosine'], signed=True)} | "
                f"{_number(noise.get('mean'), 1.0, signed=True)} | {_number(noise.get('std'), 1.0)} | "
                f"{_number(noise.get('replaced_rate'), 100.0)} | "
                f"{format_interval(cell.get(TRAINING_TRUNCATED), 100.0)} |"
            )
    return lines + [
        "",
        "Charts: `curves.png` (held-out metrics per step, band = 95% CI over seeds), `training.png` (training "
        "R_tool and R_sum — the clean ones — the share of truncated rollouts and the gradient cosine per step, "
        "and the probe set's R_tool, greedy and sampled, and Success@0.7 per evaluated step), "
        "`noise_levels.png` (final metrics and paired differences against the noise level).",
        "",
    ]
