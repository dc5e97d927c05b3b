"""Side-by-side reports of training runs: a markdown table like the paper's and learning curves."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from slca_grpo.eval.slots import SLOT_KINDS
from slca_grpo.plotting import agg_pyplot
from slca_grpo.trainer.logger import read_metrics

TABLE_COLUMNS = (
    ("success@0.9", "Success@0.9", 100.0),
    ("success@0.7", "Success@0.7", 100.0),
    ("name_f1", "Name-F1", 100.0),
    ("arg_match", "ArgMatch", 100.0),
    ("process", "Process", 100.0),
    ("r_sum", "R_sum", 1.0),
    ("calls", "Calls/task", 1.0),
    ("redundant_calls", "Redundant/task", 1.0),
    ("generated_tokens", "Tokens/task", 1.0),
    ("truncated", "Truncated %", 100.0),  # held-out rollouts cut off by max_turns or the token budget
    ("train_truncated", "Truncated (train) %", 100.0),  # the run's rollout/truncated, mean over its steps
)
TRAIN_TRUNCATED = "rollout/truncated"
# The probe set's outcomes (training-distribution tasks no update trains on, evaluated greedily
# every train.probe_every RL steps, and sampled train.probe_samples times a task): the learning
# curve.
PROBE_METRICS = ("r_tool", "score", "success@0.7", "arg_match", "truncated", "sampled_r_tool", "sampled_success@0.7")
# The held-out tasks' sampled outcomes (train.eval_samples), reported where the runs sampled them.
HELD_OUT_SAMPLED = ("sampled_r_tool", "sampled_success@0.7", "sampled_arg_match")
# Labels and scales of the probe set's and the sampled evaluations' columns, beside TABLE_COLUMNS'.
EXTRA_COLUMNS = {
    "r_tool": ("R_tool", 1.0),
    "score": ("Score", 1.0),
    "sampled_r_tool": ("R_tool sampled", 1.0),
    "sampled_success@0.7": ("Success@0.7 sampled", 100.0),
    "sampled_arg_match": ("ArgMatch sampled", 100.0),
    "forced_answer": ("Forced answer %", 100.0),  # held-out episodes the loop asked for a final answer
    "repeat_calls": ("Repeats/task", 1.0),  # identical calls made again after their results came back
}
# Every reported metric's label and scale.
COLUMN_LABELS = {key: label for key, label, _ in TABLE_COLUMNS} | {k: label for k, (label, _) in EXTRA_COLUMNS.items()}
COLUMN_SCALES = {key: scale for key, _, scale in TABLE_COLUMNS} | {k: scale for k, (_, scale) in EXTRA_COLUMNS.items()}


COUNT_KEYS = frozenset({"calls", "redundant_calls", "generated_tokens", "r_sum"})


def train_truncation(metrics: Sequence[dict[str, Any]]) -> float | None:
    """The share of a run's training rollouts cut off before an answer: ``rollout/truncated``
    averaged over its steps (a resumed run's replayed steps count once, the last one kept)."""
    per_step = {
        int(row["step"]): float(row[TRAIN_TRUNCATED]) for row in metrics if row.get(TRAIN_TRUNCATED) is not None
    }
    return sum(per_step.values()) / len(per_step) if per_step else None


def _flat_eval_metrics(summary: dict[str, Any]) -> tuple[str, dict[str, float]]:
    """(kind, metric → value) of an evaluation run's summary.json (in-domain, BFCL or τ²)."""
    if summary.get("benchmark") == "tau2-bench":
        metrics = {f"tau2 pass^{k}": float(v) for k, v in sorted(summary.get("pass_hat_k", {}).items())}
        metrics["tau2 avg reward"] = float(summary.get("avg_reward", 0.0))
        return "tau2", metrics
    if "categories" in summary and "overall_accuracy" in summary:
        metrics = {f"bfcl {name}": float(score["accuracy"]) for name, score in summary["categories"].items()}
        metrics["bfcl overall"] = float(summary["overall_accuracy"])
        return "bfcl", metrics
    if "success@0.9" in summary:
        return "indomain", {key: float(summary[key]) for key, _, _ in TABLE_COLUMNS if key in summary}
    if isinstance(summary.get("benchmark"), str) and isinstance(summary.get("metrics"), dict):
        # Any other benchmark (e.g. a plugin's): {"benchmark": NAME, "metrics": {metric: value}}.
        name = summary["benchmark"]
        return name, {f"{name} {key}": float(value) for key, value in summary["metrics"].items()}
    raise ValueError(
        "summary.json is neither a training run, an in-domain, a BFCL, a τ² evaluation nor a "
        '{"benchmark": NAME, "metrics": {...}} one'
    )


def load_run(run_dir: str | Path) -> dict[str, Any]:
    """A run folder: a training run (summary, per-step metrics, evaluation history) or an
    evaluation run (its flat metrics)."""
    run_dir = Path(run_dir)
    summary_path = run_dir / "summary.json"
    if not summary_path.exists():
        raise FileNotFoundError(f"{run_dir} has no summary.json (is it a finished training or evaluation run?)")
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    if "final_eval" in summary:
        metrics_path = run_dir / "metrics.jsonl"
        metrics = read_metrics(metrics_path) if metrics_path.exists() else []
        return {
            "kind": "train",
            "name": summary.get("estimator", run_dir.name),
            "dir": str(run_dir),
            "summary": summary,
            "metrics": metrics,
        }
    try:
        kind, flat = _flat_eval_metrics(summary)
    except ValueError as exc:
        raise ValueError(f"{summary_path}: {exc}") from None
    name = f"{run_dir.name} ({summary['agent']})" if summary.get("agent") else run_dir.name
    return {"kind": kind, "name": name, "dir": str(run_dir), "summary": summary, "flat": flat}


def markdown_table(rows: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """One line per (name, eval summary); percentages for rates, plain numbers for counts."""
    header = "| Method | " + " | ".join(label for _, label, _ in TABLE_COLUMNS) + " |"
    rule = "|---|" + "---:|" * len(TABLE_COLUMNS)
    lines = [header, rule]
    for name, summary in rows:
        cells = []
        for key, _, scale in TABLE_COLUMNS:
            value = summary.get(key)
            cells.append("–" if value is None else (f"{value * scale:.2f}" if scale != 1.0 else f"{value:.3f}"))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def moving_average(values: Sequence[float], window: int | None = None) -> list[float]:
    """Trailing mean over ``window`` points (default: a fifteenth of the series), for noisy curves."""
    window = window or max(1, len(values) // 15)
    return [
        sum(values[max(0, i - window + 1) : i + 1]) / len(values[max(0, i - window + 1) : i + 1])
        for i in range(len(values))
    ]


def plot_curves(runs: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Training reward, probe-set R_tool, held-out Success@0.9 and held-out Name-F1 per step, one
    line per run."""
    plt = agg_pyplot()

    figure, (left, probe, middle, right) = plt.subplots(1, 4, figsize=(19, 4))
    for run in runs:
        probes = run["summary"].get("probes", [])
        if probes:
            done = [p["step"] + 1 for p in probes]
            (line,) = probe.plot(done, [p.get("r_tool", 0.0) for p in probes], marker="o", label=run["name"])
            sampled = [(d, p["sampled_r_tool"]) for d, p in zip(done, probes) if "sampled_r_tool" in p]
            if sampled:
                probe.plot(
                    *zip(*sampled), marker="x", linestyle="--", color=line.get_color(), label=f"{run['name']} sampled"
                )
        steps = [m["step"] for m in run["metrics"] if "reward/score" in m]
        scores = [m["reward/score"] for m in run["metrics"] if "reward/score" in m]
        if scores:
            left.plot(steps, moving_average(scores), label=run["name"])
        evals = run["summary"].get("evals", [])
        if evals:
            done = [e["step"] + 1 for e in evals]
            middle.plot(done, [100 * e.get("success@0.9", 0.0) for e in evals], marker="o", label=run["name"])
            right.plot(done, [100 * e.get("name_f1", 0.0) for e in evals], marker="o", label=run["name"])
    left.set(title="Training reward (HierR score, smoothed)", xlabel="RL step", ylabel="score")
    middle.set(title="Held-out Success@0.9", xlabel="RL steps done", ylabel="%")
    right.set(title="Held-out Name-F1", xlabel="RL steps done", ylabel="%")
    probe.set(title="Probe set R_tool (fixed tasks; greedy, sampled dashed)", xlabel="RL steps done", ylabel="R_tool")
    for axis in (left, probe, middle, right):
        axis.grid(alpha=0.3)
        if axis.get_legend_handles_labels()[0]:
            axis.legend()
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def compare_runs(run_dirs: Sequence[str | Path], out_dir: str | Path) -> dict[str, Any]:
    """Write ``report.json``, ``report.md`` and a chart comparing finished runs: training runs get
    the paper-style table and ``curves.png``; evaluation runs a table and ``comparison.png``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = [load_run(d) for d in run_dirs]
    if all(run["kind"] == "train" for run in runs):
        return _compare_training(runs, out_dir)
    if any(run["kind"] == "train" for run in runs):
        raise ValueError("compare training runs with training runs and evaluation runs with evaluation runs")
    return _compare_evaluations(runs, out_dir)


def _compare_evaluations(runs: Sequence[dict[str, Any]], out_dir: Path) -> dict[str, Any]:
    keys = list(dict.fromkeys(key for run in runs for key in run["flat"]))
    lines = ["# Evaluation comparison", "", "| Run | " + " | ".join(keys) + " |", "|---|" + "---:|" * len(keys)]
    for run in runs:
        cells = [
            f"{100 * run['flat'][k]:.2f}"
            if k in run["flat"] and k not in COUNT_KEYS
            else (f"{run['flat'][k]:.3f}" if k in run["flat"] else "–")
            for k in keys
        ]
        lines.append(f"| {run['name']} | " + " | ".join(cells) + " |")
    (out_dir / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = {"runs": [{"name": r["name"], "dir": r["dir"], "kind": r["kind"], "metrics": r["flat"]} for r in runs]}
    (out_dir / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")

    plt = agg_pyplot()

    rate_keys = [k for k in keys if k not in COUNT_KEYS]
    width = 0.8 / max(1, len(runs))
    figure, axis = plt.subplots(figsize=(max(6, 0.9 * len(rate_keys) * max(1, len(runs)) ** 0.5), 4))
    for index, run in enumerate(runs):
        positions = [i + index * width for i in range(len(rate_keys))]
        axis.bar(positions, [100 * run["flat"].get(k, 0.0) for k in rate_keys], width, label=run["name"])
    axis.set_xticks(
        [i + width * (len(runs) - 1) / 2 for i in range(len(rate_keys))], rate_keys, rotation=30, ha="right"
    )
    axis.set(ylabel="%", ylim=(0, 100))
    axis.legend()
    figure.tight_layout()
    figure.savefig(out_dir / "comparison.png", dpi=120)
    plt.close(figure)
    return report


def slot_table(rows: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
    """Markdown lines: argument accuracy (%) per slot kind (``slot/<kind>`` keys) per row; none if absent."""
    kinds = [kind for kind in SLOT_KINDS if any(f"slot/{kind}" in summary for _, summary in rows)]
    if not kinds:
        return []
    lines = [
        "",
        "Argument accuracy (%) by where the value comes from (docs/evaluation.md):",
        "",
        "| Method | " + " | ".join(kinds) + " |",
        "|---|" + "---:|" * len(kinds),
    ]
    for name, summary in rows:
        cells = [f"{100 * summary[f'slot/{k}']:.1f}" if f"slot/{k}" in summary else "–" for k in kinds]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def percent_label(label: str, scale: float) -> str:
    """A column label, marked as a percentage where its values are scaled to one (once)."""
    return label + " %" if scale == 100.0 and not label.endswith("%") else label


def metric_table(rows: Sequence[tuple[str, Mapping[str, Any]]], metrics: Sequence[str]) -> list[str]:
    """Markdown lines: a header of ``metrics``' labels, then one line per (name, record); rates as
    percentages, rewards with three decimals, "–" where a record lacks a metric."""
    lines = [
        "| Method | " + " | ".join(percent_label(COLUMN_LABELS[m], COLUMN_SCALES[m]) for m in metrics) + " |",
        "|---|" + "---:|" * len(metrics),
    ]
    for name, record in rows:
        values = [(record.get(m), COLUMN_SCALES[m]) for m in metrics]
        cells = ["–" if v is None else (f"{v * scale:.2f}" if scale != 1.0 else f"{v:.3f}") for v, scale in values]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def probe_table(runs: Sequence[dict[str, Any]]) -> list[str]:
    """Markdown lines: the probe set's metrics before RL and after each run's last step; none
    when the runs evaluated no probe set."""
    finals = [(run["name"], run["summary"].get("final_probe") or {}) for run in runs]
    start = next((p for run in runs for p in run["summary"].get("probes", []) if p.get("step") == -1), None)
    if not any(final for _, final in finals):
        return []
    size = next((p.get("n") for p in [start, *(f for _, f in finals)] if p and p.get("n")), "–")
    rows = ([("start (before RL)", start)] if start else []) + finals
    return [
        "",
        f"Probe set ({size} training-distribution tasks no update trains on, greedy; *sampled*: each task "
        "rolled out several times at the training temperature; the learning curve is in curves.png):",
        "",
        *metric_table(rows, PROBE_METRICS),
    ]


def held_out_sampled_table(rows: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
    """Markdown lines: each row's held-out outcomes sampled (``train.eval_samples``); none when no
    row has them."""
    if not any(HELD_OUT_SAMPLED[0] in summary for _, summary in rows):
        return []
    return [
        "",
        "Held-out, sampled (each task rolled out `train.eval_samples` times at the training temperature):",
        "",
        *metric_table(rows, HELD_OUT_SAMPLED),
    ]


def _compare_training(runs: Sequence[dict[str, Any]], out_dir: Path) -> dict[str, Any]:
    rows: list[tuple[str, dict[str, Any]]] = []
    if runs and runs[0]["summary"].get("evals"):
        rows.append(("start (before RL)", runs[0]["summary"]["evals"][0]))
    truncation = [train_truncation(run["metrics"]) for run in runs]
    rows += [
        (run["name"], {**run["summary"].get("final_eval", {}), "train_truncated": share})
        for run, share in zip(runs, truncation)
    ]
    report = {
        "runs": [
            {
                "name": run["name"],
                "dir": run["dir"],
                "final_eval": run["summary"].get("final_eval", {}),
                "final_probe": run["summary"].get("final_probe", {}),
                "train_truncated": share,
                "grad_norm_std": run["summary"].get("grad_norm_std"),
                "grad_norm_mean": run["summary"].get("grad_norm_mean"),
            }
            for run, share in zip(runs, truncation)
        ],
        "start_eval": rows[0][1] if rows and rows[0][0].startswith("start") else None,
        "start_probe": next((p for run in runs for p in run["summary"].get("probes", []) if p.get("step") == -1), None),
    }
    (out_dir / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    extra = ["", "| Method | grad-norm mean | grad-norm std |", "|---|---:|---:|"]
    extra += [
        f"| {r['name']} | {r['grad_norm_mean'] or 0:.4f} | {r['grad_norm_std'] or 0:.4f} |" for r in report["runs"]
    ]
    extra += held_out_sampled_table(rows)
    extra += slot_table(rows)
    extra += probe_table(runs)
    (out_dir / "report.md").write_text(
        "# Held-out evaluation\n\n" + markdown_table(rows) + "\n".join(extra) + "\n", encoding="utf-8"
    )
    plot_curves(runs, out_dir / "curves.png")
    return report
