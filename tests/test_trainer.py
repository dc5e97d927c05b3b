import json
import math
import re
import shutil

import pytest
import torch
from smoke_run import smoke_config

from slca_grpo.algos import policy_loss
from slca_grpo.chat.formatter import ChatFormatter
from slca_grpo.config import ConfigError, apply_overrides, from_dict, load_yaml_config
from slca_grpo.engine import token_logprobs
from slca_grpo.models import build_tiny
from slca_grpo.models.checkpoint import latest_checkpoint
from slca_grpo.presets import resolve_config_path
from slca_grpo.rewards.config import RewardConfig
from slca_grpo.rewards.rule_judge import RuleJudge
from slca_grpo.rollout.environment import ToolEnvironment
from slca_grpo.rollout.loop import AgentLoop, RolloutConfig
from slca_grpo.trainer.batch import pad_sequences
from slca_grpo.trainer.logger import read_metrics
from slca_grpo.trainer.optim import TrainingDiverged, lr_factor
from slca_grpo.trainer.rl import RLConfig, RLTrainer
from slca_grpo.trainer.run import RunConfig, train
from slca_grpo.trainer.run_folder import RunFolderTaken
from slca_grpo.trainer.sft import SFTConfig, SFTExample, build_example, sft_backward, sft_loss, train_sft


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    texts = ['<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call> hello world answer'] * 30
    return build_tiny("tiny", corpus_texts=texts, vocab_size=400)


def random_batch(tokenizer, rows=6, width=24, seed=0):
    generator = torch.Generator().manual_seed(seed)
    vocab = len(tokenizer) - 1
    sequences, masks = [], []
    for row in range(rows):
        length = width - row
        sequences.append(torch.randint(0, vocab, (length,), generator=generator).tolist())
        masks.append([0] * 8 + [1] * 5 + [0] * 3 + [1] * (length - 16))
    return pad_sequences(sequences, masks, pad_id=tokenizer.pad_token_id)


def test_logprobs_from_a_start_position_match_the_full_pass(tiny):
    model, tokenizer = tiny
    batch = random_batch(tokenizer)
    full = token_logprobs(model, batch.input_ids, batch.attention_mask)
    start = batch.first_learnable
    assert start == 8
    partial = token_logprobs(model, batch.input_ids, batch.attention_mask, start=start)
    assert torch.allclose(full[:, start:], partial[:, start:], atol=1e-5)
    assert (partial[:, :start] == 0).all()
    # Matches an explicit log-softmax over the full logits.
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    reference = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, batch.input_ids[:, 1:, None])[..., 0]
    assert torch.allclose(full[:, 1:], reference, atol=1e-5)


def test_one_update_lowers_the_surrogate_loss_on_a_fixed_batch(tiny):
    model, tokenizer = tiny
    model = type(model)(model.config)
    model.load_state_dict(tiny[0].state_dict())
    batch = random_batch(tokenizer, seed=1)
    advantages = torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, -2.0])[:, None] * batch.loss_mask
    formatter = ChatFormatter(tokenizer)
    loop = AgentLoop(model, formatter, ToolEnvironment(simulator=None), RolloutConfig(group_size=2))
    trainer = RLTrainer(
        model,
        None,
        loop,
        RuleJudge(),
        RewardConfig(),
        RLConfig(estimator="grpo", prompts_per_step=3, mini_batch_prompts=3, lr=1e-2, kl_coef=0.0),
    )
    with torch.no_grad():
        before_logp = token_logprobs(model, batch.input_ids, batch.attention_mask)
    before, _ = policy_loss(before_logp, before_logp, None, advantages, batch.loss_mask, kl_coef=0.0)
    metrics = trainer._update(batch, advantages, prompts=3, group_size=2, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        after_logp = token_logprobs(model, batch.input_ids, batch.attention_mask)
    after, _ = policy_loss(after_logp, before_logp, None, advantages, batch.loss_mask, kl_coef=0.0)
    assert float(after) < float(before)
    assert metrics["train/grad_norm"] > 0
    # Masked tokens received no credit: their log-probs moved only through shared weights, and the
    # learnable-token count is exactly the mask's.
    assert metrics["train/learnable_tokens"] == float(batch.loss_mask.sum())
    # The per-segment numbers the loss computed are kept: token counts per segment add up, and the
    # token-weighted mean advantage per segment is the batch's.
    for code, segment in ((1, "tool"), (2, "summary")):
        in_segment = batch.segment_ids == code
        assert metrics[f"train/{segment}_tokens"] == float(in_segment.sum())
        expected = float(advantages[in_segment].sum() / in_segment.sum().clamp(min=1))
        assert metrics[f"train/adv_token_mean/{segment}"] == pytest.approx(expected, abs=1e-6)
    assert metrics["train/tool_tokens"] + metrics["train/summary_tokens"] == metrics["train/learnable_tokens"]


def _sft_examples(tokenizer, lengths, seed=0):
    generator = torch.Generator().manual_seed(seed)
    vocab = len(tokenizer) - 1
    examples = []
    for index, length in enumerate(lengths):
        ids = torch.randint(0, vocab, (length,), generator=generator).tolist()
        learnable = 3 + index  # different counts per example: a per-pass mean would weight them wrongly
        examples.append(SFTExample(f"t{index}", ids, [0] * (length - learnable) + [1] * learnable))
    return examples


@pytest.mark.parametrize("micro_batch_size", [1, 2, 3])
def test_sft_micro_batches_give_the_one_pass_loss_and_gradients(tiny, micro_batch_size):
    model, tokenizer = tiny
    examples = _sft_examples(tokenizer, [20, 14, 17, 11, 9])
    pad_id = tokenizer.pad_token_id
    model.zero_grad(set_to_none=True)
    whole = sft_backward(model, examples, pad_id)
    expected = {name: p.grad.clone() for name, p in model.named_parameters()}
    with torch.no_grad():
        assert whole == pytest.approx(float(sft_loss(model, examples, pad_id)), rel=1e-6)
    model.zero_grad(set_to_none=True)
    split = sft_backward(model, examples, pad_id, micro_batch_size=micro_batch_size)
    assert split == pytest.approx(whole, rel=1e-5)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, expected[name], atol=1e-6, rtol=1e-4, msg=name)
    model.zero_grad(set_to_none=True)


