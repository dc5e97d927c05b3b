"""SLCA-GRPO inside TRL: any registered estimator as a drop-in for TRL's ``GRPOTrainer``.

    from slca_grpo.integrations.trl import SLCATrainer, task_dataset
    trainer = SLCATrainer(model, args=GRPOConfig(...), train_dataset=task_dataset(tasks),
                          processing_class=tokenizer, estimator="slca")
    trainer.train()

Written against TRL 1.16.x (``pip install 'slca-grpo[trl]'``); importing it with another TRL is a
one-line ``TRLVersionError``. docs/trl.md maps TRL's settings to ours.
"""

from slca_grpo.integrations.trl.version import TRL_PIN, TRLVersionError, require_trl

require_trl()

from slca_grpo.integrations.trl.data import TASK_COLUMN, task_dataset, task_of_row, task_rows  # noqa: E402
from slca_grpo.integrations.trl.rewards import Scored, TaskRewards, completion_text  # noqa: E402
from slca_grpo.integrations.trl.rollouts import AgentLoopRollouts, rollout_fields  # noqa: E402
from slca_grpo.integrations.trl.trainer import (  # noqa: E402
    TRL_STD_EPS,
    SLCATrainer,
    advantage_settings,
    check_supported,
)

__all__ = [
    "TASK_COLUMN",
    "TRL_PIN",
    "TRL_STD_EPS",
    "AgentLoopRollouts",
    "SLCATrainer",
    "Scored",
    "TRLVersionError",
    "TaskRewards",
    "advantage_settings",
    "check_supported",
    "completion_text",
    "require_trl",
    "rollout_fields",
    "task_dataset",
    "task_of_row",
    "task_rows",
]
