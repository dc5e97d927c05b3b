"""``run_fidelity``: replay τ² tasks' call sequences through the real tools and through SGLS, compare."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from recipes.sim_fidelity import metrics as M
from recipes.sim_fidelity.replay import RealDomain, StepOutcome, replay_real, replay_simulated
from recipes.sim_fidelity.report import write_report
from recipes.sim_fidelity.reward_fidelity import add_reward_metrics, hierr_task, score_rollouts
from recipes.sim_fidelity.sequences import PERTURBATIONS, CallSequence, gold_sequence, perturbed_sequences
from slca_grpo.data.tau2.gold import gold_actions
from slca_grpo.data.tau2.package import ensure_tau2
from slca_grpo.data.tau2.tasks import DEFAULT_SPLIT, check_domain, select_tasks
from slca_grpo.rewards.factory import make_judge
from slca_grpo.simulator.checks import compile_validator
from slca_grpo.simulator.config import SimulatorConfig
from slca_grpo.simulator.core import build_simulator
from slca_grpo.simulator.errors import SIMULATOR_FAULTS


@dataclass
class FidelitySettings:
    """What one ``python -m recipes.sim_fidelity`` run does (written into report.json)."""

    domains: tuple[str, ...] = ("airline",)
    limit: int | None = None
    split: str = DEFAULT_SPLIT
    seed: int = 0
    perturbations: tuple[str, ...] = PERTURBATIONS  # () for gold sequences only
    with_returns: bool = False  # give SGLS τ²'s return schemas too (agents' schemas lack them)
    judge: str = "rule"
    simulator: SimulatorConfig = field(default_factory=lambda: SimulatorConfig(max_observation_tokens=None))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["simulator"] = self.simulator.to_dict()  # masks an API key
        return data


@dataclass
class DomainResult:
    """One domain's comparisons: per-tool and per-sequence-kind tallies and what was replayed."""

    domain: str
    by_tool: M.Tally
    by_kind: M.Tally
    tasks: int = 0
    sequences: int = 0
    calls: int = 0
    skipped_tasks: list[str] = field(default_factory=list)  # tasks without gold actions
    wall_s: float = 0.0
    details: list[dict[str, Any]] = field(default_factory=list)
    # Sequences whose SGLS replay met a failure of the simulator itself (its backend failed, answered
    # junk or ran over budget): not compared, as training voids such rollouts, and counted here.
    void_sequences: int = 0
    simulator_faults: dict[str, int] = field(default_factory=dict)  # error kind -> calls
    fault_example: str = ""  # the first fault's message

    @property
    def compared_sequences(self) -> int:
        return self.sequences - self.void_sequences

    def to_dict(self) -> dict[str, Any]:
        return {
            "domain": self.domain,
            "tasks": self.tasks,
            "sequences": self.sequences,
            "calls": self.calls,
            "skipped_tasks": self.skipped_tasks,
            "void_sequences": self.void_sequences,
            "simulator_faults": self.simulator_faults,
            "fault_example": self.fault_example,
            "wall_s": round(self.wall_s, 2),
            "by_tool": self.by_tool.to_dict(),
            "by_kind": self.by_kind.to_dict(),
        }


def _validators(real: RealDomain) -> dict[str, Any]:
    out = {}
    for name, schema in real.returns.items():
        if schema is None:
            continue
        try:
            out[name] = compile_validator(schema, "returns")
        except Exception:  # a return schema jsonschema cannot use: validity is not measured for it
            continue
    return out


def _sequence_detail(
    sequence: CallSequence, real: Sequence[StepOutcome], sim: Sequence[StepOutcome], rewards: dict[str, Any]
) -> dict[str, Any]:
    return {
        "task_id": sequence.task_id,
        "kind": sequence.kind,
        "note": sequence.note,
        "calls": [
            {
                "name": s.name,
                "arguments": s.arguments,
                "requestor": s.requestor,
                "real": r.to_dict(),
                "sim": m.to_dict(),
            }
            for s, r, m in zip(sequence.steps, real, sim)
        ],
        "reward": rewards,
    }


