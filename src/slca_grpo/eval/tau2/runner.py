"""Run any :class:`~slca_grpo.eval.agent.ChatAgent` through τ²-Bench and score it with τ²'s evaluator.

Each simulation is τ²'s own ``Orchestrator`` (agent ↔ user ↔ environment, its step and error
limits, its termination rules) with our agent behind :class:`ChatAgentAdapter`; the reward is τ²'s
``evaluate_simulation`` with ``EvaluationType.ALL``, as ``tau2 run`` computes it: DB hash after
replay, env assertions, gold actions and communicated strings, combined by the task's reward basis.
Nothing is written inside the τ² package; every output goes to ``out_dir``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from slca_grpo.data.tau2.package import ensure_tau2, import_tau2
from slca_grpo.data.tau2.tasks import DEFAULT_SPLIT, check_domain, select_tasks
from slca_grpo.eval.agent import AgentRequest, ChatAgent
from slca_grpo.eval.tau2.adapter import ChatAgentAdapter
from slca_grpo.eval.tau2.batching import AgentBatcher, respond_one
from slca_grpo.eval.tau2.records import SimulationRecord, make_record
from slca_grpo.eval.tau2.report import Tau2Report, write_report
from slca_grpo.eval.tau2.spec import (  # noqa: F401  (the defaults are part of this module's interface)
    DEFAULT_MAX_ERRORS,
    DEFAULT_MAX_STEPS,
    DEFAULT_SEED,
    USER_LLM_EXAMPLE,
    USER_LLM_FORMAT,
    RunSettings,
    UserLLMSpec,
    parse_user_llm,
)
from slca_grpo.eval.tau2.users import SCRIPTED, make_user


class UserLLMRequired(ValueError):
    """τ²'s user simulator is an LLM and none was given."""


MISSING_USER_MESSAGE = (
    "τ²-Bench's user simulator is an LLM and no endpoint was given: pass --user-llm "
    f"{USER_LLM_FORMAT} (any OpenAI-compatible server, e.g. {USER_LLM_EXAMPLE}), or --user scripted "
    "for an offline smoke run (scripted users do not give τ²-Bench scores)."
)


def resolve_user(user: str | UserLLMSpec | None) -> str | UserLLMSpec:
    """``"scripted"``, a parsed ``openai:BASE_URL#MODEL`` spec, or :class:`UserLLMRequired`."""
    if isinstance(user, UserLLMSpec):
        return user
    if user is None or not str(user).strip():
        raise UserLLMRequired(MISSING_USER_MESSAGE)
    if str(user).strip() == SCRIPTED:
        return SCRIPTED
    return parse_user_llm(str(user))


def trial_seeds(seed: int, trials: int) -> list[int]:
    """One seed per trial, the same sequence ``tau2 run`` draws (``random.seed(seed)``; ``randint``)."""
    rng = random.Random(seed)
    return [rng.randint(0, 1_000_000) for _ in range(trials)]


def run_simulation(
    domain: str,
    task: Any,
    trial: int,
    seed: int | None,
    responder: Callable[[AgentRequest], Any],
    user: str | UserLLMSpec,
    settings: RunSettings | None = None,
) -> tuple[SimulationRecord, Any | None]:
    """One τ² simulation, evaluated. Returns the record and τ²'s ``SimulationRun`` (``None`` when the
    simulation raised: the record then has reward 0 and the error)."""
    settings = settings or RunSettings()
    registry = import_tau2("tau2.registry").registry
    orchestrator_module = import_tau2("tau2.orchestrator.orchestrator")
    evaluator = import_tau2("tau2.evaluator.evaluator")
    environment = registry.get_env_constructor(domain)()
    agent = ChatAgentAdapter(
        environment.get_tools(),
        environment.get_policy(),
        responder,
        key=str(task.id),
        metadata={"benchmark": "tau2", "domain": domain, "task_id": str(task.id), "trial": trial},
    )
    orchestrator = orchestrator_module.Orchestrator(
        domain=domain,
        agent=agent,
        user=make_user(user, task, environment, settings.max_retries),
        environment=environment,
        task=task,
        max_steps=settings.max_steps,
        max_errors=settings.max_errors,
        seed=seed,
    )
    started = time.perf_counter()
    try:
        simulation = orchestrator.run()
    except Exception as exc:  # agent, user LLM or environment failure: a zero, not a crash
        return (
            make_record(
                task,
                trial,
                seed,
                None,
                agent.last_state,
                error=f"{type(exc).__name__}: {exc}",
                partial_messages=list(orchestrator.trajectory),
                duration_s=time.perf_counter() - started,
            ),
            None,
        )
    simulation.trial = trial
    error = None
    try:
        simulation.reward_info = evaluator.evaluate_simulation(
            simulation=simulation,
            task=task,
            evaluation_type=evaluator.EvaluationType.ALL,
            solo_mode=False,
            domain=domain,
        )
    except Exception as exc:  # e.g. a task whose basis needs an NL judge
        error = f"evaluation failed: {type(exc).__name__}: {exc}"
        reward_info_cls = import_tau2("tau2.data_model.simulation").RewardInfo
        simulation.reward_info = reward_info_cls(reward=0.0, info={"note": error})
    return make_record(task, trial, seed, simulation, agent.last_state, error=error), simulation


