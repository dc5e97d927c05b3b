"""train.device: resolved once, validated, and a no-op on the CPU (auto and cpu train identically)."""

from __future__ import annotations

import pytest
import torch

from slca_grpo.config import ConfigError, load_yaml_config
from slca_grpo.presets import resolve_config_path
from slca_grpo.trainer.batch import TokenBatch
from slca_grpo.trainer.device import peak_memory_gb, resolve_device
from slca_grpo.trainer.logger import read_metrics
from slca_grpo.trainer.run import RunConfig, train


def test_device_specs_resolve_or_fail_naming_the_key():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ConfigError, match="train.device must be auto, cpu, cuda or cuda:N, got 'gpu'"):
        resolve_device("gpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="train.device is 'cuda:1' but this torch sees no CUDA device"):
            resolve_device("cuda:1")
    with pytest.raises(ConfigError, match="train.device must be auto, cpu, cuda or cuda:N"):
        load_yaml_config(RunConfig, resolve_config_path("demo-quick-tiny"), ["train.device=tpu"])


def test_a_batch_moves_and_selects_on_its_device():
    batch = TokenBatch(
        torch.ones(3, 4, dtype=torch.long),
        torch.ones(3, 4, dtype=torch.long),
        torch.ones(3, 4),
        torch.ones(3, 4, dtype=torch.long),
    )
    moved = batch.to("cpu")
    assert all(t.device.type == "cpu" for t in moved.tensors)
    assert len(moved.select(torch.tensor([2, 0]))) == 2


def test_peak_memory_is_reported_in_gigabytes():
    assert 0.01 < peak_memory_gb(torch.device("cpu")) < 64


@pytest.mark.slow
def test_auto_and_an_explicit_cpu_train_identically_on_a_cpu_machine(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("auto means CUDA here")
    runs = {}
    for device in ("auto", "cpu"):
        overrides = [
            f"train.device={device}",
            f"train.out_dir={tmp_path / device}",
            "data.n_train=40",
            "data.n_test=2",
            "sft.steps=3",
            "sft.batch_size=4",
            "rl.steps=2",
            "rl.prompts_per_step=2",
            "rl.mini_batch_prompts=2",
            "rollout.group_size=2",
            "rollout.max_response_tokens=24",
            "train.eval_tasks=2",
            "train.progress=false",
        ]
        train(load_yaml_config(RunConfig, resolve_config_path("demo-quick-tiny"), overrides), echo=False)
        runs[device] = [m for m in read_metrics(tmp_path / device / "metrics.jsonl") if "reward/score" in m]
    assert len(runs["auto"]) == 2
    for auto, cpu in zip(runs["auto"], runs["cpu"]):
        for key in ("reward/score", "train/pg_loss", "train/grad_norm", "rollout/generated_tokens"):
            assert auto[key] == cpu[key], key
        assert auto["memory/peak_gb"] > 0


def test_gradient_checkpointing_gives_the_same_update():
    from slca_grpo.models import build_tiny
    from slca_grpo.rewards.config import RewardConfig
    from slca_grpo.rewards.rule_judge import RuleJudge
    from slca_grpo.rollout.environment import ToolEnvironment
    from slca_grpo.rollout.formatter import ChatFormatter
    from slca_grpo.rollout.loop import AgentLoop, RolloutConfig
    from slca_grpo.trainer.batch import pad_sequences
    from slca_grpo.trainer.rl import RLConfig, RLTrainer

    results = []
    for checkpointing in (False, True):
        torch.manual_seed(0)
        model, tokenizer = build_tiny("tiny", corpus_texts=["hello tool world"] * 20, vocab_size=300)
        loop = AgentLoop(model, ChatFormatter(tokenizer), ToolEnvironment(simulator=None), RolloutConfig(group_size=2))
        config = RLConfig(estimator="grpo", prompts_per_step=2, mini_batch_prompts=2, kl_coef=0.0,
                          gradient_checkpointing=checkpointing)  # fmt: skip
        trainer = RLTrainer(model, None, loop, RuleJudge(), RewardConfig(), config)
        ids = [[(7 * i + j) % 250 + 5 for j in range(16)] for i in range(4)]
        batch = pad_sequences(ids, [[0.0] * 6 + [1.0] * 10] * 4, 0)
        advantages = torch.tensor([1.0, -1.0, 0.5, -0.5])[:, None] * batch.loss_mask
        metrics = trainer._update(
            batch, advantages, prompts=2, group_size=2, generator=torch.Generator().manual_seed(0)
        )
        results.append((metrics["train/grad_norm"], [p.detach().clone() for p in model.parameters()]))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-5)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(results[0][1], results[1][1]))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (benchmarks/gpu_check.sh)")
def test_a_short_run_on_cuda_keeps_everything_on_the_gpu(tmp_path):
    overrides = [
        "train.device=cuda",
        f"train.out_dir={tmp_path}",
        "data.n_train=40",
        "data.n_test=2",
        "sft.steps=3",
        "sft.batch_size=4",
        "rl.steps=2",
        "rl.prompts_per_step=2",
        "rl.mini_batch_prompts=2",
        "rl.bf16=true",
        "rollout.group_size=2",
        "rollout.max_response_tokens=24",
        "train.eval_tasks=2",
        "train.save_every=1",
        "train.progress=false",
    ]
    summary = train(load_yaml_config(RunConfig, resolve_config_path("demo-quick-tiny"), overrides), echo=False)
    steps = [m for m in read_metrics(tmp_path / "metrics.jsonl") if "reward/score" in m]
    assert summary["steps"] == 2 and len(steps) == 2 and steps[-1]["memory/peak_gb"] > 0
