"""SLCA-GRPO inside TRL: the integration against TRL's own GRPOTrainer and against our trainer's math,
on the same rollouts of the shipped reader."""

import copy
import dataclasses
import os
import textwrap
import time
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("trl")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from transformers import TrainerCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from slca_grpo.algos import AdvantageConfig, estimator_spec, list_estimators, policy_loss, unregister_estimator  # noqa: E402
from slca_grpo.config import ConfigError  # noqa: E402
from slca_grpo.data.synthetic import generate_tasks  # noqa: E402
from slca_grpo.data.tasks import TaskFormatError  # noqa: E402
from slca_grpo.engine import token_logprobs  # noqa: E402
from slca_grpo.integrations.trl import (  # noqa: E402
    TRL_PIN,
    AgentLoopRollouts,
    SLCATrainer,
    TaskRewards,
    TRLVersionError,
    advantage_settings,
    check_supported,
    completion_text,
    require_trl,
    rollout_fields,
    task_dataset,
    task_rows,
)
from slca_grpo.integrations.trl import data as trl_data  # noqa: E402
from slca_grpo.integrations.trl import rollouts as trl_rollouts  # noqa: E402
from slca_grpo.integrations.trl.rewards import ENDING_FIELDS, SIMULATOR_FAULT_FIELD  # noqa: E402
from slca_grpo.integrations.trl.rollouts import group_runs, model_context, unapplied_settings  # noqa: E402
from slca_grpo.models import load_model  # noqa: E402
from slca_grpo.rewards import list_reward_families, unregister_reward_family  # noqa: E402
from slca_grpo.rewards.batch import compute_rewards  # noqa: E402
from slca_grpo.rollout.loop import RolloutConfig  # noqa: E402
from slca_grpo.trainer.batch import trajectory_batch  # noqa: E402

GROUP = 4
BETA = 0.05


@pytest.fixture(scope="module")
def reader():
    return load_model("reader")


@pytest.fixture(scope="module")
def tasks():
    # Calls of several shapes, and an irrelevant request, so both segments and no-call rollouts occur.
    return generate_tasks(3, 3)


def config(tmp_path, **overrides):
    settings = dict(
        output_dir=str(tmp_path / "trl"),
        use_cpu=True,
        bf16=False,
        report_to=[],
        num_generations=GROUP,
        per_device_train_batch_size=GROUP * 3,
        max_completion_length=96,
        learning_rate=1e-4,
        beta=BETA,
        delta=3.0,
        loss_type="bnpo",
        save_strategy="no",
        logging_steps=1,
        seed=7,
    )
    settings.update(overrides)
    return GRPOConfig(**settings)


def rows_for(tasks):
    """TRL's batch: each task's row repeated GROUP times (copies: TRL writes into them)."""
    return [dict(row) for row in task_rows(tasks) for _ in range(GROUP)]


@pytest.fixture(scope="module")
def recorded(reader, tasks):
    """One batch of real rollouts of the reader (two turns at most), as TRL's rollout_func returns them."""
    model, tokenizer = reader
    from slca_grpo.chat.chat_format import build_formatter

    rollouts = AgentLoopRollouts(rollout=RolloutConfig(max_turns=2, max_tool_response_tokens=64))
    rollouts.formatter = build_formatter(tokenizer)
    rows = [task for task in tasks for _ in range(GROUP)]
    settings = RolloutConfig(group_size=GROUP, max_turns=2, max_response_tokens=96, max_tool_response_tokens=64)
    trajectories = rollouts.run(model, rows, settings=settings, seed=11)
    return trajectories, rollout_fields(trajectories)


def replay(record):
    """A rollout_func handing TRL the recorded batch, whatever it is asked."""

    def rollout_func(prompts, trainer):
        return copy.deepcopy(record)

    return rollout_func


def perturbed(model, seed=0, scale=0.004):
    """A copy of ``model`` with its weights moved, so that it and TRL's reference (the unmoved copy) differ."""
    model = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator) * scale)
    return model


