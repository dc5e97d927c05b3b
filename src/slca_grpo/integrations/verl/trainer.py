"""verl v1 trainers whose advantage step runs our estimator registry (``trainer.v1.trainer_mode``).

``slca_sync``, ``slca_colocate_async`` and ``slca_separate_async`` schedule exactly like verl's
``sync``, ``colocate_async`` and ``separate_async`` trainers; only ``_compute_advantage`` differs,
and only when ``algorithm.adv_estimator`` names one of our estimators (``slca``, ``toolpo``,
``rltr``, or a plugin's) rather than one of verl's (``grpo``, ``gae``, ...), which stay verl's. The
estimator is looked up once, when the trainer is built, and its object runs every advantage step; a
plugin estimator named like one of verl's is refused there rather than silently passed over.

Why an override: an estimator registered with verl's ``register_adv_est`` receives only
``token_level_rewards``, ``response_mask``, ``index`` and ``config``, and the parent step fetches a
fixed field list from TransferQueue. SLCA needs each rollout's R_tool, R_sum and omission flag,
which our reward function leaves in ``extra_fields["reward_extra_info"]``; this step fetches them.
"""

from __future__ import annotations

import torch
import transfer_queue as tq
from omegaconf import DictConfig
from tensordict import TensorDict
from transfer_queue import KVBatchMeta
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.v1 import PPOTrainerColocateAsync, PPOTrainerSeparateAsync, PPOTrainerSync, register_trainer
from verl.workers.utils.padding import response_to_nested

from slca_grpo.algos import AdvantageConfig, Estimator, estimator_spec, list_estimators
from slca_grpo.config import ConfigError
from slca_grpo.integrations.verl.advantages import batch_advantages, check_no_clash_with_verl, void_flags
from slca_grpo.integrations.verl.config import VerlSLCAConfig, read_section
from slca_grpo.plugins import load_plugins
from slca_grpo.trainer.rl import segment_advantage_stats

# What the advantage step reads from TransferQueue.
ADVANTAGE_FIELDS = ("uid", "response_mask", "extra_fields")

__all__ = [
    "ADVANTAGE_FIELDS",
    "SLCATrainerColocateAsync",
    "SLCATrainerSeparateAsync",
    "SLCATrainerSync",
    "is_verl_estimator",
    "verl_estimators",
]


def verl_estimators() -> set[str]:
    """The names of the advantage estimators verl itself implements (or has registered)."""
    return {e.value for e in core_algos.AdvantageEstimator} | set(core_algos.ADV_ESTIMATOR_REGISTRY)


def is_verl_estimator(name: str) -> bool:
    """Whether verl itself implements the advantage estimator ``name``."""
    return name in verl_estimators()


def _reward_extra_info(extra_fields: object) -> object:
    fields = getattr(extra_fields, "data", extra_fields)  # TransferQueue may hand back NonTensorData
    return fields.get("reward_extra_info") if isinstance(fields, dict) else None


