"""The memory estimate made before training: its parts against hand-computed values, and a run
that cannot fit refused before any step."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from slca_grpo.config import ConfigError
from slca_grpo.models.config import LoraConfig
from slca_grpo.models.lora import add_adapters
from slca_grpo.trainer.memory import PROMPT_ALLOWANCE_TOKENS, check_fits, estimate_memory


def small_model():
    config = Qwen2Config(
        vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, tie_word_embeddings=False,
    )  # fmt: skip
    return Qwen2ForCausalLM(config)


def test_the_estimate_adds_up_the_parts_by_hand():
    model = small_model()
    n = sum(p.numel() for p in model.parameters())
    estimate = estimate_memory(model, rollouts=16, response_tokens=100, micro_batch_rollouts=4, reference_copy=True)
    tokens = PROMPT_ALLOWANCE_TOKENS + 100
    assert estimate.weights == estimate.reference == n * 4
    assert estimate.gradients == n * 4 and estimate.optimizer == 2 * n * 4
    assert estimate.activations == 4 * tokens * 2 * 64 * 18 * 4 / 2
    assert estimate.kv_cache == 16 * tokens * 2 * 2 * 2 * 16 * 4
    assert estimate.logits == 4 * 100 * 1000 * 4
    assert estimate.total == pytest.approx(sum(vars(estimate).values()))


def test_lora_counts_only_adapters_as_trainable_and_keeps_no_reference_copy():
    model = small_model()
    full = estimate_memory(model, rollouts=8, response_tokens=50, micro_batch_rollouts=8, reference_copy=True)
    lora = add_adapters(small_model(), LoraConfig(r=2))
    adapters = sum(p.numel() for p in lora.parameters() if p.requires_grad)
    estimate = estimate_memory(lora, rollouts=8, response_tokens=50, micro_batch_rollouts=8, reference_copy=False)
    assert estimate.reference == 0 and estimate.optimizer == 2 * adapters * 4 < full.optimizer / 50


def test_a_run_that_cannot_fit_is_refused_with_what_to_change():
    estimate = estimate_memory(
        small_model(), rollouts=64, response_tokens=4096, micro_batch_rollouts=64, reference_copy=True
    )
    with pytest.raises(ConfigError, match=r"needs about .* GB on cpu .* only 0.0 GB is free; lower rl.micro_batch"):
        check_fits(estimate, torch.device("cpu"), available=1e6)
    check_fits(estimate, torch.device("cpu"), available=estimate.total * 2)


def test_a_hub_id_that_cannot_be_reached_is_one_line_saying_how_to_point_at_a_local_copy(tmp_path):
    code = "from slca_grpo.models import load_model\nload_model('nobody-here/no-such-model-xyz')"
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=120)
    last = result.stderr.strip().splitlines()[-1]
    assert "ValueError: cannot load 'nobody-here/no-such-model-xyz' from the Hugging Face Hub" in last
    assert "set model.name to DIR" in last