def built(trainer_class, model, tokenizer, tmp_path, reference, settings=None, **kwargs):
    dataset = task_dataset(generate_tasks(0, 2))  # TRL asks for one; the tests hand it their rows
    args = config(tmp_path, **(settings or {}))
    trainer = trainer_class(
        model=perturbed(model), args=args, train_dataset=dataset, processing_class=tokenizer, **kwargs
    )
    # TRL's reference is a copy of the model it was given; make it the unmoved weights for both trainers.
    trainer.ref_model.load_state_dict(reference.state_dict())
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    return trainer


def loss_and_grads(trainer, output):
    trainer.model.zero_grad()
    loss = trainer._compute_loss(trainer.model, output)
    loss.backward()
    grads = {name: p.grad.clone() for name, p in trainer.model.named_parameters() if p.grad is not None}
    return loss.detach(), grads


def with_old_logps(output, seed=3):
    """Old log-probs a little off the policy's, so the clip and the dual clip act."""
    generator = torch.Generator().manual_seed(seed)
    shape = output["completion_ids"].shape
    output["old_per_token_logps"] = -2.0 + 0.6 * torch.randn(shape, generator=generator)
    return output


def our_advantages(trajectories, tasks, judge, pad_id, valid=None):
    """Our trainer's path on the same rollouts: padded prompt + response rows, our segments and
    rewards, SLCA with TRL's 1e-4 on the group std. (advantages [B, prompt + response], batch)."""
    estimator = estimator_spec("slca")
    batch = trajectory_batch(trajectories, pad_id, estimator=estimator)
    scored = compute_rewards(
        [t.response_text for t in trajectories],
        [task for task in tasks for _ in range(GROUP)],
        judge,
        names=estimator.rewards,
        turns=[t.turns for t in trajectories],
    )
    advantages = estimator.advantages(
        group_ids=torch.arange(len(trajectories)) // GROUP,
        segment_ids=batch.segment_ids,
        rewards=scored.tensors(),
        config=AdvantageConfig(eps=1e-4),
        valid=valid,
    )
    return advantages, batch


# -- the version pin and what is refused ----------------------------------------------------------


def test_trl_outside_the_pin_is_one_line_naming_both_versions():
    assert require_trl().startswith(TRL_PIN + ".")
    for version in ("1.15.2", "1.17.0", "2.0.0"):
        with pytest.raises(TRLVersionError) as caught:
            require_trl(version)
        message = str(caught.value)
        assert TRL_PIN in message and version in message and "\n" not in message
    assert require_trl("1.16.3") == "1.16.3"


@pytest.mark.parametrize(
    "setting, value",
    [
        ("importance_sampling_level", "sequence"),
        ("loss_type", "luspo"),
        ("loss_type", "vespo"),
        ("scale_rewards", "batch"),
        ("multi_objective_aggregation", "normalize_then_sum"),
        # GRPO needs sampled groups, and TRL divides the logits by the temperature (0 died in TRL, 1/0).
        ("temperature", 0.0),
        ("temperature", -0.5),
        ("temperature", float("nan")),
    ],
)
def test_settings_per_token_advantages_cannot_feed_are_refused_by_name(tmp_path, setting, value):
    args = config(tmp_path)
    setattr(args, setting, value)
    with pytest.raises(ConfigError) as caught:
        check_supported(args)
    assert setting in str(caught.value) and "\n" not in str(caught.value)


def test_advantage_settings_follow_trl_scaling_unless_given(tmp_path):
    assert advantage_settings(config(tmp_path), None).norm_std is True
    assert advantage_settings(config(tmp_path), None).eps == 1e-4
    assert advantage_settings(config(tmp_path, scale_rewards="none"), None).norm_std is False
    assert advantage_settings(config(tmp_path, scale_rewards="none"), {"norm_std": True}).norm_std is True
    assert advantage_settings(config(tmp_path), {"eps": 1e-6, "lambda_tool": 0.5}).eps == 1e-6
    given = AdvantageConfig(eps=0.5)
    assert advantage_settings(config(tmp_path), given) is given
    with pytest.raises(ConfigError, match="advantage.lambda_tool"):
        advantage_settings(config(tmp_path), {"lambda_tool": "high"})


