"""The smallest run of the tiny quick-demo preset that still exercises every stage (SFT, RL, evaluation,
checkpoints, diagnostics), for the tests that train end to end."""

from __future__ import annotations

from slca_grpo.config import load_yaml_config
from slca_grpo.presets import resolve_config_path
from slca_grpo.trainer.run import RunConfig


def smoke_config(out_dir, **extra):
    overrides = [
        "data.n_train=40",
        "data.n_test=4",
        "sft.steps=4",
        "sft.batch_size=4",
        "rl.steps=3",
        "rl.prompts_per_step=2",
        "rl.mini_batch_prompts=1",
        "rl.ppo_epochs=2",
        "rollout.group_size=3",
        "rollout.max_response_tokens=48",
        "rollout.max_turns=2",
        "train.eval_tasks=2",
        "train.eval_every=2",
        "train.save_every=1",
        "train.keep_last=5",
        "rl.diagnostics_every=1",
        f"train.out_dir={out_dir}",
        *[f"{k}={v}" for k, v in extra.items()],
    ]
    return load_yaml_config(RunConfig, resolve_config_path("demo-quick-tiny"), overrides)
