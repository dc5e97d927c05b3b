"""slca bench: the floors of a step's phases (hand-computed on a toy shape) and the command end to end."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from slca_grpo.config import load_yaml_config
from slca_grpo.presets import resolve_config_path
from slca_grpo.trainer.floors import (
    Group,
    ModelShape,
    Rates,
    causal_pairs,
    forward_flops,
    rollout_floor,
    sft_floor,
    train_floor,
)
from slca_grpo.trainer.run import RunConfig

# 1 layer, 8 weights in the layers' matrix products, a 20-weight head, 100 bytes of weights.
TOY = ModelShape(layers=1, hidden=2, q_dim=2, kv_dim=2, vocab=10, body_params=8, head_params=20, weight_bytes=100)
RATES = Rates(matmul_flops=1e3, memory_bytes=1e2, activation_bytes=4)  # KV: 1 × 2 × 2 × 4 = 16 bytes a token
# A prompt of 3 tokens; rollout 1 samples 3 tokens, gets 2 injected, samples 2 more; rollout 2 samples 2.
GROUP = Group(prompt_tokens=3, responses=((1, 1, 1, 0, 0, 1, 1), (1, 1)))


def test_causal_pairs_and_forward_flops_by_hand():
    assert causal_pairs(0, 3) == 1 + 2 + 3
    assert causal_pairs(2, 4) == 3 + 4
    assert causal_pairs(5, 5) == 0
    # 2 × 8 × 5 tokens + 2 × 20 × 2 head positions + 4 × q_dim 2 × 1 layer × 7 pairs
    assert forward_flops(TOY, 5, 2, 7) == 80 + 80 + 56


def test_rollout_floor_by_hand():
    floors = rollout_floor(TOY, RATES, [GROUP])
    # Prefill: the prompt (3 tokens, 6 pairs, 1 head) and rollout 1's injected span at positions 6-7
    # (2 tokens, 7 + 8 pairs, 1 head).
    prefill = floors["prefill"]
    assert prefill.tokens == 5 and prefill.flops == 2 * 8 * 5 + 2 * 20 * 2 + 4 * 2 * 21
    assert prefill.seconds == pytest.approx(prefill.flops / 1e3)
    # Decode, turn 1: step 0 both rows at context 3 (read 100 + 16 × 6 bytes), step 1 rollout 1 at 4
    # (100 + 16 × 4); turn 2: rollout 1 at context 8 (100 + 16 × 8). All memory-bound at 100 B/s.
    decode = floors["decode"]
    assert decode.bytes == 196 + 164 + 228
    assert decode.seconds == pytest.approx(1.96 + 1.64 + 2.28)
    assert decode.flops == (32 + 80 + 48) + (16 + 40 + 32) + (16 + 40 + 64)
    assert decode.tokens == 7 and "3 steps" in decode.detail and "memory-bound" in decode.detail
    # With memory 1000x faster, the same steps are compute-bound.
    fast_memory = rollout_floor(TOY, Rates(1e3, 1e5), [GROUP])["decode"]
    assert fast_memory.seconds == pytest.approx(decode.flops / 1e3) and "compute-bound" in fast_memory.detail


def test_train_floor_pays_the_prompt_once_per_group():
    # 3 prompt + 7 + 2 response tokens; pairs 6 + (4..10) 49 + (4..5) 9; heads at the 7 sampled tokens.
    forward = 2 * 8 * 12 + 2 * 20 * 7 + 4 * 2 * 64
    floor = train_floor(TOY, RATES, [GROUP], trained_passes=1, frozen_passes=1)
    assert floor.tokens == 12 and floor.flops == 4 * forward  # forward+backward (3) + a frozen forward (1)
    assert floor.seconds == pytest.approx(4 * forward / 1e3)
    two_epochs = train_floor(TOY, RATES, [GROUP], trained_passes=2)
    assert two_epochs.flops == 6 * forward
    # The prompt is counted once, not once per rollout.
    apart = train_floor(TOY, RATES, [Group(3, ((1, 1, 1, 0, 0, 1, 1),)), Group(3, ((1, 1),))])
    assert apart.tokens == floor.tokens + 3


def test_sft_floor_by_hand():
    floor = sft_floor(TOY, RATES, [(4, 2), (1, 1)])
    forward = 2 * 8 * 5 + 2 * 20 * 3 + 4 * 2 * (10 + 1)
    assert floor.flops == 3 * forward and floor.tokens == 5


@pytest.mark.parametrize("tied", [True, False])
def test_model_shape_counts_a_llama_model(tied):
    config = LlamaConfig(
        vocab_size=50,
        hidden_size=16,
        intermediate_size=40,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=tied,
    )
    model = LlamaForCausalLM(config)
    shape = ModelShape.of(model)
    per_layer = 16 * 16 + 2 * 16 * 8 + 16 * 16 + 3 * 16 * 40  # q, k, v (2 KV heads of 4), o, gate/up/down
    assert (shape.q_dim, shape.kv_dim, shape.layers) == (16, 8, 2)
    assert shape.body_params == 2 * per_layer and shape.head_params == 16 * 50
    norms = 2 * 2 * 16 + 16
    assert shape.weight_bytes == 4 * (2 * per_layer + 16 * 50 + norms)  # the head once, tied or not
    assert shape.kv_bytes_per_token(2) == 2 * 2 * 8 * 2


def test_bench_times_a_config_against_its_floor(tmp_path, capsys):
    from slca_grpo.cli import main
    from slca_grpo.trainer.bench import format_bench, run_bench

    overrides = [
        "data.n_train=60",
        "data.n_test=2",
        "rl.prompts_per_step=2",
        "rl.mini_batch_prompts=2",
        "rollout.group_size=2",
        "rollout.max_response_tokens=24",
        "sft.batch_size=4",
        "train.torch_threads=1",
    ]
    config = load_yaml_config(RunConfig, resolve_config_path("demo-quick-tiny"), overrides)
    result = run_bench(config, rl_steps=1, sft_steps=1, echo=False)
    assert [p.name for p in result.rl] == ["rollouts", "update", "rewards"] and [p.name for p in result.sft] == ["step"]
    assert result.machine.matmul_flops["fp32"] > 0 and result.machine.memory_bytes > 0
    assert result.rl_precision == result.sft_precision == "fp32"  # the tiny preset pins float32
    for phase in [*result.rl[:2], *result.sft]:
        assert phase.seconds > 0 and phase.floor.seconds > 0 and phase.ratio == phase.seconds / phase.floor.seconds
    # The update's floor: 2 prompts × G = 2 with a KL reference, so one trained and one frozen pass.
    assert "1 forward+backward, 1 forward" in result.rl[1].floor.detail
    text = format_bench(result)
    assert "RL step (fp32" in text and "SFT step (fp32" in text and "GFLOP/s" in text and "GB/s" in text
    # The warm-up step is reported beside the steady one, phase by phase.
    assert set(result.rl_first) == {"rollouts", "update", "rewards"} and result.rl_first["rollouts"] > 0
    assert f"first step (the warm-up): {sum(result.rl_first.values()):.2f} s" in text

    out = tmp_path / "bench.json"
    args = ["bench", "demo-quick-tiny", "--steps", "1", "--sft-steps", "0", "--json", str(out)]
    assert main([*args, *(a for o in overrides for a in ("--set", o))]) == 0
    written = json.loads(out.read_text())
    assert [p["name"] for p in written["rl"]] == ["rollouts", "update", "rewards"] and written["sft"] == []
    assert set(written["rl_first_step"]) == {"rollouts", "update", "rewards"}
    assert written["rl"][0]["ratio"] == pytest.approx(written["rl"][0]["seconds"] / written["rl"][0]["floor_seconds"])
    assert "RL step" in capsys.readouterr().out


def test_the_sft_warm_up_step_runs_the_longest_batch_first(monkeypatch):
    # A first step at a new peak of memory pays for touching it; the timed steps should not.
    from slca_grpo.trainer import bench

    sizes = []
    real = bench.sft_backward

    def recording(model, examples, pad_id, **options):
        sizes.append(len(examples) * max(len(e.input_ids) for e in examples))
        return real(model, examples, pad_id, **options)

    monkeypatch.setattr(bench, "sft_backward", recording)
    overrides = ["data.n_train=60", "data.n_test=2", "sft.batch_size=2", "train.torch_threads=1"]
    config = load_yaml_config(RunConfig, resolve_config_path("demo-quick-tiny"), overrides)
    result = bench.run_bench(config, rl_steps=0, sft_steps=3, echo=False)
    assert len(sizes) == 4 and len(set(sizes)) > 1 and sizes[0] == max(sizes)
    assert result.sft and result.sft[0].floor.seconds > 0


def test_bench_refuses_negative_step_counts(capsys):
    from slca_grpo.cli import main

    assert main(["bench", "demo-quick-tiny", "--steps", "-1"]) == 2
    assert capsys.readouterr().err.strip().endswith("--steps must be >= 0, got -1")


def test_a_json_target_that_would_fail_or_overwrite_is_refused_before_measuring(tmp_path, capsys, monkeypatch):
    from slca_grpo.cli import main
    from slca_grpo.trainer import bench

    monkeypatch.setattr(bench, "run_bench", lambda *a, **k: pytest.fail("measured before refusing"))
    kept = tmp_path / "numbers.json"
    kept.write_text("mine")
    for target, message in (
        (tmp_path, f"--json {tmp_path} is a folder: give a file path to write"),
        (kept, f"--json {kept} exists; add --force to replace it, or name another file"),
    ):
        assert main(["bench", "demo-quick-tiny", "--json", str(target)]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    assert kept.read_text() == "mine"
    # What the writer takes stays allowed: a device written through, a file in a folder it makes.
    from slca_grpo.cli.bench import check_json_target

    check_json_target(Path(os.devnull), force=False)
    check_json_target(tmp_path / "nowhere" / "b.json", force=False)
    check_json_target(kept, force=True)


def test_every_matrix_product_is_counted_and_timed():
    from slca_grpo.trainer.bench import linear_shapes, matmul_rate

    model = LlamaForCausalLM(
        LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2)
    )
    shapes = linear_shapes(model)
    assert shapes[(16, 16)] == 2 * 4 and shapes[(16, 32)] == 2 * 2 and shapes[(32, 16)] == 2 and shapes[(16, 64)] == 1
    assert matmul_rate(shapes, torch.device("cpu"), False, rows=8) > 0