def test_a_zero_temperature_is_refused_before_trl_sets_anything_up(reader, tmp_path):
    model, tokenizer = reader
    with pytest.raises(ConfigError) as caught:
        SLCATrainer(model, args=config(tmp_path, temperature=0.0), processing_class=tokenizer)
    message = str(caught.value)
    assert message.startswith("temperature=0.0:") and "divides" in message and "\n" not in message


@pytest.mark.parametrize("advantage", ["slca", 5, [("lambda_tool", 0.5)]])
def test_an_advantage_that_is_no_mapping_is_one_line_naming_it_and_the_estimators(reader, tmp_path, advantage):
    model, tokenizer = reader
    for attempt in (
        lambda: advantage_settings(config(tmp_path), advantage),
        lambda: SLCATrainer(model, args=config(tmp_path), processing_class=tokenizer, advantage=advantage),
    ):
        with pytest.raises(ConfigError) as caught:
            attempt()
        message = str(caught.value)
        assert message.startswith(f"advantage={advantage!r} ({type(advantage).__name__})") and "\n" not in message
        assert all(name in message for name in list_estimators())


@pytest.mark.parametrize(
    "settings",
    [
        {"min_p": 0.05},
        {"repetition_penalty": 1.2},
        {"generation_kwargs": {"num_beams": 2}},
        {"chat_template_kwargs": {"enable_thinking": False}},
        {"min_p": 0.1, "repetition_penalty": 0.9, "generation_kwargs": {"no_repeat_ngram_size": 3}},
    ],
)
def test_generation_settings_our_rollouts_would_ignore_are_refused_by_name(reader, tmp_path, settings):
    model, tokenizer = reader
    with pytest.raises(ConfigError) as caught:
        SLCATrainer(model, args=config(tmp_path, **settings), processing_class=tokenizer)
    message = str(caught.value)
    assert "\n" not in message and all(f"{name}=" in message for name in settings)
    assert "temperature, top_p and top_k" in message


def test_generation_settings_left_off_pass_and_sampling_our_sampler_refuses_is_refused_up_front(tmp_path):
    assert unapplied_settings(config(tmp_path)) == []  # TRL's defaults
    off = SimpleNamespace(min_p=0.0, repetition_penalty=1, generation_kwargs={}, chat_template_kwargs=None)
    assert unapplied_settings(off) == []
    rollouts = AgentLoopRollouts()
    sampling = dict(max_completion_length=64, temperature=1.0, top_p=1.0, top_k=0)
    assert rollouts.check_args(SimpleNamespace(**sampling)).max_response_tokens == 64
    for setting, value in (("temperature", 0.005), ("top_p", 0.0), ("top_k", -1)):
        with pytest.raises(ConfigError, match=setting):
            rollouts.check_args(SimpleNamespace(**{**sampling, setting: value}))


def test_a_template_that_cannot_express_tools_says_so(reader, tasks, tmp_path):
    model, tokenizer = reader
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    with pytest.raises(ConfigError, match="chat_format"):
        SLCATrainer(model, args=config(tmp_path), processing_class=tokenizer, chat_format="native")


# -- the pieces -----------------------------------------------------------------------------------


def test_completion_text_writes_parsed_calls_back_as_hermes_blocks():
    messages = [
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [{"type": "function", "function": {"name": "get_time", "arguments": {"city": "Oslo"}}}],
        },
        {"role": "tool", "content": "12:00"},
        {"role": "assistant", "content": "It is noon."},
    ]
    text = completion_text(messages)
    assert text.startswith("Checking.\n<tool_call>") and '"city": "Oslo"' in text and text.endswith("It is noon.")
    assert "12:00" not in text
    assert completion_text("plain") == "plain"


