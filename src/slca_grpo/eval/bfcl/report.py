"""Files of a BFCL run: per-entry JSON lines, a JSON summary, a markdown table and a bar chart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from slca_grpo.eval.bfcl.results import BFCLReport
from slca_grpo.plotting import agg_pyplot

PER_ITEM_FILE = "per_item.jsonl"
SUMMARY_FILE = "summary.json"
MARKDOWN_FILE = "report.md"
CHART_FILE = "accuracy.png"


def _json_default(value: Any) -> Any:
    return str(value)


def markdown_table(report: BFCLReport) -> str:
    """Accuracy per category and overall as a markdown table."""
    lines = [
        f"# BFCL results: {report.agent}",
        "",
        f"bfcl-eval {report.bfcl_eval_version}; "
        + (f"first {report.limit} entries per category" if report.limit is not None else "all entries")
        + "; overall = unweighted mean of the category accuracies.",
        "",
        "| category | accuracy (%) | correct | total |",
        "|---|---:|---:|---:|",
    ]
    for score in report.category_scores().values():
        lines.append(f"| {score.category} | {100 * score.accuracy:.2f} | {score.correct} | {score.total} |")
    lines.append(f"| **overall** | **{100 * report.overall_accuracy:.2f}** | | {len(report.results)} |")
    return "\n".join(lines) + "\n"


def write_chart(report: BFCLReport, path: Path) -> None:
    """A horizontal bar chart of the category accuracies."""
    plt = agg_pyplot()

    scores = list(report.category_scores().values())
    labels = [score.category for score in scores] + ["overall"]
    values = [100 * score.accuracy for score in scores] + [100 * report.overall_accuracy]
    figure, axes = plt.subplots(figsize=(8, 0.4 * len(labels) + 1.2))
    try:
        bars = axes.barh(labels, values, color=["tab:blue"] * len(scores) + ["tab:orange"])
        axes.invert_yaxis()
        axes.set_xlim(0, 105)
        axes.set_xlabel("accuracy (%)")
        axes.set_title(f"BFCL: {report.agent}")
        for bar, value in zip(bars, values, strict=True):
            axes.text(value + 1, bar.get_y() + bar.get_height() / 2, f"{value:.1f}", va="center", fontsize=8)
        figure.tight_layout()
        figure.savefig(path, dpi=120)
    finally:
        plt.close(figure)


def write_report(report: BFCLReport, out_dir: str | Path) -> dict[str, Path]:
    """Write all files of a run into ``out_dir``; their paths by kind."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "per_item": out / PER_ITEM_FILE,
        "summary": out / SUMMARY_FILE,
        "markdown": out / MARKDOWN_FILE,
        "chart": out / CHART_FILE,
    }
    with paths["per_item"].open("w", encoding="utf-8") as handle:
        for result in report.results:
            handle.write(json.dumps(result.to_dict(), ensure_ascii=False, default=_json_default) + "\n")
    paths["summary"].write_text(json.dumps(report.summary(), indent=2) + "\n", encoding="utf-8")
    paths["markdown"].write_text(markdown_table(report), encoding="utf-8")
    write_chart(report, paths["chart"])
    return paths