def test_sft_micro_batches_train_as_whole_batches_do(tiny):
    model, tokenizer = tiny
    examples = _sft_examples(tokenizer, [20, 14, 17, 11, 9, 16], seed=1)
    runs = []
    for micro_batch_size in (0, 2):
        copy = type(model)(model.config)
        copy.load_state_dict(model.state_dict())
        config = SFTConfig(steps=3, batch_size=3, lr=5e-3, warmup_ratio=0.0, micro_batch_size=micro_batch_size)
        runs.append(train_sft(copy, examples, config, pad_id=tokenizer.pad_token_id))
    assert runs[1] == pytest.approx(runs[0], rel=1e-4)


def test_a_non_finite_micro_batch_loss_or_gradient_stops_sft_before_the_step(tiny, monkeypatch):
    from slca_grpo.trainer import sft

    model, tokenizer = tiny
    examples = _sft_examples(tokenizer, [12, 10, 9, 8])
    calls = []

    def nll(model, part, pad_id):
        calls.append(len(part))
        return torch.tensor(float("nan") if len(calls) == 2 else 1.0, requires_grad=True), torch.tensor(3.0)

    monkeypatch.setattr(sft, "_sft_nll", nll)
    config = SFTConfig(steps=1, batch_size=4, micro_batch_size=2)
    with pytest.raises(TrainingDiverged, match=r"SFT step 0: the loss is nan; no optimizer step was taken"):
        train_sft(model, examples, config, pad_id=tokenizer.pad_token_id)
    assert calls == [2, 2]
    monkeypatch.undo()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}

    def diverging(model, max_norm):
        raise TrainingDiverged("the gradient norm is inf; no optimizer step was taken")

    monkeypatch.setattr(sft, "clip_gradients", diverging)
    with pytest.raises(TrainingDiverged, match=r"SFT step 0: the gradient norm is inf; no optimizer step was taken"):
        train_sft(model, examples, config, pad_id=tokenizer.pad_token_id)
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters())
    model.zero_grad(set_to_none=True)
    with pytest.raises(ConfigError, match="micro_batch_size"):
        SFTConfig(micro_batch_size=-1)


@pytest.mark.parametrize("bf16", [False, True])
def test_sft_lowers_the_loss_on_assistant_tokens_only(tiny, bf16):
    from slca_grpo.data.synthetic import generate_tasks

    model, tokenizer = tiny
    model = type(model)(model.config)
    model.load_state_dict(tiny[0].state_dict())
    formatter = ChatFormatter(tokenizer, max_tool_response_tokens=64)
    tasks = generate_tasks(0, 3, "train")
    examples = [build_example(t, formatter) for t in tasks]
    assert all(e is not None for e in examples)
    for example, task in zip(examples, tasks):
        prompt = formatter.task_prompt_ids(task)
        assert example.input_ids[: len(prompt)] == prompt
        assert set(example.loss_mask[: len(prompt)]) == {0}
        assert example.loss_mask[-1] == 1 and example.input_ids[-1] == formatter.end_of_turn_id
    before = float(sft_loss(model, examples, formatter.pad_id))
    config = SFTConfig(steps=3, batch_size=3, lr=5e-3, warmup_ratio=0.0, max_length=4096, bf16=bf16)
    losses = train_sft(model, examples, config, pad_id=formatter.pad_id)
    after = float(sft_loss(model, examples, formatter.pad_id))
    # bf16 autocast rounds the matrix products, not the weights: the first loss is the float32 one
    # to bf16 precision, and the weights and their updates stay float32.
    assert losses[0] == pytest.approx(before, rel=1e-2 if bf16 else 1e-4)
    assert after < before
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_segment_gradient_diagnostics_split_the_policy_gradient(tiny):
    from slca_grpo.trainer.diagnostics import segment_gradient_cosine

    model, tokenizer = tiny
    batch = random_batch(tokenizer, seed=2)  # two runs per row: a tool segment, then a summary
    advantages = torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, -2.0])[:, None] * batch.loss_mask
    metrics = segment_gradient_cosine(
        model, lambda: token_logprobs(model, batch.input_ids, batch.attention_mask), advantages, batch
    )
    assert -1.0 <= metrics["diag/grad_cosine_tool_summary"] <= 1.0
    assert metrics["diag/grad_norm_tool"] > 0 and metrics["diag/grad_norm_summary"] > 0
    # The two segment losses add up to the whole loss, so |g_tool + g_sum| is the full gradient norm.
    model.zero_grad()
    logp = token_logprobs(model, batch.input_ids, batch.attention_mask)
    loss, _ = policy_loss(logp, logp.detach(), None, advantages, batch.loss_mask, kl_coef=0.0)
    loss.backward()
    full = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]).norm()
    t, u, c = (
        metrics["diag/grad_norm_tool"],
        metrics["diag/grad_norm_summary"],
        metrics["diag/grad_cosine_tool_summary"],
    )
    assert float(full) == pytest.approx((t * t + u * u + 2 * t * u * c) ** 0.5, rel=1e-4)
    model.zero_grad()
    # With only one segment present there is nothing to compare.
    only_summary = pad_sequences([[1, 2, 3, 4]], [[0, 1, 1, 1]], pad_id=0)
    assert (
        segment_gradient_cosine(
            model,
            lambda: token_logprobs(model, only_summary.input_ids, only_summary.attention_mask),
            torch.ones(1, 4),
            only_summary,
        )
        == {}
    )