def test_group_runs_finds_trl_repeated_rows(tasks):
    a, b = tasks[0], tasks[1]
    assert group_runs([a, a, b, b]) == 2
    assert group_runs([a, a, a, b]) == 1
    assert group_runs([a, b, a, b]) == 1
    assert group_runs([a]) == 1


def test_rewards_score_a_batch_once_and_void_a_simulator_fault(recorded, tasks):
    trajectories, record = recorded
    # How each episode ended travels with its row, for the trainer's rollout/* metrics.
    assert record[ENDING_FIELDS["truncated"]] == [t.truncated for t in trajectories]
    assert record[ENDING_FIELDS["forced_answer"]] == [bool(t.counters["forced_answer"]) for t in trajectories]
    assert record[ENDING_FIELDS["repeat_calls"]] == [t.counters["repeat_calls"] for t in trajectories]
    rewards = TaskRewards()
    rows = {"slca_task": [row["slca_task"] for row in rows_for(tasks)], **record}
    rows[SIMULATOR_FAULT_FIELD] = ["timeout"] + [""] * (len(trajectories) - 1)
    calls = []
    original = rewards.score

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    rewards.score = counting
    score, tool = rewards.function("score"), rewards.function("tool")
    assert score.__name__ == "score"
    first = score(completions=[None] * len(trajectories), **rows)
    second = tool(completions=[None] * len(trajectories), **rows)
    assert first[0] is None and second[0] is None
    expected = compute_rewards(
        [t.response_text for t in trajectories],
        [task for task in tasks for _ in range(GROUP)],
        rewards.judge,
        names=("score", "tool"),
        turns=[t.turns for t in trajectories],
    ).as_dict()
    assert first[1:] == pytest.approx(expected["score"][1:])
    assert second[1:] == pytest.approx(expected["tool"][1:])
    assert rewards._last is not None and len(calls) == 2  # the second call was served from the first scoring


def test_a_row_without_its_task_is_named(reader, tasks, tmp_path):
    rewards = TaskRewards()
    with pytest.raises(ValueError, match="slca_task"):
        rewards.score_rows(["x"], {"prompt": [[]]})
    with pytest.raises(TaskFormatError, match="row 0 of the batch"):
        rewards.score_rows(["x"], {"slca_task": ["{not json"]})


def test_a_task_too_deep_to_read_is_a_row_error(monkeypatch):
    def too_deep(raw):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(trl_data, "task_from_value", too_deep)
    with pytest.raises(TaskFormatError, match="row 3 of the batch: slca_task: nested too deeply"):
        trl_data.task_of_row({"slca_task": "{}"}, 3)


def test_a_prompt_over_the_model_context_is_refused_before_generation_naming_its_row(reader, tasks, monkeypatch):
    model, tokenizer = reader
    from slca_grpo.chat.chat_format import build_formatter

    rollouts = AgentLoopRollouts(rollout=RolloutConfig(max_turns=1))
    rollouts.formatter = build_formatter(tokenizer)
    context = model_context(model)
    assert context == model.config.max_position_embeddings
    rollouts.check_prompts(model, [tasks[1]] * GROUP)  # a prompt of the suite fits

    class NoGeneration:
        def __init__(self, *args, **kwargs):
            raise AssertionError("the agent loop started on a batch with a prompt over the context")

    monkeypatch.setattr(trl_rollouts, "AgentLoop", NoGeneration)
    schema = {"type": "string"}
    for _ in range(450):
        schema = {"type": "object", "properties": {"inner": schema}}
    deep_tool = {"type": "function", "function": {"name": "deep", "description": "Deep.", "parameters": schema}}
    hostile = [
        dataclasses.replace(tasks[0], id="one-mb-message", messages=[{"role": "user", "content": "word " * 200_000}]),
        dataclasses.replace(tasks[0], id="deep-schema", tools=[*tasks[0].tools, deep_tool]),
    ]
    settings = RolloutConfig(group_size=GROUP, max_turns=1, max_response_tokens=32)
    for task in hostile:
        started = time.perf_counter()
        with pytest.raises(TaskFormatError) as caught:
            rollouts.run(model, [tasks[1]] * GROUP + [task] * GROUP, settings=settings, seed=0)
        assert time.perf_counter() - started < 60  # refused in the time a tokenisation takes, not minutes
        message = str(caught.value)
        assert message.startswith(f"row {GROUP} of the batch (task {task.id!r}):") and "\n" not in message
        # Over the context, or (the schema, on a deep stack) too deep to render at all.
        assert f"context is {context:,}" in message or "nested too deeply" in message


