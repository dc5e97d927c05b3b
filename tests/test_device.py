"""train.device: resolved once, validated, and a no-op on the CPU (auto and cpu train identically);
bf16: auto by what the device computes natively."""

from __future__ import annotations

import pytest
import torch

from slca_grpo.config import ConfigError, load_yaml_config
from slca_grpo.models import device as device_module
from slca_grpo.models.device import cpu_flags, native_bf16, peak_memory_gb, resolve_bf16, resolve_device
from slca_grpo.presets import resolve_config_path
from slca_grpo.trainer.batch import TokenBatch
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


X86_AVX2_ONLY = "processor\t: 0\nflags\t\t: fpu sse sse2 avx avx2 fma\nmodel name\t: AMD EPYC\n"
X86_AVX512_BF16 = "flags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n"
X86_AMX = "flags\t\t: avx2 avx512f amx_tile amx_bf16 amx_int8\n"
ARM_BF16 = "Features\t: fp asimd sve bf16 i8mm\n"
ARM_PLAIN = "Features\t: fp asimd evtstrm crc32\n"


@pytest.mark.parametrize(
    ("cpuinfo", "native"),
    [
        (X86_AVX2_ONLY, False),
        (X86_AVX512_BF16, True),
        (X86_AMX, True),
        (ARM_BF16, True),
        (ARM_PLAIN, False),
        ("", False),
    ],
)
def test_native_bf16_is_read_from_the_cpu_flags(cpuinfo, native):
    assert bool(cpu_flags(cpuinfo) & device_module.NATIVE_BF16_FLAGS) is native
    assert "avx2" in cpu_flags(X86_AVX2_ONLY) and "model" not in cpu_flags(X86_AVX2_ONLY)


@pytest.mark.parametrize("native", [False, True])
def test_bf16_auto_follows_the_device_and_an_explicit_true_where_it_is_slow_is_warned_once(native, monkeypatch, capsys):
    monkeypatch.setattr(device_module, "cpu_has_native_bf16", lambda: native)
    device_module._warn_slow_bf16.cache_clear()
    cpu = torch.device("cpu")
    assert native_bf16(cpu) is native
    assert resolve_bf16("auto", cpu, "rl.bf16") is native
    assert resolve_bf16(False, cpu, "rl.bf16") is False
    assert capsys.readouterr().err == ""
    for _ in range(2):
        assert resolve_bf16(True, cpu, "rl.bf16") is True  # an explicit choice is kept either way
    warnings = capsys.readouterr().err.splitlines()
    if native:
        assert warnings == []
    else:
        assert len(warnings) == 1 and warnings[0].startswith("warning: rl.bf16: true on a CPU without native bfloat16")
        assert "50-100x slower than float32" in warnings[0] and "rl.bf16: auto uses float32" in warnings[0]


def test_bf16_settings_are_true_false_or_auto_and_anything_else_names_the_key():
    path = resolve_config_path("demo-quick-tiny")
    assert load_yaml_config(RunConfig, path, ["rl.bf16=auto", "sft.bf16=true"]).rl.bf16 == "auto"
    assert load_yaml_config(RunConfig, path, ["sft.bf16=true"]).sft.bf16 is True
    assert RunConfig().rl.bf16 == RunConfig().sft.bf16 == "auto"  # the default everywhere
    for bad in ("maybe", "1", "bf16"):
        with pytest.raises(ConfigError, match=rf"^rl.bf16 must be true, false or auto, got '?{bad}'?$"):
            load_yaml_config(RunConfig, path, [f"rl.bf16={bad}"])


def test_the_bf16_option_of_local_model_commands_defaults_to_auto():
    import argparse

    from slca_grpo.cli.common import add_chat_format_arguments, chat_format_options

    parser = argparse.ArgumentParser()
    add_chat_format_arguments(parser)
    assert [chat_format_options(parser.parse_args(a))["bf16"] for a in ([], ["--bf16"], ["--bf16", "false"])] == [
        "auto",
        True,
        False,
    ]
    with pytest.raises(SystemExit):
        parser.parse_args(["--bf16", "yes"])


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


def test_gradient_checkpointing_gives_the_same_update(monkeypatch):
    import slca_grpo.engine.logprobs as batch_module
    from slca_grpo.chat.formatter import ChatFormatter
    from slca_grpo.models import build_tiny
    from slca_grpo.rewards.config import RewardConfig
    from slca_grpo.rewards.rule_judge import RuleJudge
    from slca_grpo.rollout.environment import ToolEnvironment
    from slca_grpo.rollout.loop import AgentLoop, RolloutConfig
    from slca_grpo.trainer.batch import pad_sequences
    from slca_grpo.trainer.rl import RLConfig, RLTrainer

    # With checkpointing the pass is padded (packed passes need the layout while a layer recomputes);
    # the packed pass rounds differently, and Adam's first step turns rounding-level gradient
    # differences into lr-sized ones: both runs here take the padded pass. The packed pass's
    # gradients are checked against the padded one's in tests/test_packed_attention.py.
    monkeypatch.setattr(batch_module, "packs", lambda model: False)
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