class SLCAAdvantageMixin:
    """The advantage step of our estimators, mixed into each of verl's v1 trainers."""

    config: DictConfig
    scheduling_mode: str  # the verl trainer mode this class schedules like

    def __init__(self, config: DictConfig):
        super().__init__(config)  # type: ignore[call-arg]
        algorithm = config.algorithm
        self.slca: VerlSLCAConfig = read_section(
            config, defaults={"advantage": {"norm_std": bool(algorithm.get("norm_adv_by_std_in_grpo", True))}}
        )
        load_plugins(self.slca.plugins)
        check_no_clash_with_verl(verl_estimators())
        name = str(algorithm.adv_estimator)
        # Our estimator, looked up once; None when verl runs one of its own.
        self.our_estimator: Estimator | None = None
        if not is_verl_estimator(name):
            self._check_estimator_setup(name)
            self.our_estimator = estimator_spec(name)

    @property
    def slca_estimator(self) -> str | None:
        """The name of our estimator this trainer runs (None: verl's own runs)."""
        return self.our_estimator.name if self.our_estimator is not None else None

    # PPOTrainer sets `trainer_mode` from the config (our registered name) and branches on it for
    # its replay buffer, data loader and checkpoints; those must see the mode we schedule like.
    @property
    def trainer_mode(self) -> str:
        return self.scheduling_mode

    @trainer_mode.setter
    def trainer_mode(self, registered_name: str) -> None:
        self.registered_mode = registered_name

    def _check_estimator_setup(self, name: str) -> None:
        if name not in list_estimators():
            verl_names = sorted(verl_estimators())
            raise ConfigError(
                f"algorithm.adv_estimator: unknown estimator {name!r}; ours: {', '.join(list_estimators())}; "
                f"verl's: {', '.join(verl_names)}"
            )
        algorithm = self.config.algorithm
        if algorithm.get("use_kl_in_reward", False):
            raise ConfigError(
                f"algorithm.use_kl_in_reward: {name!r} reads rewards per segment, not token-level rewards; "
                "use the KL loss (actor_rollout_ref.actor.use_kl_loss) instead"
            )
        correction = algorithm.get("rollout_correction") or {}
        if not correction.get("bypass_mode", False) and (correction.get("rollout_is") or correction.get("rollout_rs")):
            raise ConfigError(
                f"algorithm.rollout_correction: importance weights and rejection sampling are not applied "
                f"with {name!r}; leave rollout_is and rollout_rs unset"
            )

    def _compute_advantage(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        if self.our_estimator is None:
            return super()._compute_advantage(batch, metrics)  # type: ignore[misc]
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=list(ADVANTAGE_FIELDS))
        nested_mask = data["response_mask"]
        advantages, segment_ids = self.slca_advantages(
            batch.keys, list(data["uid"]), torch.nested.to_padded_tensor(nested_mask, 0), list(data["extra_fields"])
        )
        # The rows verl appended to even out the batch (no learnable tokens) stay out of the metrics.
        tags = batch.tags if len(batch.tags) == len(batch.keys) else [{}] * len(batch.keys)
        real = [row for row, tag in enumerate(tags) if not tag.get("is_padding", False)]
        metrics.update(segment_advantage_stats(advantages[real], segment_ids[real]))
        void = void_flags([_reward_extra_info(fields) for fields in data["extra_fields"]])
        metrics["rollout/void"] = float(sum(void[row] for row in real))
        metrics["rollout/void_rate"] = metrics["rollout/void"] / max(1, len(real))
        output = TensorDict(
            {
                "advantages": response_to_nested(advantages, nested_mask),
                "returns": response_to_nested(advantages, nested_mask),
            },
            batch_size=len(batch),
        )
        return tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=output)

    def slca_advantages(
        self, keys: list[str], uids: list[object], response_mask: torch.Tensor, extra_fields: list[object]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(advantages, segment_ids)`` of the rows ``keys`` (verl's ``{uid}_{session}_{output}``)."""
        several = sorted(key for key in keys if key.rsplit("_", 1)[-1] != "0")
        if several:
            raise ValueError(
                f"{self.slca_estimator!r} needs one agent loop output per rollout; rows past the first: {several[:3]}"
            )
        if self.our_estimator is None:
            raise ValueError(f"algorithm.adv_estimator={self.config.algorithm.adv_estimator}: verl computes its own")
        advantage_config: AdvantageConfig = self.slca.advantage
        return batch_advantages(
            self.our_estimator,
            group_ids=[str(uid) for uid in uids],
            response_mask=response_mask,
            reward_infos=[_reward_extra_info(fields) for fields in extra_fields],
            rollouts=keys,
            config=advantage_config,
        )


@register_trainer("slca_sync")
class SLCATrainerSync(SLCAAdvantageMixin, PPOTrainerSync):
    scheduling_mode = "sync"


@register_trainer("slca_colocate_async")
class SLCATrainerColocateAsync(SLCAAdvantageMixin, PPOTrainerColocateAsync):
    scheduling_mode = "colocate_async"


@register_trainer("slca_separate_async")
class SLCATrainerSeparateAsync(SLCAAdvantageMixin, PPOTrainerSeparateAsync):
    scheduling_mode = "separate_async"