def test_schedules():
    assert lr_factor(0, "constant", 10, 0) == 1.0
    assert lr_factor(0, "cosine", 10, 2) == pytest.approx(0.5)
    assert lr_factor(2, "cosine", 10, 2) == pytest.approx(1.0)
    assert lr_factor(10, "cosine", 10, 2) == pytest.approx(0.0, abs=1e-12)
    assert lr_factor(6, "linear", 10, 2) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="unknown schedule"):
        lr_factor(0, "exp", 10, 0)


def test_config_loading_checks_keys_and_types(tmp_path):
    config = load_yaml_config(
        RunConfig,
        resolve_config_path("demo-quick-tiny"),
        ["rl.estimator=grpo", "rollout.group_size=4", "reward.weights.fmt=0.2"],
    )
    assert config.rl.estimator == "grpo" and config.rollout.group_size == 4 and config.reward.weights.fmt == 0.2
    with pytest.raises(ConfigError, match="rl.estimatr"):
        apply_overrides(config, ["rl.estimatr=grpo"])
    with pytest.raises(ConfigError, match="rollout.group_size: expected an integer"):
        apply_overrides(config, ["rollout.group_size=many"])
    with pytest.raises(ConfigError, match="unknown setting"):
        from_dict(RunConfig, {"modle": {}})
    bad = tmp_path / "bad.yaml"
    bad.write_text("rl: [1, 2\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_yaml_config(RunConfig, bad)
    for preset in (
        "demo",
        "demo-quick",
        "demo-quick-tiny",
        "demo-smollm2",
        "smollm2",
        "qwen2.5-7b",
        "qwen2.5-0.5b",
        "qwen2.5-7b-lora",
    ):
        load_yaml_config(RunConfig, resolve_config_path(preset))


@pytest.mark.slow
def test_end_to_end_run_and_exact_resume(tmp_path, capsys):
    full_dir, resumed_dir = tmp_path / "full", tmp_path / "resumed"
    summary = train(smoke_config(full_dir), echo=True)
    assert [e["step"] for e in summary["evals"]] == [-1, 1, 2]
    shown = capsys.readouterr().out
    # Long silent parts are announced, and every line of progress says how far and how long.
    assert re.search(r"^\[sft\] loss=\S+ \[\d+/\d+, (?:\d+m)?\d+s", shown, flags=re.M), shown
    assert "evaluating " in shown and "held-out tasks (before RL) ..." in shown
    assert re.search(r"^step 0: score=\S+ .*\[1/3, (?:\d+m)?\d+s, ETA (?:\d+m)?\d+s\]$", shown, flags=re.M), shown
    assert re.search(r"^step 2: .*\[3/3, (?:\d+m)?\d+s\]$", shown, flags=re.M), shown
    assert (full_dir / "sft" / "config.json").exists()
    metrics = read_metrics(full_dir / "metrics.jsonl")
    steps = [m for m in metrics if "reward/score" in m]
    assert [m["step"] for m in steps] == [0, 1, 2]
    for key in (
        "reward/tool",
        "reward/summary",
        "adv/tool_present",
        "train/kl",
        "train/clip_frac",
        "train/grad_norm",
        "rollout/calls",
        "throughput/rollout_tokens_per_s",
    ):
        assert any(key in m for m in steps), key
    # Simulate a crash after step 1: keep the run up to that checkpoint, then resume.
    shutil.copytree(full_dir, resumed_dir)
    checkpoints = resumed_dir / "checkpoints"
    shutil.rmtree(checkpoints / "step-000002")
    (checkpoints / "latest").write_text("step-000001\n")
    assert latest_checkpoint(checkpoints).name == "step-000001"
    # Asked to stop where it stands (2 steps done), the run takes no step and says it has done 2.
    stopped = train(smoke_config(resumed_dir, **{"rl.steps": 2}), resume=True, echo=False)
    assert stopped["steps"] == 2 and [e["step"] for e in stopped["evals"]] == [-1, 1]
    assert max(m["step"] for m in read_metrics(resumed_dir / "metrics.jsonl")) == 1
    # Resumed when finished, it does nothing and writes nothing (no metrics, summary or provenance anew).
    written = {p: p.read_bytes() for p in resumed_dir.rglob("*") if p.is_file() and p.name != ".lock"}
    assert train(smoke_config(resumed_dir, **{"rl.steps": 2}), resume=True, echo=False) == stopped
    assert {p: p.read_bytes() for p in resumed_dir.rglob("*") if p.is_file() and p.name != ".lock"} == written
    with pytest.raises(ConfigError, match=r"rl.steps: .* has done 2 steps, so rl.steps=1 would undo some"):
        train(smoke_config(resumed_dir, **{"rl.steps": 1}), resume=True, echo=False)
    # Extended to 3 steps (a constant learning rate), it takes step 2 as the 3-step run did.
    resumed = train(smoke_config(resumed_dir), resume=True, echo=False)
    replayed = [m for m in read_metrics(resumed_dir / "metrics.jsonl") if m.get("step") == 2 and "reward/score" in m]
    assert len(replayed) == 1  # the crashed run's step-2 line was dropped, not repeated
    original = steps[2]
    for key in (
        "reward/score",
        "reward/tool",
        "train/pg_loss",
        "train/kl",
        "train/grad_norm",
        "rollout/generated_tokens",
    ):
        assert replayed[-1][key] == pytest.approx(original[key], rel=1e-5, abs=1e-7), key
    assert resumed["final_eval"]["score"] == pytest.approx(summary["final_eval"]["score"], abs=1e-9)
    assert json.loads((resumed_dir / "summary.json").read_text())["steps"] == 3
    assert (resumed_dir / "sft_metrics.jsonl").read_text() == (full_dir / "sft_metrics.jsonl").read_text()
    # Evaluated again through slca eval indomain --run, the last checkpoint and the start give what
    # the run recorded: one evaluation path.
    from slca_grpo.cli import main

    for checkpoint, items, recorded in (
        ([], "eval_items.jsonl", "eval_summary.json"),
        (["--checkpoint", "start"], "eval_start_items.jsonl", None),
    ):
        again = tmp_path / f"again{len(checkpoint)}"
        assert main(["eval", "indomain", "--run", str(full_dir), *checkpoint, "--out", str(again)]) == 0
        assert "the same as the run recorded at that step" in capsys.readouterr().out
        read = lambda path: [json.loads(line) for line in path.read_text().splitlines()]  # noqa: E731
        assert read(again / "per_item.jsonl") == read(full_dir / items)
        if recorded:
            summary_again = json.loads((again / "summary.json").read_text())
            for key, value in json.loads((full_dir / recorded).read_text()).items():
                assert summary_again[key] == value, key
    assert main(["eval", "indomain", "--run", str(full_dir), "--checkpoint", "7", "--out", str(tmp_path / "x")]) == 2
    assert "holds no checkpoint of step 7 (it holds: 0, 1, 2)" in capsys.readouterr().err
    assert main(["eval", "indomain", "--run", str(full_dir), "--max-turns", "3", "--out", str(tmp_path / "y")]) == 2
    assert "--run evaluates with the run's own settings; leave out --max-turns" in capsys.readouterr().err
    items = (full_dir / "eval_start_items.jsonl").read_text().replace('"task_id": "', '"task_id": "other-', 1)
    (full_dir / "eval_start_items.jsonl").write_text(items)  # as if today's code made other tasks
    assert main(["eval", "indomain", "--run", str(full_dir), "--out", str(tmp_path / "z")]) == 2
    assert "today's code makes other held-out tasks than" in capsys.readouterr().err
    # The threads it computed with are recorded, and a resume with the same ones adds nothing.
    recorded = json.loads((resumed_dir / "provenance.json").read_text())
    assert recorded["threads"]["torch_threads"] == torch.get_num_threads() and "threads_resumed" not in recorded


def test_a_decaying_schedule_or_a_warm_up_keeps_a_runs_steps(tmp_path):
    from slca_grpo.trainer.run_folder import check_steps_change

    check_steps_change(tmp_path, 2, 2, smoke_config(tmp_path, **{"rl.steps": 4}))  # constant: it may go on
    for change in ({"rl.schedule": "cosine"}, {"rl.schedule": "linear"}, {"rl.warmup_ratio": 0.1}):
        with pytest.raises(ConfigError, match=r"rl.steps: 2 there, 4 now; a run's steps change only with"):
            check_steps_change(tmp_path, 2, 2, smoke_config(tmp_path, **{"rl.steps": 4, **change}))
        check_steps_change(tmp_path, 2, 2, smoke_config(tmp_path, **{"rl.steps": 2, **change}))  # unchanged


@pytest.mark.slow
def test_bf16_autocasts_rl_rollouts_and_evaluation_and_keeps_float32_weights(tmp_path, monkeypatch, capsys):
    from slca_grpo.models import device

    device._warn_slow_bf16.cache_clear()
    autocast_during_rollouts = []
    run_rollouts = AgentLoop.run

    def recording_run(self, *args, **kwargs):
        autocast_during_rollouts.append(torch.is_autocast_enabled("cpu"))
        return run_rollouts(self, *args, **kwargs)

    monkeypatch.setattr(AgentLoop, "run", recording_run)
    out_dir = tmp_path / "bf16"
    # GRPO on a summary reward replaced by a random rating in every rollout (the study's noise, drawn
    # from the seed alone): no group ties, whatever the rollouts are, so the update has a gradient.
    overrides = {
        "rl.bf16": "true",
        "sft.bf16": "true",
        "rl.steps": 2,
        "rl.estimator": "grpo",
        "reward.summary_noise_prob": 1.0,
    }
    train(smoke_config(out_dir, **overrides), echo=False)
    steps = [m for m in read_metrics(out_dir / "metrics.jsonl") if "reward/score" in m]
    # Gradients flow under bf16.
    assert len(steps) == 2 and all(math.isfinite(m["train/grad_norm"]) for m in steps)
    assert any(m["train/grad_norm"] > 0 for m in steps)
    # The two RL steps' rollouts and the held-out evaluations (before RL, after the last step) all run
    # in the precision RL trains in.
    assert len(autocast_during_rollouts) >= 4 and all(autocast_during_rollouts)
    # This CPU counts as one without native bf16 (conftest), so the explicit true is warned about, once per key.
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
    assert [w.split(":")[1].strip() for w in warnings] == ["sft.bf16", "rl.bf16"]
    assert all("50-100x slower than float32" in w and "auto" in w for w in warnings)
    saved = json.loads((out_dir / "checkpoints" / "step-000001" / "model" / "config.json").read_text())
    assert saved.get("dtype", saved.get("torch_dtype")) == "float32"


def test_cli_reports_bad_configs_and_data_without_a_traceback(tmp_path, capsys):
    from slca_grpo.cli import main

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\n')
    out = f"train.out_dir={tmp_path / 'run'}"
    assert main(["train", "demo-quick-tiny", "--set", "rl.estimator=foo", "--set", out]) == 2
    assert "unknown estimator(s) foo" in capsys.readouterr().err
    assert main(["train", "demo-quick-tiny", "--set", f"data.train={bad}", "--set", out]) == 2
    assert f"{bad}:1: 'messages'" in capsys.readouterr().err
    assert main(["train", "demo-quick-tiny", "--set", f"data.train={tmp_path / 'missing.jsonl'}", "--set", out]) == 2
    assert f"data.train: {tmp_path / 'missing.jsonl'} does not exist." in capsys.readouterr().err
    assert main(["demo", "--quick", "--estimators", "nope", "--out", str(tmp_path / "demo")]) == 2
    assert not (tmp_path / "demo" / "sft").exists()  # refused before any training
    assert main(["demo", "--model", "smollm2", "--quick", "--out", str(tmp_path / "demo")]) == 2
    assert not (tmp_path / "demo" / "sft").exists()
    assert main(["train", "no-such-preset"]) == 2


def test_logprobs_at_selected_positions_match_the_full_pass(tiny):
    model, tokenizer = tiny
    batch = random_batch(tokenizer)
    full = token_logprobs(model, batch.input_ids, batch.attention_mask)
    positions = batch.loss_mask > 0
    selected = token_logprobs(
        model, batch.input_ids, batch.attention_mask, start=batch.first_learnable, positions=positions
    )
    assert torch.allclose(selected, full * positions, atol=1e-5)
    assert (selected[~positions] == 0).all()
    # Gradients flow through the selected positions only, and equal those of the full pass.
    model.zero_grad()
    (selected * positions).sum().backward()
    fast = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    (token_logprobs(model, batch.input_ids, batch.attention_mask) * positions).sum().backward()
    assert all(torch.allclose(a, p.grad, atol=1e-5) for a, p in zip(fast, model.parameters()))
    model.zero_grad()


@pytest.mark.parametrize("min_vocab", [0, 10**9])  # the fused cross-entropy form, the logsumexp form
def test_selected_logprobs_are_the_log_softmax_at_the_target(monkeypatch, min_vocab):
    import slca_grpo.engine.logprobs as batch_module

    monkeypatch.setattr(batch_module, "FUSED_LOGPROB_MIN_VOCAB", min_vocab)
    # By hand: softmax([0, ln 3]) = [1/4, 3/4]; at temperature 1/2 the logits double: [1/10, 9/10].
    two = torch.tensor([[0.0, math.log(3.0)], [0.0, math.log(3.0)]])
    assert torch.allclose(
        batch_module._selected_logprobs(two, torch.tensor([1, 0]), 1.0), torch.tensor([math.log(0.75), math.log(0.25)])
    )
    assert torch.allclose(
        batch_module._selected_logprobs(two, torch.tensor([1, 0]), 0.5), torch.tensor([math.log(0.9), math.log(0.1)])
    )
    # Values and gradients against float64 log-softmax, [rows, positions, vocab] as the trainer passes them.
    generator = torch.Generator().manual_seed(0)
    logits = (torch.randn(3, 5, 300, generator=generator) * 4).requires_grad_()
    targets = torch.randint(0, 300, (3, 5), generator=generator)
    weights = torch.randn(3, 5, generator=generator)
    got = batch_module._selected_logprobs(logits, targets, 0.7)
    (got * weights).sum().backward()
    reference_logits = logits.detach().double().requires_grad_()
    expected = torch.log_softmax(reference_logits / 0.7, dim=-1).gather(-1, targets[..., None]).squeeze(-1)
    (expected * weights.double()).sum().backward()
    assert torch.allclose(got.double(), expected, atol=1e-5)
    assert torch.allclose(logits.grad.double(), reference_logits.grad, atol=1e-6)


def test_selected_positions_fall_back_for_heads_that_are_not_plain(tiny, monkeypatch):
    import slca_grpo.engine.attention as attention_module

    model, tokenizer = tiny
    batch = random_batch(tokenizer)
    positions = batch.loss_mask > 0
    monkeypatch.setattr(attention_module, "PLAIN_HEAD_MODEL_TYPES", frozenset())
    fallback = token_logprobs(model, batch.input_ids, batch.attention_mask, start=3, positions=positions)
    full = token_logprobs(model, batch.input_ids, batch.attention_mask)
    assert torch.allclose(fallback, full * positions, atol=1e-5)


def test_length_bucketed_batches_cover_every_example_once_with_little_padding():
    import random

    from slca_grpo.trainer.sft import length_bucketed_batches

    lengths = [random.Random(i).randrange(10, 500) for i in range(103)]
    batches = length_bucketed_batches(lengths, batch_size=8, bucket_batches=4, rng=random.Random(0))
    assert sorted(i for b in batches for i in b) == list(range(103))
    assert all(1 <= len(b) <= 8 for b in batches)
    padded = sum(len(b) * max(lengths[i] for i in b) for b in batches)
    plain = length_bucketed_batches(lengths, batch_size=8, bucket_batches=1, rng=random.Random(0))
    assert padded < sum(len(b) * max(lengths[i] for i in b) for b in plain)
    assert batches == length_bucketed_batches(lengths, batch_size=8, bucket_batches=4, rng=random.Random(0))
    with pytest.raises(ValueError):
        length_bucketed_batches(lengths, batch_size=0, bucket_batches=4, rng=random.Random(0))


def test_an_sft_checkpoint_is_reused_only_for_the_same_configuration(tmp_path):
    from slca_grpo.trainer.sft_cache import sft_fingerprint, sft_is_current, sft_settings

    config = smoke_config(tmp_path)
    (tmp_path / "sft").mkdir()
    (tmp_path / "sft" / "config.json").write_text("{}")
    assert not sft_is_current(config, tmp_path)  # no summary: unknown provenance
    (tmp_path / "sft_summary.json").write_text(json.dumps({"fingerprint": sft_fingerprint(config)}))
    assert sft_is_current(config, tmp_path)
    # RL-only settings do not matter to SFT; data, model and SFT settings do.
    assert sft_is_current(smoke_config(tmp_path, **{"rl.steps": 9, "rl.estimator": "grpo"}), tmp_path)
    for change in ({"sft.steps": 5}, {"data.n_train": 41}, {"model.name": "small"}, {"train.seed": 1}):
        assert not sft_is_current(smoke_config(tmp_path, **change), tmp_path), change
    (tmp_path / "sft_summary.json").write_text("{not json")
    assert not sft_is_current(config, tmp_path)
    # Summaries keep the settings themselves: a key added to a section since (saved without it)
    # counts as its default instead of making the checkpoint stale.
    settings = sft_settings(config)
    del settings["simulator"]["backend_options"]
    (tmp_path / "sft_summary.json").write_text(json.dumps({"fingerprint": "older", "settings": settings}))
    assert sft_is_current(config, tmp_path)
    for change in ({"sft.lr": 1e-3}, {"simulator.seed": 3}, {"rollout.max_tool_response_tokens": 64}):
        assert not sft_is_current(smoke_config(tmp_path, **change), tmp_path), change
    # The final-answer notice is in the examples only when sft.notice_share draws some: then its text matters.
    assert sft_is_current(smoke_config(tmp_path, **{"rollout.final_answer_notice": "Answer."}), tmp_path)
    noticed = smoke_config(tmp_path, **{"sft.notice_share": 0.5})
    assert not sft_is_current(noticed, tmp_path)
    (tmp_path / "sft_summary.json").write_text(json.dumps({"settings": sft_settings(noticed)}))
    assert sft_is_current(noticed, tmp_path)
    reworded = smoke_config(tmp_path, **{"sft.notice_share": 0.5, "rollout.final_answer_notice": "Answer."})
    assert not sft_is_current(reworded, tmp_path)


def test_the_run_description_leaves_an_api_key_out_and_is_what_every_reader_compares(tmp_path):
    from slca_grpo.config import save_yaml_config
    from slca_grpo.trainer.run_config import run_settings
    from slca_grpo.trainer.run_folder import settings_difference
    from slca_grpo.trainer.sft_cache import sft_fingerprint, sft_settings

    config = smoke_config(tmp_path, **{"simulator.openai.api_key": "sk-secret"})
    settings = run_settings(config)
    assert settings["simulator"]["openai"]["api_key"] is None and config.simulator.openai.api_key == "sk-secret"
    assert "sk-secret" not in json.dumps(settings) and "sk-secret" not in json.dumps(sft_settings(config))
    saved = tmp_path / "config.yaml"
    save_yaml_config(settings, saved)
    assert "sk-secret" not in saved.read_text()
    # The key comes from the environment on resume: another key is not another run; another seed is.
    assert settings_difference(saved, smoke_config(tmp_path, **{"simulator.openai.api_key": "sk-other"})) is None
    assert settings_difference(saved, smoke_config(tmp_path, **{"train.seed": 1})) == "train.seed: 0 there, 1 now"
    assert sft_fingerprint(config) == sft_fingerprint(smoke_config(tmp_path))


@pytest.mark.parametrize("architecture", ["tiny", "smollm2-shaped"])
def test_rollouts_sharing_a_prompt_run_it_once_with_the_same_logprobs_and_gradients(tiny, architecture):
    model, tokenizer = tiny
    if architecture == "smollm2-shaped":
        from scripted import smollm2_shaped_model

        model = smollm2_shaped_model(len(tokenizer))
    generator = torch.Generator().manual_seed(0)
    vocab = len(tokenizer) - 1
    sequences, masks = [], []
    for group in range(3):  # 3 prompts of different lengths × 4 rollouts with tool-response gaps
        prompt = torch.randint(1, vocab, (12 + 5 * group,), generator=generator).tolist()
        for rollout in range(4):
            response = torch.randint(1, vocab, (6 + 3 * rollout + group,), generator=generator).tolist()
            sequences.append(prompt + response)
            masks.append([0] * len(prompt) + [1, 1, 1, 0, 0] + [1] * (len(response) - 5))
    batch = pad_sequences(sequences, masks, pad_id=tokenizer.pad_token_id)
    positions = batch.loss_mask > 0
    shapes = []
    hook = model.model.register_forward_pre_hook(
        lambda module, args, kwargs: shapes.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )
    try:
        shared = token_logprobs(
            model, batch.input_ids, batch.attention_mask, start=batch.first_learnable, positions=positions
        )
    finally:
        hook.remove()
    # Packed: the three distinct prompts end to end in one row, then the twelve rollouts' rests.
    assert shapes[0] == (1, 12 + 17 + 22)
    assert shapes[1] == (1, sum(int(m.sum()) for m in batch.attention_mask) - 4 * (12 + 17 + 22))
    model.zero_grad()
    shared.sum().backward()
    shared_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    full = token_logprobs(model, batch.input_ids, batch.attention_mask) * positions
    full.sum().backward()
    assert torch.allclose(shared, full, atol=1e-5)
    assert all(torch.allclose(a, p.grad, atol=1e-5) for a, p in zip(shared_grads, model.parameters()))
    model.zero_grad()


def test_demo_presets_by_model_and_size():
    from slca_grpo.demo import demo_config, demo_preset

    assert [demo_preset(q, m) for q, m in ((True, "tiny"), (False, "tiny"), (False, "smollm2"))] == [
        "demo-quick-tiny",
        "demo",
        "demo-smollm2",
    ]
    assert (demo_preset(True), demo_preset(False)) == ("demo-quick", "demo")  # the reader, a tiny model
    assert demo_config(True).model.name == "reader"
    for quick, model in ((True, "smollm2"), (False, "reader")):
        with pytest.raises(ConfigError, match=f"the {model} demo exists as"):
            demo_preset(quick, model)
    smol = demo_config(False, model="smollm2")
    assert smol.model.name == "smollm2" and smol.sft.bf16 == smol.rl.bf16 == "auto"
    with pytest.raises(ConfigError, match="demo model must be one of"):
        demo_preset(False, "gpt2")


def test_demo_evaluates_the_shared_start_once(tmp_path, monkeypatch):
    import slca_grpo.trainer.run_eval as run_eval
    from slca_grpo.demo import run_demo

    calls = []
    real = run_eval.evaluate_loop

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(run_eval, "evaluate_loop", counting)
    overrides = (
        "data.n_train=40",
        "data.n_test=4",
        "sft.steps=3",
        "sft.batch_size=4",
        "rl.steps=1",
        "rl.prompts_per_step=2",
        "rl.mini_batch_prompts=2",
        "rollout.group_size=2",
        "rollout.max_response_tokens=24",
        "train.eval_tasks=4",
        "train.eval_every=0",
    )
    report = run_demo(tmp_path, quick=True, model="tiny", overrides=overrides, echo=False)
    # held-out, probe set greedy and probe set sampled: the start once, then each estimator's end
    assert len(calls) == 9
    summaries = [json.loads((tmp_path / e / "summary.json").read_text()) for e in ("grpo", "slca")]
    starts = [summary["evals"][0] for summary in summaries]
    assert starts[0]["step"] == -1 and starts[0] == starts[1] == report["start_eval"]
    probes = [summary["probes"][0] for summary in summaries]
    assert probes[0]["step"] == -1 and probes[0] == probes[1] == report["start_probe"]
    # The folder now holds a demo: another one is refused before any work, unless --force replaces it.
    (tmp_path / "grpo" / "stale.txt").write_text("from the first demo")
    written = (tmp_path / "report.json").read_bytes()
    with pytest.raises(
        RunFolderTaken, match=r"already holds a run \(sft_metrics.jsonl, sft/, report.md, report.json\); add --force"
    ):
        run_demo(tmp_path, quick=True, model="tiny", overrides=overrides, echo=False)
    assert (tmp_path / "report.json").read_bytes() == written and (tmp_path / "grpo" / "stale.txt").exists()
    sft_weights = (tmp_path / "sft" / "model.safetensors").stat().st_mtime_ns
    run_demo(tmp_path, quick=True, model="tiny", overrides=overrides, echo=False, force=True)
    assert not (tmp_path / "grpo" / "stale.txt").exists()  # the RL runs were replaced
    assert (tmp_path / "sft" / "model.safetensors").stat().st_mtime_ns == sft_weights  # the same SFT reused


def test_each_evaluation_of_a_run_uses_fresh_simulator_sessions(tmp_path, monkeypatch):
    # A later evaluation reusing an earlier one's session names would meet the records its calls
    # created, so evaluating the same model twice could give different numbers.
    import slca_grpo.eval.indomain as indomain

    prefixes = []
    real_run = AgentLoop.run

    def spy(self, tasks, **kwargs):
        if kwargs.get("group_size") == 1:
            prefixes.append(kwargs["session_prefix"])
        return real_run(self, tasks, **kwargs)

    monkeypatch.setattr(AgentLoop, "run", spy)
    train(smoke_config(tmp_path / "run", **{"train.eval_every": 1, "rl.steps": 2}), echo=False)
    # held-out: start, after step 0, after step 1; probe set: start, after the last step, each
    # greedy and sampled (its 4 draws a task fill two batches, each a session prefix of its own)
    assert len(prefixes) == 9 and len(set(prefixes)) == 9
    assert sum(prefix.startswith("probe-sampled-") for prefix in prefixes) == 4
    assert indomain.evaluate_loop.__kwdefaults__["session_prefix"] == "eval"


def test_a_rollout_cut_off_on_a_call_trains_its_call_tokens_on_the_tool_reward():
    """The last run of a rollout that ended on an unanswered call is a tool segment: under SLCA its
    call tokens get the tool advantage, and no summary reward (noise included) reaches them."""
    from slca_grpo.algos import SEG_SUMMARY, SEG_TOOL, compute_advantages
    from slca_grpo.datatypes import Trajectory, Turn
    from slca_grpo.trainer.batch import trajectory_batch

    call = '<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>'

    def rollout(last: str, truncated: bool) -> Trajectory:
        return Trajectory(
            task_id="t",
            prompt_ids=[5, 6],
            response_ids=[10, 11, 12, 20, 21, 30, 31],
            response_mask=[1, 1, 1, 0, 0, 1, 1],
            turns=[Turn(call), Turn(last)],
            truncated=truncated,
        )

    trajectories = [rollout("The answer.", False), rollout(call, True), rollout("Done.", False)]
    batch = trajectory_batch(trajectories, pad_id=0, estimator="slca")
    last_run = slice(7, 9)  # prompt (2) + first call (3) + tool response (2)
    assert batch.segment_ids[0, last_run].tolist() == [SEG_SUMMARY] * 2
    assert batch.segment_ids[1, last_run].tolist() == [SEG_TOOL] * 2
    rewards = {"score": [1.0, 0.4, 0.6], "tool": [0.9, 0.4, 0.2], "summary": [0.1, 0.0, 0.4], "no_call": [False] * 3}

    def advantages(summary: list[float]) -> torch.Tensor:
        return compute_advantages(
            "slca", group_ids=[0, 0, 0], segment_ids=batch.segment_ids, rewards={**rewards, "summary": summary}
        )

    clean, noisy = advantages([0.1, 0.0, 0.4]), advantages([0.9, 1.0, 0.0])
    # Every call token of the cut-off rollout carries its tool advantage, whatever R_sum says.
    tool_values = torch.tensor([0.9, 0.4, 0.2], dtype=torch.float64)
    expected = float((0.4 - tool_values.mean()) / (tool_values.std() + 1e-6))
    assert clean[1, 2:9][batch.loss_mask[1, 2:9] > 0].tolist() == pytest.approx([expected] * 5)
    assert torch.equal(clean[1], noisy[1])
    assert not torch.equal(clean[0, last_run], noisy[0, last_run])  # an answer's tokens do follow R_sum


@pytest.mark.parametrize("value", [0.5, 1, 1.0, 1.0001, 3, float("inf"), float("nan"), None])
def test_dual_clip_validation_matches_the_loss(value):
    logp = torch.zeros(1, 2)
    try:
        policy_loss(logp, logp, None, torch.ones(1, 2), torch.ones(1, 2), dual_clip=value)
        loss_accepts = True
    except ValueError:
        loss_accepts = False
    try:
        RLConfig(dual_clip=value)
        config_accepts = True
    except ConfigError as exc:
        config_accepts = False
        assert "dual_clip must be a finite number > 1 (null turns it off)" in str(exc)
    assert config_accepts == loss_accepts


def test_dual_clip_can_be_switched_off_from_config(tmp_path):
    config = load_yaml_config(RunConfig, resolve_config_path("demo-quick-tiny"), ["rl.dual_clip=null"])
    assert config.rl.dual_clip is None
    with pytest.raises(ConfigError, match="dual_clip must be a finite number > 1"):
        apply_overrides(config, ["rl.dual_clip=1"])


def test_old_and_reference_logprobs_are_computed_without_dropout(tiny):
    """With dropout in the model (LoRA's, or its own), the frozen log-probs the ratio and KL are
    measured against must not carry dropout noise: they are computed in eval mode."""
    model, tokenizer = tiny
    model = type(model)(model.config)
    model.load_state_dict(tiny[0].state_dict())
    for layer in model.model.layers:
        layer.self_attn.attention_dropout = 0.5
    batch = random_batch(tokenizer, seed=3)
    loop = AgentLoop(model, ChatFormatter(tokenizer), ToolEnvironment(simulator=None), RolloutConfig(group_size=2))
    trainer = RLTrainer(model, None, loop, RuleJudge(), RewardConfig(), RLConfig(estimator="grpo", kl_coef=0.0))
    model.train()
    model.eval()
    with torch.no_grad():
        expected = trainer._logprobs(model, batch)
    model.train()
    frozen = trainer._frozen_logprobs(model, batch)
    assert model.training  # put back as it was
    assert torch.allclose(frozen, expected, atol=1e-6)


def test_runs_without_progress_bars_silence_the_weight_loading_bars_too(tmp_path):
    from transformers.utils import logging as transformers_logging

    from slca_grpo.trainer.build import quiet_transformers

    transformers_logging.enable_progress_bar()  # an earlier run in this process may have turned them off
    try:
        quiet_transformers(smoke_config(tmp_path, **{"train.progress": True}))
        assert transformers_logging.is_progress_bar_enabled()
        quiet_transformers(smoke_config(tmp_path, **{"train.progress": False}))
        assert not transformers_logging.is_progress_bar_enabled()
    finally:
        transformers_logging.enable_progress_bar()


def test_importing_the_package_keeps_mkl_from_choosing_fewer_threads_under_load():
    import os
    import subprocess
    import sys

    names = ("MKL_DYNAMIC", "MKL_CBWR", "OMP_DYNAMIC")
    show = f"import os, slca_grpo; print(*(os.environ[name] for name in {names}))"
    clean = {k: v for k, v in os.environ.items() if k not in names}
    done = subprocess.run([sys.executable, "-c", show], env=clean, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["FALSE", "AUTO", "FALSE"]
    chosen = {**clean, "MKL_DYNAMIC": "TRUE"}  # a user's own choice is kept
    done = subprocess.run([sys.executable, "-c", show], env=chosen, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["TRUE", "AUTO", "FALSE"]
