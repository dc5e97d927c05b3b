"""``SLCATrainer``: TRL's ``GRPOTrainer`` with any of our estimators' per-token advantages.

TRL generates (here through our agent loop), computes the log-probabilities, the reference, the
loss and the optimiser step; the advantages come from one overridden method. After TRL has
built its generation batch, ``_generate_and_score_completions`` replaces TRL's one advantage per
completion by the estimator's ``[B, T]`` advantages, computed by the same
:class:`~slca_grpo.algos.Estimator` our trainer calls: segments from the completion's learnable
tokens (tool results masked by TRL's ``tool_mask``), each segment's reward group-normalised and
routed to its own tokens, void rollouts kept out of their groups' statistics and out of the loss.
TRL's loss takes ``[B, T]`` advantages as they are (it unsqueezes only 1-D ones).

TRL settings our estimators cannot feed are refused by name (:func:`check_supported`); TRL's
``scale_rewards`` becomes the estimator's ``norm_std``, and TRL's 1e-4 on the group std its
``eps``, unless ``advantage=`` says otherwise.

An optimiser step whose rollouts hold no learnable token (every one void) takes no optimiser and
no scheduler step, as our trainer skips such a step: without a gradient, Adam's momentum (and
weight decay) would still move every weight. ``_prepare_inputs`` counts each micro-batch's
learnable tokens, and ``create_scheduler`` (where TRL's loop has its final optimiser) gates the
optimiser's and the scheduler's ``step``. As our trainer logs one, a skipped step logs
``train/skipped`` 1 and a warning on stderr; ``SLCATrainer.skipped_steps`` counts them.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import types
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from trl import GRPOConfig, GRPOTrainer

from slca_grpo.algos import SEG_NONE, AdvantageConfig, estimator_spec, list_estimators
from slca_grpo.chat.chat_format import build_formatter
from slca_grpo.chat.native_format import ChatTemplateError
from slca_grpo.chat.parser import is_call_turn, last_turn_text
from slca_grpo.config import ConfigError, from_dict
from slca_grpo.engine import MIN_TEMPERATURE
from slca_grpo.integrations.trl.data import task_of_row
from slca_grpo.integrations.trl.rewards import (
    ANSWERED_FIELD,
    ENDING_FIELDS,
    RESPONSE_TEXT_FIELD,
    SIMULATOR_FAULT_FIELD,
    Scored,
    TaskRewards,
)
from slca_grpo.integrations.trl.rollouts import AgentLoopRollouts
from slca_grpo.plugins import load_plugins
from slca_grpo.rewards.config import RewardConfig
from slca_grpo.rewards.hierarchical import HIERR_NAMES
from slca_grpo.trainer.rl import describe_void, segment_advantage_stats

TRL_STD_EPS = 1e-4  # what TRL adds to a group's std before dividing

__all__ = ["TRL_STD_EPS", "SLCATrainer", "advantage_settings", "check_supported"]


def check_supported(args: GRPOConfig) -> None:
    """ConfigError naming the TRL setting when ``args`` asks for something per-token advantages
    from our estimators cannot feed, or that they would silently ignore."""
    temperature = args.temperature
    if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature > 0):
        raise ConfigError(
            f"temperature={temperature!r}: GRPO learns from the differences within a group of sampled rollouts "
            "(greedy rollouts of one prompt all tie, so every advantage is 0), and TRL divides the logits by the "
            f"temperature when it recomputes log-probabilities; use a temperature > 0 (our rollouts take at least "
            f"{MIN_TEMPERATURE})"
        )
    if args.importance_sampling_level != "token":
        raise ConfigError(
            f"importance_sampling_level={args.importance_sampling_level!r}: a sequence-level importance weight "
            "(GSPO) averages away the per-token advantages our estimators route to each segment; use 'token'"
        )
    if args.loss_type in ("luspo", "vespo"):
        raise ConfigError(
            f"loss_type={args.loss_type!r} weighs each completion by a sequence-level ratio, which per-token "
            "advantages cannot feed; use 'dapo', 'bnpo', 'grpo', 'dr_grpo', 'cispo' or 'sapo'"
        )
    if args.scale_rewards not in ("group", "none"):
        raise ConfigError(
            f"scale_rewards={args.scale_rewards!r}: our estimators normalise each reward within its rollout group; "
            "use 'group' (divide by the group's std) or 'none', or set norm_std in advantage="
        )
    if args.multi_objective_aggregation != "sum_then_normalize":
        raise ConfigError(
            f"multi_objective_aggregation={args.multi_objective_aggregation!r}: the estimator decides how its "
            "rewards combine; leave it at 'sum_then_normalize' (it then only sets the logged reward)"
        )


def advantage_settings(args: GRPOConfig, advantage: AdvantageConfig | Mapping[str, Any] | None) -> AdvantageConfig:
    """Our advantage settings for a TRL run: ``advantage`` as given, with ``norm_std`` from TRL's
    ``scale_rewards`` and ``eps`` TRL's 1e-4 where a mapping (or None) leaves them out."""
    if isinstance(advantage, AdvantageConfig):
        return advantage
    if advantage is not None and not isinstance(advantage, Mapping):
        shown = repr(advantage)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise ConfigError(
            f"advantage={shown} ({type(advantage).__name__}): advantage= takes our advantage settings, an "
            "AdvantageConfig or a mapping of its fields (e.g. {'lambda_tool': 0.5}); the estimator is chosen by "
            f"estimator=, one of {', '.join(list_estimators())}"
        )
    given = dict(advantage or {})
    config = from_dict(AdvantageConfig, given, prefix="advantage.")
    changes: dict[str, Any] = {}
    if "norm_std" not in given:
        changes["norm_std"] = args.scale_rewards != "none"
    if "eps" not in given:
        changes["eps"] = TRL_STD_EPS
    return dataclasses.replace(config, **changes)


