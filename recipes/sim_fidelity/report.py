"""report.md and report.json of a fidelity run: the sim-to-real table, then per tool and per sequence kind."""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from recipes.sim_fidelity.metrics import CONSISTENCY_CHECKS, OVERALL, Mean, Tally

Row = tuple[str, Callable[[Tally, str], str]]


def pct(mean: Mean) -> str:
    """``87.5 % (120)``: a rate with its count; ``–`` when nothing was measured."""
    return "–" if mean.value is None else f"{100 * mean.value:.1f} % ({mean.n})"


def num(mean: Mean, digits: int = 3) -> str:
    return "–" if mean.value is None else f"{mean.value:.{digits}f} ({mean.n})"


def bare(mean: Mean, digits: int = 3) -> str:
    """The value alone, for table cells whose count is in another column."""
    return "–" if mean.value is None else f"{mean.value:.{digits}f}"


def _ratio(numerator: float, denominator: float) -> Mean:
    """A rate of two counts as a Mean, so it prints like the others."""
    return Mean(numerator, int(denominator)) if denominator else Mean()


def error_recall(tally: Tally, group: str = OVERALL) -> Mean:
    """Real errors that SGLS also raised."""
    both, real_only = tally.get("err_both", group).total, tally.get("err_real_only", group).total
    return _ratio(both, both + real_only)


def error_precision(tally: Tally, group: str = OVERALL) -> Mean:
    """SGLS errors that the real tool also raised."""
    both, sim_only = tally.get("err_both", group).total, tally.get("err_sim_only", group).total
    return _ratio(both, both + sim_only)


def _metric(name: str, render: Callable[[Mean], str] = pct) -> Callable[[Tally, str], str]:
    return lambda tally, group: render(tally.get(name, group))


SUMMARY_ROWS: list[Row] = [
    ("response schema validity, real", _metric("valid_real")),
    ("response schema validity, SGLS", _metric("valid_sim")),
    ("same JSON shape", _metric("shape")),
    ("field-set agreement (mean Jaccard)", _metric("fields", num)),
    ("field sets identical", _metric("fields_exact")),
    ("values: echoed arguments", _metric("echo")),
    ("values: status after a write", _metric("status")),
    ("value formats, all string fields", _metric("format")),
    ("value formats, id fields", _metric("format_id")),
    ("error agreement", _metric("error_agree")),
    ("real errors SGLS also raised", lambda t, g: pct(error_recall(t, g))),
    ("SGLS errors the real tool also raised", lambda t, g: pct(error_precision(t, g))),
]
for _check in CONSISTENCY_CHECKS:
    for _side, _label in (("real", "real"), ("sim", "SGLS")):
        SUMMARY_ROWS.append((f"state: {_check.replace('_', ' ')}, {_label}", _metric(f"state:{_check}:{_side}")))
REWARD_ROWS: list[Row] = [
    ("R_tool, real", _metric("r_tool_real", num)),
    ("R_tool, SGLS", _metric("r_tool_sim", num)),
    ("R_tool equal", _metric("r_tool_equal")),
    ("mean abs(R_tool real − SGLS)", _metric("r_tool_abs_diff", num)),
    ("judge rating, real", _metric("rating_real", lambda m: num(m, 2))),
    ("judge rating, SGLS", _metric("rating_sim", lambda m: num(m, 2))),
    ("judge rating equal", _metric("rating_equal")),
    ("mean abs(rating real − SGLS)", _metric("rating_abs_diff", lambda m: num(m, 2))),
    ("mean abs(HierR real − SGLS)", _metric("score_abs_diff", num)),
]


def summary_table(results: dict[str, Any]) -> str:
    """The sim-to-real table: one row per metric, one column per domain (rate and n)."""
    domains = list(results)
    lines = ["| metric | " + " | ".join(domains) + " |", "|---|" + "---:|" * len(domains)]
    lines.append(
        "| sequences compared (not compared: SGLS failed) | "
        + " | ".join(f"{results[d].compared_sequences} ({results[d].void_sequences})" for d in domains)
        + " |"
    )
    for label, render in SUMMARY_ROWS:
        lines.append(f"| {label} | " + " | ".join(render(results[d].by_tool, OVERALL) for d in domains) + " |")
    for label, render in REWARD_ROWS:
        lines.append(f"| {label} | " + " | ".join(render(results[d].by_kind, OVERALL) for d in domains) + " |")
    return "\n".join(lines)