# -- parity with TRL and with our trainer ---------------------------------------------------------


def test_grpo_through_the_integration_is_trl_own_loss_and_gradients(reader, tasks, recorded, tmp_path):
    model, tokenizer = reader
    _, record = recorded
    rewards = TaskRewards(("score",))
    theirs = built(
        GRPOTrainer,
        model,
        tokenizer,
        tmp_path,
        model,
        reward_funcs=[rewards.function("score")],
        rollout_func=replay(record),
    )
    ours = built(
        SLCATrainer, model, tokenizer, tmp_path, model, estimator="grpo", rewards=rewards, rollout_func=replay(record)
    )
    trl_out = theirs._generate_and_score_completions(rows_for(tasks))
    our_out = ours._generate_and_score_completions(rows_for(tasks))

    mask = (our_out["completion_mask"] * our_out["tool_mask"]).bool()
    assert trl_out["advantages"].dim() == 1 and our_out["advantages"].dim() == 2
    assert trl_out["advantages"].abs().max() > 0.1  # the rewards differ within groups: a real test
    broadcast = trl_out["advantages"].unsqueeze(1).expand_as(our_out["advantages"])
    torch.testing.assert_close(our_out["advantages"][mask], broadcast[mask], atol=1e-5, rtol=0)
    assert (our_out["advantages"][~mask] == 0).all()

    for out in (trl_out, our_out):
        with_old_logps(out)
    trl_loss, trl_grads = loss_and_grads(theirs, trl_out)
    our_loss, our_grads = loss_and_grads(ours, our_out)
    torch.testing.assert_close(our_loss, trl_loss, atol=1e-5, rtol=0)
    assert set(our_grads) == set(trl_grads)
    for name in trl_grads:
        torch.testing.assert_close(our_grads[name], trl_grads[name], atol=1e-5, rtol=1e-5)


def test_slca_through_the_integration_is_our_trainer_advantages_and_loss(reader, tasks, recorded, tmp_path):
    model, tokenizer = reader
    trajectories, record = recorded
    # Our KL is plain k3; TRL's default multiplies it by the importance ratio (use_bias_correction_kl).
    settings = {"use_bias_correction_kl": False}
    trainer = built(
        SLCATrainer, model, tokenizer, tmp_path, model, settings, estimator="slca", rollout_func=replay(record)
    )
    output = with_old_logps(trainer._generate_and_score_completions(rows_for(tasks)))

    ours, batch = our_advantages(trajectories, tasks, trainer.rewards.judge, tokenizer.pad_token_id)
    assert ours.abs().max() > 0.1
    # Response token j of rollout i sits at column len(prompt_i) + j of our rows, at column j of TRL's.
    width = output["completion_ids"].shape[1]
    aligned = torch.zeros(len(trajectories), width)
    old = torch.zeros(batch.input_ids.shape)
    for i, t in enumerate(trajectories):
        start = len(t.prompt_ids)
        aligned[i, : len(t.response_ids)] = ours[i, start : start + len(t.response_ids)]
        old[i, start : start + len(t.response_ids)] = output["old_per_token_logps"][i, : len(t.response_ids)]
    torch.testing.assert_close(output["advantages"], aligned, atol=1e-5, rtol=0)

    with torch.no_grad():
        logp_ref = token_logprobs(trainer.ref_model, batch.input_ids, batch.attention_mask)
    logp = token_logprobs(trainer.model, batch.input_ids, batch.attention_mask)
    our_loss, _ = policy_loss(logp, old, logp_ref, ours, batch.loss_mask, clip=0.2, dual_clip=3.0, kl_coef=BETA)
    trl_loss = trainer._compute_loss(trainer.model, output)
    torch.testing.assert_close(trl_loss.detach(), our_loss.detach(), atol=1e-5, rtol=0)
    # Each part acts: the KL term (policy moved off the reference) and the clips (old log-probs off the policy).
    no_kl, metrics = policy_loss(logp, old, logp_ref, ours, batch.loss_mask, clip=0.2, dual_clip=3.0, kl_coef=0.0)
    assert abs(float(our_loss.detach()) - float(no_kl.detach())) > 1e-4
    assert metrics["clip_frac"] > 0.05 and metrics["dual_clip_frac"] > 0.0


