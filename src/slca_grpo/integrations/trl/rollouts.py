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

Refused, in one line each: GRPOConfig settings the loop would silently ignore (``min_p``,
``repetition_penalty``, ``generation_kwargs``, ``chat_template_kwargs``: our sampler takes
``temperature``, ``top_p`` and ``top_k`` only), when the trainer is built; and, before any token is
generated, a row whose prompt does not fit the model's context (``max_position_embeddings``),
named by its place in the batch and its task id.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from slca_grpo.chat.formatter import ChatFormatter
from slca_grpo.config import ConfigError
from slca_grpo.data.tasks import TaskFormatError
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

__all__ = [
    "UNAPPLIED_SETTINGS",
    "AgentLoopRollouts",
    "group_runs",
    "model_context",
    "rollout_fields",
    "unapplied_settings",
]

# GRPOConfig's generation settings our rollouts have no equivalent of (our sampler, SamplingConfig,
# takes temperature, top_p and top_k; prompts are rendered by our formatter), each with the values
# besides None (and an empty mapping) that leave it off.
UNAPPLIED_SETTINGS: dict[str, tuple[Any, ...]] = {
    "min_p": (0.0,),
    "repetition_penalty": (1.0,),
    "generation_kwargs": (),
    "chat_template_kwargs": (),
}


def unapplied_settings(args: Any) -> list[str]:
    """``name=value`` of each setting of :data:`UNAPPLIED_SETTINGS` that ``args`` turns on (one it
    lacks, None, or an empty mapping or text is off)."""
    found = []
    for name, off in UNAPPLIED_SETTINGS.items():
        value = getattr(args, name, None)
        if value is None or (isinstance(value, (Mapping, str, list, tuple)) and not value):
            continue
        if any(value == default for default in off):
            continue
        found.append(f"{name}={_shown(value, 60)}")
    return found


def _shown(value: Any, limit: int) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def model_context(model: Any) -> int | None:
    """The most positions ``model`` takes (its config's ``max_position_embeddings``, the text
    model's for a multimodal one), or None when its config does not say."""
    config = getattr(model, "config", None)
    text_config = getattr(config, "get_text_config", None)
    if callable(text_config):
        config = text_config()
    value = getattr(config, "max_position_embeddings", None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


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

    def check_args(self, args: Any) -> RolloutConfig:
        """Our rollout settings for TRL's ``args`` (:meth:`settings_from`); a ConfigError naming each
        generation setting of ``args`` the loop would not apply, or a sampling value it refuses."""
        unapplied = unapplied_settings(args)
        if unapplied:
            them = "it" if len(unapplied) == 1 else "them"
            raise ConfigError(
                f"{', '.join(unapplied)}: SLCATrainer's rollouts (our agent loop) would not apply {them}: our sampler "
                "takes temperature, top_p and top_k only, and prompts are rendered by chat_format= without "
                f"chat_template_kwargs; unset {them}, or pass a rollout_func of your own"
            )
        return self.settings_from(args)

    def check_prompts(self, model: Any, tasks: Sequence[Task]) -> None:
        """TaskFormatError naming the row and its task when a prompt of ``tasks`` (the batch's rows, in
        order) leaves no room in ``model``'s context to generate: nothing is generated for the batch.
        Each run of one task (a group) is rendered and tokenised once, so a huge prompt is refused in
        the time its tokenisation takes."""
        context = model_context(model)
        if context is None or self.formatter is None:
            return
        size = group_runs(tasks)
        for index in range(0, len(tasks), size):
            task = tasks[index]
            where = f"row {index} of the batch (task {_shown(task.id, 80)})"
            try:
                length = len(self.formatter.task_prompt_ids(task))
            except RecursionError:
                raise TaskFormatError(f"{where}: its messages or tools are nested too deeply to render") from None
            if length >= context:
                raise TaskFormatError(
                    f"{where}: its prompt is {length:,} tokens, and the model's context is {context:,} "
                    "(max_position_embeddings), which leaves no room to generate; shorten its messages or tools, "
                    "or leave the task out of the dataset"
                )

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
        self.check_prompts(model, tasks)  # before any token is generated
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