def tool_table(tally: Tally) -> str:
    columns: list[tuple[str, Callable[[Tally, str], str]]] = [
        ("calls", lambda t, g: str(t.get("error_agree", g).n)),
        ("valid SGLS", _metric("valid_sim")),
        ("shape", _metric("shape")),
        ("fields J", _metric("fields", lambda m: bare(m, 2))),
        ("echo", _metric("echo")),
        ("status", _metric("status")),
        ("formats", _metric("format")),
        ("errors agree", _metric("error_agree")),
        ("real err", lambda t, g: f"{t.get('err_both', g).total + t.get('err_real_only', g).total:.0f}"),
        ("SGLS err", lambda t, g: f"{t.get('err_both', g).total + t.get('err_sim_only', g).total:.0f}"),
    ]
    return _grid(tally, "tool", columns, [g for g in tally.groups() if tally.get("error_agree", g).n])


def kind_table(tally: Tally) -> str:
    columns: list[tuple[str, Callable[[Tally, str], str]]] = [
        ("calls", lambda t, g: str(t.get("error_agree", g).n)),
        ("errors agree", _metric("error_agree")),
        ("both err", lambda t, g: f"{t.get('err_both', g).total:.0f}"),
        ("real only", lambda t, g: f"{t.get('err_real_only', g).total:.0f}"),
        ("SGLS only", lambda t, g: f"{t.get('err_sim_only', g).total:.0f}"),
        ("R_tool real", _metric("r_tool_real", bare)),
        ("R_tool SGLS", _metric("r_tool_sim", bare)),
        ("R_tool equal", _metric("r_tool_equal")),
        ("rating equal", _metric("rating_equal")),
    ]
    return _grid(tally, "sequences", columns, [g for g in tally.groups() if tally.get("error_agree", g).n])


def _grid(tally: Tally, first: str, columns: list[tuple[str, Any]], groups: list[str]) -> str:
    lines = [f"| {first} | " + " | ".join(c[0] for c in columns) + " |", "|---|" + "---:|" * len(columns)]
    for group in [*groups, OVERALL]:
        lines.append(f"| {group} | " + " | ".join(render(tally, group) for _, render in columns) + " |")
    return "\n".join(lines)


def environment_line() -> str:
    return f"Python {platform.python_version()}, {platform.machine()}, {platform.system()}"


def void_line(result: Any) -> str:
    """How many sequences were left out because the simulator itself failed, and how."""
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(result.simulator_faults.items()))
    return (
        f"**{result.void_sequences} of {result.sequences} sequences not compared**: SGLS itself failed in them "
        f"({kinds} calls; first: {result.fault_example!r}). Rates above are over the other "
        f"{result.compared_sequences}."
    )


def write_report(out: Path, settings: Any, results: dict[str, Any], wall_s: float) -> None:
    simulator = settings.simulator
    backend = simulator.backend if simulator.backend != "openai" else f"openai ({simulator.openai.model})"
    kinds = ", ".join(settings.perturbations) or "none"
    header = [
        "# SGLS fidelity: simulator vs τ²'s real tools",
        "",
        f"Domains {', '.join(results)}; split {settings.split}; "
        f"{'first ' + str(settings.limit) + ' tasks' if settings.limit else 'all tasks'}; seed {settings.seed}; "
        f"SGLS backend {backend}, {'with' if settings.with_returns else 'without'} τ²'s return schemas; "
        f"judge {settings.judge}; perturbations: {kinds}.",
        f"Wall time {wall_s:.1f} s; {environment_line()}; {time.strftime('%Y-%m-%d %H:%M:%S')}.",
        "",
        "Rates are over the calls (or rollouts, checks) where the metric applies; the count is in",
        'brackets. Definitions: recipes/sim_fidelity/README.md, section "What is measured".',
        "",
        "## Sim-to-real table",
        "",
        summary_table(results),
    ]
    for domain, result in results.items():
        header += [
            "",
            f"## {domain}: {result.tasks} tasks, {result.sequences} sequences, {result.calls} calls "
            f"({result.wall_s:.1f} s)",
            "",
            "### Per tool",
            "",
            tool_table(result.by_tool),
            "",
            "### Per sequence kind (errors, and HierR of the rollouts)",
            "",
            kind_table(result.by_kind),
        ]
        if result.skipped_tasks:
            header += ["", f"Tasks without gold actions, not replayed: {', '.join(result.skipped_tasks)}."]
        if result.void_sequences:
            header += ["", void_line(result)]
    (out / "report.md").write_text("\n".join(header) + "\n", encoding="utf-8")
    payload = {
        "settings": settings.to_dict(),
        "wall_s": round(wall_s, 2),
        "environment": environment_line(),
        "domains": {domain: result.to_dict() for domain, result in results.items()},
    }
    (out / "report.json").write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