def test_a_void_rollout_is_out_of_its_group_and_of_the_loss(reader, tasks, recorded, tmp_path):
    model, tokenizer = reader
    trajectories, record = recorded
    faulty = copy.deepcopy(record)
    faulty[SIMULATOR_FAULT_FIELD] = [""] * len(trajectories)
    faulty[SIMULATOR_FAULT_FIELD][1] = "backend_error"
    trainer = built(SLCATrainer, model, tokenizer, tmp_path, model, estimator="slca", rollout_func=replay(faulty))
    output = trainer._generate_and_score_completions(rows_for(tasks))
    assert (output["advantages"][1] == 0).all() and (output["tool_mask"][1] == 0).all()
    assert (output["tool_mask"][0] != 0).any()
    assert int(output["num_items_in_batch"]) == int((output["completion_mask"] * output["tool_mask"]).sum())

    valid = [i != 1 for i in range(len(trajectories))]
    ours, _ = our_advantages(trajectories, tasks, trainer.rewards.judge, tokenizer.pad_token_id, valid)
    for i in (0, 2, 3):  # the void rollout's group mates, normalised among themselves
        t = trajectories[i]
        start = len(t.prompt_ids)
        torch.testing.assert_close(
            output["advantages"][i, : len(t.response_ids)],
            ours[i, start : start + len(t.response_ids)],
            atol=1e-5,
            rtol=0,
        )


PLUGIN = textwrap.dedent("""
    from slca_grpo.algos import register_estimator, route_by_segment
    from slca_grpo.algos.grouping import group_zscore
    from slca_grpo.rewards import register_reward

    @register_reward("trl-plugin-calls")
    def valid_calls(parsed, task, config):
        return float(min(len(parsed.calls), len(task.flat_gold_calls)))

    @register_estimator("trl-plugin", rewards=("trl-plugin-calls",))
    def calls_only(group_index, segment_ids, rewards, config):
        advantage = group_zscore(rewards["trl-plugin-calls"], group_index)
        return route_by_segment(segment_ids, advantage, advantage.new_zeros(advantage.shape))
""")


@pytest.fixture
def plugin(tmp_path):
    path = tmp_path / "trl_plugin.py"
    path.write_text(PLUGIN)
    yield str(path)
    if "trl-plugin" in list_estimators():
        unregister_estimator("trl-plugin")
    if "trl-plugin-calls" in list_reward_families():
        unregister_reward_family("trl-plugin-calls")