def run_tau2(
    agent: ChatAgent,
    domain: str,
    *,
    user: str | UserLLMSpec | None,
    out_dir: str | Path | None,
    task_ids: Sequence[str] | None = None,
    limit: int | None = None,
    split: str | None = DEFAULT_SPLIT,
    trials: int = 1,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_errors: int = DEFAULT_MAX_ERRORS,
    seed: int = DEFAULT_SEED,
    concurrency: int = 1,
    max_batch: int | None = None,
    progress: bool = True,
) -> Tau2Report:
    """Evaluate ``agent`` on a τ² domain: ``trials`` simulations per selected task.

    ``user`` is ``"scripted"`` (offline; not a benchmark score) or an ``openai:BASE_URL#MODEL`` spec for
    τ²'s LLM user. With ``concurrency > 1`` simulations run in threads and the agent answers their
    turns in batches of up to ``max_batch`` (default: ``concurrency``). Writes ``per_item.jsonl``,
    ``summary.json``, ``report.md``, ``pass_hat_k.png`` and ``tau2_results.json`` (τ²'s own results
    format) into ``out_dir`` when it is given.
    """
    ensure_tau2()
    check_domain(domain)
    resolved_user = resolve_user(user)
    for name, value in (("trials", trials), ("max_steps", max_steps), ("max_errors", max_errors)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    tasks = select_tasks(domain, split, task_ids, limit)
    settings = RunSettings(max_steps, max_errors, seed, concurrency, max_batch)
    seeds = trial_seeds(seed, trials)
    jobs = [(trial, index, task) for trial in range(trials) for index, task in enumerate(tasks)]
    results: dict[tuple[int, int], tuple[SimulationRecord, Any | None]] = {}
    bar = tqdm(total=len(jobs), desc=f"τ² {domain}", unit="sim", disable=not progress)
    batcher = AgentBatcher(agent, max_batch or concurrency) if concurrency > 1 else None

    def run_job(trial: int, index: int, task: Any) -> tuple[SimulationRecord, Any | None]:
        if batcher is None:
            return run_simulation(
                domain, task, trial, seeds[trial], lambda r: respond_one(agent, r), resolved_user, settings
            )
        with batcher.simulation():
            return run_simulation(domain, task, trial, seeds[trial], batcher.respond, resolved_user, settings)

    def finished(key: tuple[int, int], outcome: tuple[SimulationRecord, Any | None]) -> None:
        results[key] = outcome
        rewards = [r.reward for r, _ in results.values()]
        bar.update(1)
        bar.set_postfix(reward=f"{sum(rewards) / len(rewards):.3f}")

    try:
        with batcher if batcher is not None else nullcontext():
            if batcher is None:
                for trial, index, task in jobs:
                    finished((trial, index), run_job(trial, index, task))
            else:
                with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="tau2-sim") as pool:
                    futures = {pool.submit(run_job, *job): (job[0], job[1]) for job in jobs}
                    for future in as_completed(futures):
                        finished(futures[future], future.result())
    finally:
        bar.close()
    ordered = [results[(trial, index)] for index in range(len(tasks)) for trial in range(trials)]
    return write_report(
        out_dir,
        domain=domain,
        split=split,
        agent_name=str(getattr(agent, "name", type(agent).__name__)),
        user=resolved_user,
        tasks=tasks,
        outcomes=ordered,
        settings=settings,
        trials=trials,
    )
