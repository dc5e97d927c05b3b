"""Files every evaluation writes: per-item JSONL, summary JSON, a markdown table and a bar chart."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slca_grpo.plotting import agg_pyplot


def write_eval_report(
    out_dir: str | Path,
    items: Sequence[dict[str, Any]],
    summary: dict[str, Any],
    *,
    title: str,
    chart_keys: Sequence[str],
) -> None:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "per_item.jsonl").write_text("".join(json.dumps(i, default=str) + "\n" for i in items), encoding="utf-8")
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")
    rows = [("all", summary)] + sorted(summary.get("by_kind", {}).items())
    keys = [k for k in chart_keys if k in summary]
    lines = [f"# {title}", "", "| subset | n | " + " | ".join(keys) + " |", "|---|---:|" + "---:|" * len(keys)]
    for name, values in rows:
        lines.append(
            f"| {name} | {values.get('n', '')} | " + " | ".join(f"{100 * values.get(k, 0.0):.2f}" for k in keys) + " |"
        )
    if "answered_freely" in summary:
        lines += [
            "",
            "How episodes ended: answered on their own, asked for a final answer by the loop (at its turn limit or",
            "on a repeated call), or cut off by a limit with no answer (a forced turn that calls again is both):",
            "",
            "| subset | n | answered on its own % | asked to answer % | cut off % | turns | calls | repeated calls |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {name} | {values.get('n', '')} | {100 * values.get('answered_freely', 0.0):.1f} | "
            f"{100 * values.get('forced_answer', 0.0):.1f} | {100 * values.get('truncated', 0.0):.1f} | "
            f"{values.get('turns', 0.0):.2f} | {values.get('calls', 0.0):.2f} | {values.get('repeat_calls', 0.0):.2f} |"
            for name, values in rows
        ]
    slots = summary.get("slots") or {}
    if slots:
        lines += [
            "",
            "Argument accuracy by where the value comes from (see slca_grpo.eval.slots):",
            "",
            "| slot kind | slots | correct | % |",
            "|---|---:|---:|---:|",
        ]
        lines += [f"| {kind} | {c['n']} | {c['correct']} | {100 * c['accuracy']:.1f} |" for kind, c in slots.items()]
    (out_dir / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")

    plt = agg_pyplot()
    figure, axis = plt.subplots(figsize=(max(5, 1.4 * len(keys)), 3.5))
    axis.bar(keys, [100 * summary.get(k, 0.0) for k in keys], color="#4C72B0")
    axis.set(ylabel="%", ylim=(0, 100), title=title)
    figure.tight_layout()
    figure.savefig(out_dir / "metrics.png", dpi=110)
    plt.close(figure)


# The key of an evaluation's summary.json that records its policy's requests (endpoint policies).
REQUESTS_KEY = "policy_requests"


def request_failures(agent: Any) -> dict[str, Any] | None:
    """``{"total", "failed", "first_error"}`` of an agent that counts its requests and their
    failures (an endpoint policy, :class:`OpenAIChatAgent`); None for any other agent."""
    total, failed = getattr(agent, "requests", None), getattr(agent, "failures", None)
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (total, failed)):
        return None
    return {"total": total, "failed": failed, "first_error": getattr(agent, "first_error", None)}


def check_request_failures(agent: Any, summary_file: str | os.PathLike[str] | None) -> str | None:
    """After an evaluation, what every ``slca eval`` command does about its policy's failed requests.

    An endpoint that answered errors, or something that is not a chat completion, leaves empty
    answers that score like a bad policy. So the counts go into ``summary_file`` (its
    ``policy_requests``), a line on stderr says how many requests failed and the first error, and
    when every request failed the one-line error to exit with is returned (None otherwise).
    """
    record = request_failures(agent)
    if record is None:
        return None
    if summary_file is not None:
        _record_in_summary(Path(summary_file), record)
    total, failed, first = record["total"], record["failed"], record["first_error"]
    name = getattr(agent, "name", "the policy")
    if total and failed == total:
        return (
            f"every request to {name} failed ({failed} of {total}); the first: {first}; its scores"
            + (f" in {Path(summary_file).parent}" if summary_file is not None else "")
            + " measure the failures, not the model"
        )
    if failed:
        print(
            f"warning: {failed} of {total} requests to {name} failed (scored as empty answers); the first: {first}",
            file=sys.stderr,
        )
    return None


def _record_in_summary(path: Path, record: dict[str, Any]) -> None:
    """Add ``record`` to the summary an evaluation wrote (left as it is when there is none)."""
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(summary, dict):
        summary[REQUESTS_KEY] = record
        path.write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")