def _answered(row: Mapping[str, Any]) -> bool:
    if ANSWERED_FIELD in row:
        return bool(row[ANSWERED_FIELD])
    text = row.get(RESPONSE_TEXT_FIELD)
    return not is_call_turn(last_turn_text(text)) if isinstance(text, str) else True


def _formatter(tokenizer: Any, chat_format: str, tool_parser: str, rollouts: AgentLoopRollouts):
    tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a processor's text tokenizer
    try:
        return build_formatter(
            tokenizer,
            chat_format=chat_format,
            tool_parser=tool_parser,
            max_tool_response_tokens=rollouts.rollout.max_tool_response_tokens,
        )
    except ChatTemplateError as exc:
        raise ConfigError(f"chat_format: {exc}") from None


class SLCATrainer(GRPOTrainer):
    """TRL's ``GRPOTrainer`` training with ``estimator``'s per-token advantages.

    Beyond ``GRPOTrainer``'s arguments: ``estimator`` (a registered name: ``grpo``, ``slca``,
    ``slca-turn``, ``slca-no-summary``, ``toolpo``, ``rltr``, or one a plugin registers);
    ``advantage`` (our advantage settings, :class:`~slca_grpo.algos.AdvantageConfig` or a mapping);
    ``reward_config`` (judge, weights, penalties); ``rewards`` (a :class:`TaskRewards` to score
    with, instead of one built from ``reward_config``); ``rollouts`` (an :class:`AgentLoopRollouts`:
    turns, tool-response budget, simulator); ``chat_format`` / ``tool_parser`` (as ``model.*`` in
    our configs); ``plugins`` (modules or files that register estimators or rewards, imported
    first). ``reward_funcs`` defaults to one TRL reward function per scalar reward computed (HierR's
    four and the estimator's), ``rollout_func`` to our agent loop. The dataset's rows must carry
    their task (:func:`~slca_grpo.integrations.trl.task_dataset`).
    """

    def __init__(
        self,
        model: Any,
        reward_funcs: Any = None,
        args: GRPOConfig | None = None,
        train_dataset: Any = None,
        eval_dataset: Any = None,
        processing_class: Any = None,
        *,
        estimator: str = "slca",
        advantage: AdvantageConfig | Mapping[str, Any] | None = None,
        reward_config: RewardConfig | None = None,
        rewards: TaskRewards | None = None,
        rollouts: AgentLoopRollouts | None = None,
        rollout_func: Any = None,
        chat_format: str = "auto",
        tool_parser: str = "auto",
        plugins: Sequence[str] = (),
        **kwargs: Any,
    ):
        if args is None:
            args = GRPOConfig(output_dir="trl-slca")
        check_supported(args)
        load_plugins(plugins)
        self.estimator = estimator_spec(estimator)
        self.advantage_config = advantage_settings(args, advantage)
        if rewards is None:  # void follows the rewards the estimator reads
            names = (*HIERR_NAMES, *self.estimator.rewards)
            rewards = TaskRewards(names, config=reward_config, trained=self.estimator.rewards)
        missing = [name for name in self.estimator.rewards if name not in rewards.names]
        if missing:
            raise ConfigError(
                f"estimator {self.estimator.name!r} reads {missing}, which rewards= does not compute "
                f"(it computes {list(rewards.names)})"
            )
        self.rewards = rewards
        if reward_funcs is None:
            reward_funcs = rewards.functions()
        uses_trl_tools = kwargs.get("tools") or kwargs.get("environment_factory")
        if rollout_func is None and not uses_trl_tools:
            rollout_func = rollouts or AgentLoopRollouts()
        if isinstance(rollout_func, AgentLoopRollouts):
            rollout_func.check_args(args)  # settings our loop would ignore, or our sampler refuses: now, by name
        if isinstance(rollout_func, AgentLoopRollouts) and processing_class is not None:
            # Before TRL's set-up, so a template that cannot express tools fails in a moment.
            rollout_func.formatter = _formatter(processing_class, chat_format, tool_parser, rollout_func)
        self.slca_rows: list[dict[str, Any]] | None = None  # the batch being rolled out (for the rollouts)
        self._slca_scored: Scored | None = None
        # Optimiser steps skipped for want of a learnable token, and the current step's count of them.
        self.skipped_steps = 0
        self._slca_window_tokens = 0
        self._slca_window_batches = 0
        self._slca_step_skipped = False
        self._slca_void_note = ""
        super().__init__(
            model=model,
            reward_funcs=reward_funcs,
            args=args,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=processing_class,
            rollout_func=rollout_func,
            **kwargs,
        )
        if isinstance(rollout_func, AgentLoopRollouts) and rollout_func.formatter is None:
            rollout_func.formatter = _formatter(self._tokenizer, chat_format, tool_parser, rollout_func)
        if args.reward_weights is None and "score" in self.reward_func_names:
            # TRL logs the weighted sum of its reward functions as "reward": make that HierR's score.
            weights = [1.0 if name == "score" else 0.0 for name in self.reward_func_names]
            self.reward_weights = torch.tensor(weights, dtype=torch.float32)

    # -- the one override: TRL's batch, our advantages -------------------------------------------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        columns = {key: [row.get(key) for row in inputs] for key in inputs[0]}
        self._slca_scored = self.rewards.score_rows(completions, columns)  # scored once: the functions' batch
        return rewards_per_func

    def _generate_and_score_completions(self, inputs):
        self.slca_rows = inputs
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self.slca_rows = None
        scored, self._slca_scored = self._slca_scored, None
        if scored is None:
            raise RuntimeError("TRL scored no rewards for this batch (SLCATrainer needs its _calculate_rewards)")
        return self._route_advantages(inputs, output, scored)

    def _route_advantages(self, inputs: list[dict[str, Any]], output: dict[str, Any], scored: Scored):
        mode = "train" if self.model.training else "eval"
        group_size = self.num_generations if mode == "train" else self.num_generations_eval
        completion_mask = output["completion_mask"]
        tool_mask = output.get("tool_mask")
        if tool_mask is None:
            tool_mask = torch.ones_like(completion_mask)
        learnable = completion_mask * tool_mask
        for index, row in enumerate(inputs):
            task_of_row(row, index)  # a row without its task fails here, naming it
        answered = [_answered(row) for row in inputs]
        segment_ids = self.estimator.segment_ids(learnable, answered)
        local_rewards = {name: scored.batch.as_dict()[name] for name in self.estimator.rewards}
        void = list(scored.void)
        # Why each rollout is void, as our trainer names it: the simulator's fault, else the judge or checker.
        faults = [row.get(SIMULATOR_FAULT_FIELD) for row in inputs]
        reasons = [
            (f"simulator:{fault}" if fault else "judge") if flag else None
            for fault, flag in zip(faults, void, strict=True)
        ]

        # Groups may span processes: the estimator sees the whole gathered batch, as TRL's does.
        accelerator = self.accelerator
        if accelerator.num_processes > 1:
            from accelerate.utils import gather_object

            all_segments = accelerator.gather(accelerator.pad_across_processes(segment_ids, dim=1, pad_index=SEG_NONE))
            all_rewards = {name: gather_object(values) for name, values in local_rewards.items()}
            all_reasons = gather_object(reasons)
        else:
            all_segments, all_rewards, all_reasons = segment_ids, local_rewards, reasons
        all_void = [reason is not None for reason in all_reasons]
        self._slca_void_note = f"{sum(all_void)} of {len(all_void)} rollouts void" + (
            f" ({describe_void(all_reasons)})" if any(all_void) else ""
        )
        rows = all_segments.shape[0]
        group_ids = torch.arange(rows) // group_size
        advantages = self.estimator.advantages(
            group_ids=group_ids,
            segment_ids=all_segments,
            rewards=all_rewards,
            config=self.advantage_config,
            valid=None if not any(all_void) else [not flag for flag in all_void],
        )
        start = accelerator.process_index * len(inputs)
        local = advantages[start : start + len(inputs), : segment_ids.shape[1]]
        output["advantages"] = local.to(completion_mask.device)

        if any(void):  # void rollouts learn nothing: out of the loss, KL term included
            keep = torch.tensor([not flag for flag in void], device=tool_mask.device).unsqueeze(1)
            tool_mask = tool_mask * keep.to(tool_mask.dtype)
        output["tool_mask"] = tool_mask
        output["num_items_in_batch"] = accelerator.gather((completion_mask * tool_mask).sum()).sum()

        metrics = self._metrics[mode]
        for name, value in segment_advantage_stats(advantages, all_segments).items():
            metrics[name].append(value)
        metrics["rollout/void"].append(float(sum(all_void)))
        for name, field in ENDING_FIELDS.items():  # this process's rows (our rollout function sets them)
            values = [float(row[field]) for row in inputs if field in row]
            if values:
                metrics[f"rollout/{name}"].append(sum(values) / len(values))
        return output

    # -- a step with nothing to learn takes no optimiser step --------------------------------------
    def _prepare_inputs(self, generation_batch):
        inputs = super()._prepare_inputs(generation_batch)
        if self.model.training:  # the micro-batch this step trains on: count its learnable tokens
            mask = inputs["completion_mask"]
            tool_mask = inputs.get("tool_mask")
            if tool_mask is not None:
                mask = mask * tool_mask
            self._slca_window_tokens += int(mask.sum())
            self._slca_window_batches += 1
        return inputs

    def create_scheduler(self, num_training_steps: int, optimizer: Any = None):
        # Called by TRL's training loop once the optimiser is final (after accelerate has wrapped it).
        scheduler = super().create_scheduler(num_training_steps, optimizer)
        self._gate_updates()
        return scheduler

    def _gate_updates(self) -> None:
        """The optimiser's and the scheduler's ``step`` skip a step with no learnable token (our
        trainer's rule: every rollout of the update void, or nothing learnable in them)."""
        optimizer, scheduler = self.optimizer, self.lr_scheduler
        if optimizer is not None and not getattr(optimizer, "_slca_gated", False):
            take_step = optimizer.step

            def gated_step(_optimizer, *args, **kwargs):
                if self._skips_this_step():
                    return None
                return take_step(*args, **kwargs)

            # A bound method, as torch's schedulers expect when they wrap ``optimizer.step`` in turn;
            # it calls the step the scheduler wrapped, so it carries that wrapper's mark (without it
            # torch warns that the step was replaced after the scheduler was made).
            gated_step._wrapped_by_lr_sched = True  # type: ignore[attr-defined]
            optimizer.step = types.MethodType(gated_step, optimizer)
            optimizer._slca_gated = True
        plateau = isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)  # stepped by evaluations
        if scheduler is not None and not plateau and not getattr(scheduler, "_slca_gated", False):
            advance = scheduler.step

            def gated_advance(_scheduler, *args, **kwargs):
                if self._slca_step_skipped:
                    self._slca_step_skipped = False
                    return None
                return advance(*args, **kwargs)

            scheduler.step = types.MethodType(gated_advance, scheduler)
            scheduler._slca_gated = True

    def _skips_this_step(self) -> bool:
        """Whether the optimiser step now due is skipped: no learnable token in the micro-batches
        prepared since the last one, on any process (TRL's and accelerate's own gradient accumulation
        and gathering decide which micro-batches those are)."""
        if not self._slca_window_batches:  # not a step of TRL's training loop over our batches
            return False
        tokens = torch.tensor(float(self._slca_window_tokens), device=self.accelerator.device)
        self._slca_window_tokens = self._slca_window_batches = 0
        if self.accelerator.num_processes > 1:
            tokens = self.accelerator.reduce(tokens, reduction="sum")
        skipped = float(tokens) == 0
        self._slca_step_skipped = skipped
        if skipped:  # logged as our trainer logs a skipped step: train/skipped 1, and a warning
            self.skipped_steps += 1
            self._metrics["train"]["train/skipped"].append(1.0)
            if self.accelerator.is_main_process:
                print(
                    f"warning: TRL step {self.state.global_step + 1}: {self._slca_void_note or 'no rollout void'}, "
                    "no learnable token in the step's rollouts; the step is skipped (no update)",
                    file=sys.stderr,
                )
        return skipped
