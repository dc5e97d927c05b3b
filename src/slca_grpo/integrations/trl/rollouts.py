"""TRL's ``rollout_func`` running our agent loop: each row's own task and tools, SGLS answering.

TRL's own tool loop offers one fixed set of Python functions to every prompt of a run (or one per
environment class); our tasks each carry their own JSON-schema tools, so the rollouts go through
our agent loop instead, with TRL's policy: the task's prompt rendered in our chat format (Hermes
or the model's own template), calls parsed by our parser, answered by the simulator after the
task's fixtures, tool results injected as tokens the loss never sees (TRL's ``env_mask``), up to
``max_turns`` assistant turns. What TRL gets back per row is token-exact: the prompt's ids, the
response's ids (sampled and injected), each sampled token's log-probability, and the mask.

The rows come from :class:`~slca_grpo.integrations.trl.trainer.SLCATrainer`, which keeps the batch
it is scoring (TRL passes a rollout function the prompts only); TRL's rows arrive as runs of
``num_generations`` copies of one task, which the loop rolls out as one group (its prompt
prefilled once).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from slca_grpo.chat.formatter import ChatFormatter
from slca_grpo.datatypes import Task, Trajectory
from slca_grpo.integrations.trl.data import task_of_row
from slca_grpo.integrations.trl.rewards import (
    ANSWERED_FIELD,
    ENDING_FIELDS,
    RESPONSE_TEXT_FIELD,
    SIMULATOR_FAULT_FIELD,
    TURN_TEXTS_FIELD,
)
from slca_grpo.rollout.environment import ToolEnvironment
from slca_grpo.rollout.loop import AgentLoop, RolloutConfig
from slca_grpo.simulator.config import SimulatorConfig, SimulatorServiceConfig
from slca_grpo.simulator.errors import simulator_fault
from slca_grpo.trainer.batch import ends_with_answer
from slca_grpo.trainer.build import simulator_from

__all__ = ["AgentLoopRollouts", "group_runs", "rollout_fields"]


def group_runs(tasks: Sequence[Task]) -> int:
    """The length of the runs of one task that ``tasks`` is made of (TRL's ``num_generations``), or
    1 when the rows are not such runs (then every row is rolled out on its own)."""
    if not tasks:
        return 1
    size = 1
    while size < len(tasks) and tasks[size] is tasks[0]:
        size += 1
    if len(tasks) % size:
        return 1
    for start in range(0, len(tasks), size):
        run = tasks[start : start + size]
        if any(task is not run[0] for task in run):
            return 1
    return size


def rollout_fields(trajectories: Sequence[Trajectory]) -> dict[str, list[Any]]:
    """What TRL's ``rollout_func`` returns for ``trajectories``: its three keys, the ``env_mask``
    (1 on sampled tokens, 0 on injected ones) and our fields for the rewards and the trainer."""
    return {
        "prompt_ids": [list(t.prompt_ids) for t in trajectories],
        "completion_ids": [list(t.response_ids) for t in trajectories],
        "logprobs": [list(t.logprobs) for t in trajectories],
        "env_mask": [list(t.response_mask) for t in trajectories],
        RESPONSE_TEXT_FIELD: [t.response_text for t in trajectories],
        TURN_TEXTS_FIELD: [[turn.text for turn in t.turns] for t in trajectories],
        SIMULATOR_FAULT_FIELD: [simulator_fault(t.turns) or "" for t in trajectories],
        ANSWERED_FIELD: [ends_with_answer(t) for t in trajectories],
        ENDING_FIELDS["truncated"]: [bool(t.truncated) for t in trajectories],
        ENDING_FIELDS["forced_answer"]: [bool(t.counters.get("forced_answer", 0)) for t in trajectories],
        ENDING_FIELDS["repeat_calls"]: [int(t.counters.get("repeat_calls", 0)) for t in trajectories],
    }


class AgentLoopRollouts:
    """TRL's ``rollout_func``: ``rollouts(prompts, trainer)`` rolls out the trainer's current rows.

    ``rollout``: our rollout settings (turns, token budgets, parallel calls); its sampling settings
    and ``max_response_tokens`` are taken from the trainer's ``GRPOConfig`` (``temperature``,
    ``top_p``, ``top_k``, ``max_completion_length``) when the trainer is TRL's. ``environment``:
    the tool environment (default: the in-process simulator of ``simulator``, or a client of a
    ``slca serve-sim`` service when ``service.url`` is set). ``formatter``: set by the trainer from
    its tokenizer and chat format.
    """

    def __init__(
        self,
        *,
        rollout: RolloutConfig | None = None,
        environment: ToolEnvironment | None = None,
        simulator: SimulatorConfig | None = None,
        service: SimulatorServiceConfig | None = None,
        use_fixtures: bool = True,
    ):
        self.rollout = rollout or RolloutConfig()
        if environment is None:
            environment = ToolEnvironment(
                simulator_from(simulator or SimulatorConfig(), service or SimulatorServiceConfig()),
                use_fixtures=use_fixtures,
            )
        self.environment = environment
        self.formatter: ChatFormatter | None = None
        self.calls = 0

    def settings_from(self, args: Any) -> RolloutConfig:
        """Our rollout settings (turns, budgets, forced answers) with TRL's sampling settings and
        completion budget."""
        return dataclasses.replace(
            self.rollout,
            max_response_tokens=int(getattr(args, "max_completion_length", None) or self.rollout.max_response_tokens),
            temperature=float(getattr(args, "temperature", self.rollout.temperature)),
            top_p=float(getattr(args, "top_p", self.rollout.top_p)),
            top_k=int(getattr(args, "top_k", None) or 0),
        )

    def run(
        self, model: torch.nn.Module, tasks: Sequence[Task], *, settings: RolloutConfig, seed: int
    ) -> list[Trajectory]:
        """Trajectories of ``tasks`` (one per row, in order) under ``settings``."""
        if self.formatter is None:
            raise RuntimeError("AgentLoopRollouts has no chat formatter; SLCATrainer sets it from its tokenizer")
        size = group_runs(tasks)
        loop = AgentLoop(model, self.formatter, self.environment, settings)
        generator = torch.Generator().manual_seed(seed)
        return loop.run(
            list(tasks[::size]), group_size=size, generator=generator, session_prefix=f"trl{seed}-{self.calls}"
        )

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list[Any]]:
        rows = getattr(trainer, "slca_rows", None)
        if rows is None:
            raise RuntimeError(
                "AgentLoopRollouts reads each row's task from the trainer; use it through "
                "slca_grpo.integrations.trl.SLCATrainer (TRL's GRPOTrainer passes a rollout function the prompts only)"
            )
        if len(rows) != len(prompts):
            raise RuntimeError(f"the trainer holds {len(rows)} rows for {len(prompts)} prompts")
        tasks = [task_of_row(row, index) for index, row in enumerate(rows)]
        model = trainer.accelerator.unwrap_model(trainer.model)
        process = int(getattr(trainer.accelerator, "process_index", 0))
        seed = int(trainer.args.seed) * 1_000_003 + int(trainer.state.global_step) * 1_009 + self.calls * 101 + process
        trajectories = self.run(model, tasks, settings=self.settings_from(trainer.args), seed=seed)
        self.calls += 1
        return rollout_fields(trajectories)
