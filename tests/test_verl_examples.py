"""The verl launch configs compose over verl's own, pass verl's checks and hold the paper's settings."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils.config import validate_config

from slca_grpo.integrations.verl.config import read_section
from slca_grpo.integrations.verl.trainer import SLCATrainerSync

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "verl"


def launch_config(name: str, *overrides: str):
    with initialize_config_dir(config_dir=str(EXAMPLES / "config"), version_base=None):
        config = compose(name, overrides=list(overrides))
    OmegaConf.resolve(config)  # as verl's task runner does
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    return config


def test_the_paper_setting():
    config = launch_config("qwen2.5-7b", "trainer.nnodes=4")
    actor, rollout = config.actor_rollout_ref.actor, config.actor_rollout_ref.rollout
    assert (config.data.train_batch_size, actor.ppo_mini_batch_size, rollout.n) == (128, 32, 16)
    assert (actor.optim.lr, actor.entropy_coeff, actor.kl_loss_coef, actor.kl_loss_type) == (
        1e-6,
        0,
        0.001,
        "low_var_kl",
    )
    assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.clip_ratio_c) == (0.2, 0.2, 3.0)
    assert (actor.loss_agg_mode, actor.policy_loss.loss_mode, actor.use_kl_loss) == ("token-mean", "vanilla", True)
    assert (rollout.response_length, rollout.multi_turn.max_assistant_turns, rollout.multi_turn.max_parallel_calls) == (
        8192,
        10,
        20,
    )
    assert config.slca.max_tool_response_tokens == 2048 and rollout.multi_turn.format == "slca"
    assert (config.trainer.nnodes, config.trainer.n_gpus_per_node, config.trainer.total_epochs) == (4, 8, 5)
    assert config.reward.custom_reward_function.reward_kwargs.estimator == "slca"
    section = read_section(config)
    assert section.reward.judge.endswith("#gpt-oss-120b") and section.simulator.openai.temperature == 0.6


@pytest.mark.parametrize("name", ["qwen2.5-7b", "smoke_1gpu"])
def test_our_trainer_accepts_the_launch_configs(name):
    trainer = SLCATrainerSync(launch_config(name))
    assert trainer.slca_estimator == "slca" and trainer.trainer_mode == "sync"


def test_the_smoke_setting_is_one_gpu_and_offline():
    config = launch_config("smoke_1gpu")
    assert (config.trainer.nnodes, config.trainer.n_gpus_per_node, config.trainer.total_training_steps) == (1, 1, 3)
    assert config.actor_rollout_ref.rollout.tensor_model_parallel_size == 1
    section = read_section(config)
    assert (section.simulator.backend, section.reward.judge, section.simulator_service.url) == ("schema", "rule", "")


@pytest.mark.parametrize("script", sorted(EXAMPLES.glob("*.sh")), ids=lambda p: p.name)
def test_the_launch_scripts_parse_and_name_existing_configs(script):
    subprocess.run(["bash", "-n", str(script)], check=True)
    names = re.findall(r"--config-name=(\S+)", script.read_text(encoding="utf-8"))
    assert names and all((EXAMPLES / "config" / f"{name}.yaml").is_file() for name in names)