def run_domain(
    domain: str, settings: FidelitySettings, simulator: Any, judge: Any, *, progress: bool = True
) -> DomainResult:
    started = time.perf_counter()
    real_domain = RealDomain(check_domain(domain))
    tasks = select_tasks(domain, settings.split, limit=settings.limit)
    validators = _validators(real_domain)
    sim_tools = real_domain.simulator_tools(settings.with_returns)
    writes = real_domain.catalog.writes
    result = DomainResult(domain, M.Tally(), M.Tally())
    for task in tqdm(tasks, desc=f"fidelity {domain}", unit="task", disable=not progress):
        gold = gold_sequence(str(task.id), gold_actions(task))
        if not gold.steps:
            result.skipped_tasks.append(str(task.id))
            continue
        result.tasks += 1
        sequences = [gold, *perturbed_sequences(gold, real_domain.catalog, settings.seed, settings.perturbations)]
        sim_runs = replay_simulated(simulator, sim_tools, sequences, f"fidelity/{domain}/{task.id}")
        view = hierr_task(task, real_domain.assistant_tools)
        read_only_env = None  # sequences without writes cannot change the database: they share one
        for sequence, sim in zip(sequences, sim_runs):
            if real_domain.writes_state(sequence):
                environment = real_domain.fresh_environment(task)
            else:
                read_only_env = read_only_env or real_domain.fresh_environment(task)
                environment = read_only_env
            real = replay_real(environment, sequence)
            result.sequences += 1
            result.calls += len(sequence.steps)
            faults = [outcome for outcome in sim if outcome.error_kind in SIMULATOR_FAULTS]
            if faults:
                result.void_sequences += 1
                for outcome in faults:
                    result.simulator_faults[outcome.error_kind] = result.simulator_faults.get(outcome.error_kind, 0) + 1
                result.fault_example = result.fault_example or faults[0].text[:300]
                result.details.append(_sequence_detail(sequence, real, sim, {"void": "simulator fault"}))
                continue
            _compare(sequence, real, sim, writes, validators, result)
            pair = score_rollouts(task, view, sequence, real, sim, judge)
            add_reward_metrics(pair, lambda metric, value, kind=sequence.kind: result.by_kind.add(metric, kind, value))
            result.details.append(_sequence_detail(sequence, real, sim, pair.to_dict()))
    result.wall_s = time.perf_counter() - started
    return result


def _compare(
    sequence: CallSequence,
    real: Sequence[StepOutcome],
    sim: Sequence[StepOutcome],
    writes: frozenset[str],
    validators: dict[str, Any],
    result: DomainResult,
) -> None:
    for step, real_outcome, sim_outcome in zip(sequence.steps, real, sim):

        def add(metric: str, value: float | bool, tool: str = step.name) -> None:
            result.by_tool.add(metric, tool, value)
            result.by_kind.add(metric, sequence.kind, value)

        M.compare_call(
            step, real_outcome, sim_outcome, is_write=step.name in writes, validator=validators.get(step.name), add=add
        )
    for side, outcomes in (("real", real), ("sim", sim)):
        for check in M.consistency_checks(sequence.steps, real, outcomes, writes):
            metric = f"state:{check.kind}:{side}"
            result.by_tool.add(metric, sequence.steps[check.read_index].name, check.passed)
            result.by_kind.add(metric, sequence.kind, check.passed)


def build_fidelity_simulator(config: SimulatorConfig) -> Any:
    """SGLS as the comparison needs it: no cache (a stale answer would hide a change), no injected
    errors, no truncation (answers are compared whole)."""
    config = copy.deepcopy(config)  # the caller's settings stay as given (report.json records them)
    config.cache_path = None
    config.max_observation_tokens = None
    for name in ("timeout_rate", "server_error_rate", "rate_limit_rate", "empty_result_rate"):
        setattr(config.errors, name, 0.0)
    config.validate()
    return build_simulator(config)


def run_fidelity(
    settings: FidelitySettings, out_dir: str | Path | None, *, progress: bool = True
) -> dict[str, DomainResult]:
    """Run every domain of ``settings``; write report.md, report.json and sequences.jsonl to ``out_dir``."""
    ensure_tau2()
    for domain in settings.domains:
        check_domain(domain)
    started = time.perf_counter()
    judge = make_judge(settings.judge)
    results: dict[str, DomainResult] = {}
    with build_fidelity_simulator(settings.simulator) as simulator:
        for domain in settings.domains:
            results[domain] = run_domain(domain, settings, simulator, judge, progress=progress)
    wall_s = time.perf_counter() - started
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        with (out / "sequences.jsonl").open("w", encoding="utf-8") as handle:
            for domain, result in results.items():
                for detail in result.details:
                    handle.write(json.dumps({"domain": domain, **detail}, ensure_ascii=False, default=str) + "\n")
        write_report(out, settings, results, wall_s)
    return results
