"""LoRA through peft: only adapters train, the reference is the base with adapters off, adapters
save, resume exactly and merge into a plain folder that computes the same outputs."""

from __future__ import annotations

import copy
import shutil

import pytest
import torch

from slca_grpo.chat.formatter import ChatFormatter
from slca_grpo.cli import main
from slca_grpo.config import ConfigError, load_yaml_config
from slca_grpo.engine import token_logprobs
from slca_grpo.models import build_tiny, load_model
from slca_grpo.models.config import LoraConfig
from slca_grpo.models.lora import add_adapters, is_adapter_folder
from slca_grpo.presets import resolve_config_path
from slca_grpo.rewards.config import RewardConfig
from slca_grpo.rewards.rule_judge import RuleJudge
from slca_grpo.rollout.environment import ToolEnvironment
from slca_grpo.rollout.loop import AgentLoop, RolloutConfig
from slca_grpo.trainer.batch import pad_sequences
from slca_grpo.trainer.logger import read_metrics
from slca_grpo.trainer.rl import RLConfig, RLTrainer
from slca_grpo.trainer.run import RunConfig, train


@pytest.fixture
def tiny():
    torch.manual_seed(0)
    return build_tiny("tiny", corpus_texts=['<tool_call>{"name": "f"}</tool_call> hello world'] * 30, vocab_size=400)


def batch_of(tokenizer, rows=4, width=20, seed=0):
    generator = torch.Generator().manual_seed(seed)
    ids = [torch.randint(5, len(tokenizer) - 1, (width,), generator=generator).tolist() for _ in range(rows)]
    masks = [[0.0] * 8 + [1.0] * (width - 8) for _ in range(rows)]
    return pad_sequences(ids, masks, 0)


def trainer_for(model, tokenizer, kl=0.01):
    loop = AgentLoop(model, ChatFormatter(tokenizer), ToolEnvironment(simulator=None), RolloutConfig(group_size=2))
    config = RLConfig(estimator="grpo", prompts_per_step=2, mini_batch_prompts=2, lr=5e-2, kl_coef=kl)
    return RLTrainer(model, None, loop, RuleJudge(), RewardConfig(), config)


def test_only_adapters_train_and_the_reference_is_the_base_with_adapters_off(tiny):
    model, tokenizer = tiny
    base = copy.deepcopy(model)
    policy = add_adapters(model, LoraConfig(r=4))
    frozen = {n: p.detach().clone() for n, p in policy.named_parameters() if "lora_" not in n}
    adapters = {n: p.detach().clone() for n, p in policy.named_parameters() if "lora_" in n}
    assert adapters and all(p.requires_grad == ("lora_" in n) for n, p in policy.named_parameters())
    trainer = trainer_for(policy, tokenizer)
    batch = batch_of(tokenizer)
    advantages = torch.tensor([1.0, -1.0, 0.5, -0.5])[:, None] * batch.loss_mask
    for _ in range(2):
        trainer._update(batch, advantages, prompts=2, group_size=2, generator=torch.Generator().manual_seed(0))
    params = dict(policy.named_parameters())
    assert all(torch.equal(params[n], p) for n, p in frozen.items())
    assert any(not torch.equal(params[n], p) for n, p in adapters.items())
    with torch.no_grad():
        expected = token_logprobs(base, batch.input_ids, batch.attention_mask)
        moved = token_logprobs(policy, batch.input_ids, batch.attention_mask)
    reference = trainer._reference_logprobs(batch)
    learnable = batch.loss_mask > 0
    assert torch.allclose(reference[learnable], expected[learnable], atol=1e-5)
    assert not torch.allclose(moved[learnable], expected[learnable], atol=1e-3)  # the adapters did move it


def test_lora_settings_are_checked():
    with pytest.raises(ConfigError, match="model.lora.r must be >= 0"):
        load_yaml_config(RunConfig, resolve_config_path("demo-quick-tiny"), ["model.lora.r=-1"])
    with pytest.raises(ConfigError, match="model.lora.dropout must be < 1"):
        load_yaml_config(RunConfig, resolve_config_path("demo-quick-tiny"), ["model.lora.r=4", "model.lora.dropout=1"])