# One estimator per reward family and segment layout (slca itself: the parity tests above; slca-no-summary
# reads slca's rewards and layout).
@pytest.mark.parametrize("estimator", ["grpo", "slca-turn", "toolpo", "rltr", "trl-plugin"])
def test_every_estimator_trains_a_step_through_trl(reader, tasks, tmp_path, estimator, plugin):
    model, tokenizer = reader
    model = copy.deepcopy(model)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    args = config(tmp_path, max_steps=1, per_device_train_batch_size=GROUP * 2, max_completion_length=48)
    trainer = SLCATrainer(
        model,
        args=args,
        train_dataset=task_dataset(tasks[:2]),
        processing_class=tokenizer,
        estimator=estimator,
        plugins=[plugin] if estimator == "trl-plugin" else [],
        rollouts=AgentLoopRollouts(rollout=RolloutConfig(max_turns=2, max_tool_response_tokens=48)),
    )
    trainer.train()
    logged = trainer.state.log_history[0]
    assert "reward" in logged and "rollout/void" in logged
    # How episodes ended, as our trainer logs it (the rows' own fields, tested with the rollouts).
    assert {"rollout/truncated", "rollout/forced_answer", "rollout/repeat_calls"} <= set(logged)
    moved = any(not torch.equal(before[name], p) for name, p in trainer.model.named_parameters())
    # A batch whose groups all tie has zero advantages everywhere; the KL term alone cannot move
    # the weights on the first step (policy = reference), so "moved" holds exactly when some
    # advantage is nonzero.
    nonzero = any(logged.get(f"adv/{segment}_nonzero", 0) > 0 for segment in ("tool", "summary"))
    assert moved == nonzero


def test_trl_runs_our_rollout_settings_with_its_sampling_and_budget():
    """TRL's GRPOConfig sets sampling and the completion budget; turns, tool budgets and forced
    answers stay ours."""
    from types import SimpleNamespace

    ours = RolloutConfig(group_size=4, max_turns=3, max_tool_response_tokens=40, answer_at_limit=True)
    args = SimpleNamespace(max_completion_length=200, temperature=0.7, top_p=0.9, top_k=5)
    settings = AgentLoopRollouts(rollout=ours).settings_from(args)
    assert (settings.max_response_tokens, settings.temperature, settings.top_p, settings.top_k) == (200, 0.7, 0.9, 5)
    assert settings.answer_at_limit and settings.max_turns == 3 and settings.max_tool_response_tokens == 40
    assert settings.final_answer_notice == ours.final_answer_notice


def test_a_step_with_no_learnable_token_takes_no_optimiser_or_scheduler_step(reader, tasks, recorded, tmp_path, capsys):
    """Every rollout of step 2 is void: without the skip, Adam's momentum from step 1 (and weight
    decay) would move every weight, and the schedule would advance, on a step with nothing to learn."""
    model, tokenizer = reader
    _, record = recorded
    void = copy.deepcopy(record)
    void[SIMULATOR_FAULT_FIELD] = ["backend_error"] * len(record["prompt_ids"])
    served = []

    def rollout_func(prompts, trainer):
        served.append(len(prompts))
        return copy.deepcopy(record if len(served) == 1 else void)

    snapshots = []

    class Snapshot(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            snapshots.append({name: p.detach().clone() for name, p in model.named_parameters()})

    args = config(tmp_path, max_steps=2, weight_decay=0.1, lr_scheduler_type="linear")
    trainer = SLCATrainer(
        perturbed(model),
        args=args,
        train_dataset=task_dataset(tasks),
        processing_class=tokenizer,
        estimator="slca",
        rollout_func=rollout_func,
        callbacks=[Snapshot()],
    )
    # The policy off its reference, so that step 1's KL term alone has a gradient.
    trainer.ref_model.load_state_dict(model.state_dict())
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    trainer.train()

    rows = len(record["prompt_ids"])
    assert served == [rows, rows] and len(snapshots) == 2
    assert any(not torch.equal(before[name], snapshots[0][name]) for name in before)  # step 1 trained
    assert all(torch.equal(snapshots[0][name], snapshots[1][name]) for name in before)  # step 2 moved nothing
    assert {int(state["step"]) for state in trainer.optimizer.state.values()} == {1}  # one Adam step
    assert trainer.lr_scheduler.last_epoch == 1 and trainer.skipped_steps == 1  # one scheduler step
    logged = [entry for entry in trainer.state.log_history if "rollout/void" in entry]
    assert [entry.get("train/skipped") for entry in logged] == [None, 1.0]  # as our trainer logs it
    assert logged[1]["rollout/void"] == rows
    warning = capsys.readouterr().err
    assert f"{rows} of {rows} rollouts void (simulator:backend_error {rows})" in warning
    assert "the step is skipped (no update)" in warning
