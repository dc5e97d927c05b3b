"""The memory estimate made before training: its parts against hand-computed values, and a run
that cannot fit refused before any step."""

from __future__ import annotations

import copy
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


MEASURE = """
import os, sys, threading, time, torch
from transformers import AutoConfig, AutoModelForCausalLM
from slca_grpo.trainer.memory import estimate_memory
from slca_grpo.engine import token_logprobs
from slca_grpo.trainer.batch import pad_sequences
from slca_grpo.trainer.optim import build_optimizer

def rss():
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

# SmolLM2's architecture (the config load_model("smollm2") gives) with fresh weights: what an update
# adds to memory follows the shapes, not the values, and reading the GGUF file again costs ~25 s.
model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(sys.argv[1]), dtype=torch.float32).eval()
reference = __import__("copy").deepcopy(model).requires_grad_(False)
rows, width = 2, 1024 + 64  # a full prompt allowance (the estimate assumes it) and a response
ids = torch.randint(5, 40000, (rows, width))
batch = pad_sequences(ids.tolist(), [[0.0] * 1024 + [1.0] * 64] * rows, 0)
before, peak, done = rss(), [0], threading.Event()

def sample():
    while not done.is_set():
        peak[0] = max(peak[0], rss())
        time.sleep(0.005)

watcher = threading.Thread(target=sample)
watcher.start()
optimizer = build_optimizer(model, lr=1e-6)
loss = -token_logprobs(model, batch.input_ids, batch.attention_mask, start=1024, positions=batch.loss_mask > 0).sum()
loss.backward()
optimizer.step()
done.set()
watcher.join()
estimate = estimate_memory(model, rollouts=rows, response_tokens=64, micro_batch_rollouts=rows, reference_copy=True)
print(max(peak[0], rss()) - before, estimate.total - estimate.weights - estimate.reference - estimate.kv_cache)
"""


@pytest.mark.slow
def test_the_estimate_is_the_right_size_against_measured_rss_on_smollm2(smollm2, tmp_path):
    # What one update adds on top of the loaded weights and reference: gradients, AdamW moments,
    # activations and logits (no generation here, so no KV cache). In a fresh process, for its RSS.
    config = copy.deepcopy(smollm2[0].config)
    if hasattr(config, "quantization_config"):  # the GGUF file's: the weights are de-quantised
        delattr(config, "quantization_config")
    config.num_hidden_layers = 10  # of 30: the estimate follows the layers, and the pass costs a third
    config.save_pretrained(tmp_path)
    result = subprocess.run([sys.executable, "-c", MEASURE, str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    measured, estimated = map(float, result.stdout.split()[-2:])
    assert 0.5 < estimated / measured < 2.0, (measured / 2**30, estimated / 2**30)