def lora_config(out_dir, *extra):
    overrides = [
        "model.lora.r=4",
        f"train.out_dir={out_dir}",
        "data.n_train=40",
        "data.n_test=2",
        "sft.steps=3",
        "sft.batch_size=4",
        "rl.steps=3",
        "rl.prompts_per_step=2",
        "rl.mini_batch_prompts=2",
        "rl.lr=1e-2",
        "rollout.group_size=2",
        "rollout.max_response_tokens=24",
        "train.eval_tasks=2",
        "train.eval_every=0",
        "train.save_every=1",
        "train.keep_last=5",
        "train.progress=false",
        *extra,
    ]
    return load_yaml_config(RunConfig, resolve_config_path("demo-quick-tiny"), overrides)


@pytest.mark.slow
def test_a_lora_run_checkpoints_adapters_resumes_exactly_and_exports_a_merged_model(tmp_path):
    full, resumed = tmp_path / "full", tmp_path / "resumed"
    train(lora_config(full), echo=False)
    step2 = full / "checkpoints" / "step-000002"
    assert is_adapter_folder(step2 / "model") and not (step2 / "model" / "config.json").exists()
    assert (full / "sft" / "config.json").is_file()  # the base the adapters sit on

    shutil.copytree(full, resumed)
    shutil.rmtree(resumed / "checkpoints" / "step-000002")
    (resumed / "checkpoints" / "latest").write_text("step-000001\n")
    train(lora_config(resumed), resume=True, echo=False)
    original = [m for m in read_metrics(full / "metrics.jsonl") if m.get("step") == 2 and "train/pg_loss" in m]
    replayed = [m for m in read_metrics(resumed / "metrics.jsonl") if m.get("step") == 2 and "train/pg_loss" in m]
    assert len(original) == len(replayed) == 1
    for key in ("reward/score", "train/pg_loss", "train/kl", "train/grad_norm"):
        assert replayed[0][key] == pytest.approx(original[0][key], rel=1e-5, abs=1e-7), key

    out = tmp_path / "merged"
    assert main(["export", str(step2), "--out", str(out)]) == 0
    merged, tokenizer = load_model(out)
    from slca_grpo.models.lora import load_adapters

    base, _ = load_model(full / "sft")
    policy = load_adapters(base, step2 / "model", trainable=False)
    ids = torch.tensor([tokenizer.encode("hello tool call world")])
    with torch.no_grad():
        assert torch.allclose(merged(input_ids=ids).logits, policy(input_ids=ids).logits, atol=1e-4)


def test_export_refuses_a_folder_without_adapters(tmp_path, capsys):
    assert main(["export", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "holds no LoRA adapters" in capsys.readouterr().err


@pytest.mark.slow
def test_lora_on_smollm2_trains_only_adapters_with_the_base_as_reference(smollm2_copy):
    model, tokenizer = smollm2_copy  # load_model("smollm2"), a copy of our own: the adapters go into it
    base_logits_input = torch.tensor([tokenizer.encode("<tool_call> get weather in Oslo")])
    with torch.no_grad():
        expected = token_logprobs(model, base_logits_input, torch.ones_like(base_logits_input))
    policy = add_adapters(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    frozen = {n: p.detach().clone() for n, p in policy.named_parameters() if "lora_" not in n and "layers.0." in n}
    trainer = trainer_for(policy, tokenizer)
    batch = batch_of(tokenizer, rows=2, width=16)
    advantages = torch.tensor([1.0, -1.0])[:, None] * batch.loss_mask
    trainer._update(batch, advantages, prompts=1, group_size=2, generator=torch.Generator().manual_seed(0))
    params = dict(policy.named_parameters())
    assert all(torch.equal(params[n], p) for n, p in frozen.items())
    assert any("lora_B" in n and p.abs().sum() > 0 for n, p in params.items())
    with torch.no_grad(), policy.disable_adapter():
        reference = token_logprobs(policy, base_logits_input, torch.ones_like(base_logits_input))
    assert torch.allclose(reference, expected, atol=1e-5)
