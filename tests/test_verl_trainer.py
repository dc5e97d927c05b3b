"""Our v1 trainers and reward on verl's real data path: agent-loop output → reward worker →
TransferQueue → the trainer's advantage step, against our own trainer's advantages."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
import torch
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
from verl.trainer.ppo.v1 import get_trainer_cls
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync
from verl_helpers import (
    row_kwargs,
    run_rollout,
    single_call_tasks,
    tokenizer_dir,  # noqa: F401  (fixture)
    verl_config,
    verl_tokenizer,  # noqa: F401  (fixture)
)

from slca_grpo.algos import compute_advantages, estimator_spec
from slca_grpo.algos.segments import learnable_runs
from slca_grpo.chat import render_tool_calls
from slca_grpo.chat.template import IM_END
from slca_grpo.config import ConfigError
from slca_grpo.datatypes import Trajectory
from slca_grpo.integrations.verl.reward import RESPONSE_TEXT_FIELD
from slca_grpo.integrations.verl.trainer import SLCATrainerColocateAsync, SLCATrainerSync
from slca_grpo.rewards import RewardConfig
from slca_grpo.rewards.batch import compute_rewards
from slca_grpo.rewards.rule_judge import RuleJudge
from slca_grpo.trainer.batch import trajectory_batch
from slca_grpo.trainer.rl import segment_advantage_stats

GROUP = 4
ANSWER = "I looked it up: the results are in, see the details above."
REWARD = (
    "reward.custom_reward_function.path=pkg://slca_grpo.integrations.verl.reward",
    "reward.custom_reward_function.name=compute_score",
    "+reward.custom_reward_function.reward_kwargs.estimator=${algorithm.adv_estimator}",
)


class LocalActor:
    """A Ray actor handle (``handle.method.remote(...)``) whose actor object lives in this process."""

    def __init__(self, target):
        self.target = target

    def __getattr__(self, name):
        return SimpleNamespace(remote=getattr(self.target, name))


def agent_loop_worker(cls, reward_worker):
    """verl's agent-loop worker with only what its post-processing reads (no LLM servers needed)."""
    worker = cls.__new__(cls)
    worker.reward_loop_worker_handles = [LocalActor(reward_worker)]
    worker.processor = None
    worker.mm_processor_kwargs = {}
    worker.distillation_enabled = False
    return worker


def scripts(task):
    """Four rollouts of one prompt: a call then an answer, an answer without a call, a bad call, and
    calls until the turn limit cuts the rollout off without an answer."""
    call = render_tool_calls(task.flat_gold_calls) + IM_END
    wrong = render_tool_calls([type(task.flat_gold_calls[0])(task.flat_gold_calls[0].name, {})]) + IM_END
    return [
        lambda turn: call if turn == 0 else ANSWER + IM_END,
        lambda turn: ANSWER + IM_END,
        lambda turn: wrong if turn == 0 else "Sorry." + IM_END,
        lambda turn: call,
    ]


@pytest.fixture(scope="module")
def tasks():
    return single_call_tasks(2)


@pytest.fixture(scope="module")
def rollouts(verl_tokenizer, tasks):
    """(task, kwargs, AgentLoopOutput) for GROUP rollouts of each task, from our agent loop."""
    config = verl_config()
    out = []
    for index, task in enumerate(tasks):
        for rollout, script in enumerate(scripts(task)):
            kwargs = row_kwargs(task, index, f"uid{index}", rollout)
            output, _ = run_rollout(config, verl_tokenizer, script, kwargs)
            out.append((task, kwargs, output))
    return out


def slca_config(tokenizer_dir, *overrides):
    return verl_config(
        f"actor_rollout_ref.model.path={tokenizer_dir}", "trainer.v1.trainer_mode=slca_sync", *REWARD, *overrides
    )


def test_trainers_schedule_like_verls_and_keep_verls_estimators(tokenizer_dir):
    trainer = SLCATrainerSync(slca_config(tokenizer_dir, "algorithm.adv_estimator=slca"))
    assert (trainer.trainer_mode, trainer.registered_mode) == ("sync", "slca_sync")
    assert type(trainer.replay_buffer) is ReplayBuffer and trainer.slca_estimator == "slca"
    config = slca_config(tokenizer_dir, "algorithm.adv_estimator=grpo", "trainer.v1.trainer_mode=slca_colocate_async")
    other = SLCATrainerColocateAsync(config)
    assert other.trainer_mode == "colocate_async" and isinstance(other.replay_buffer, ReplayBufferAsync)
    assert other.slca_estimator is None  # verl's own GRPO runs


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (("algorithm.adv_estimator=nope",), "unknown estimator 'nope'; ours: grpo, slca"),
        (("algorithm.adv_estimator=slca", "algorithm.use_kl_in_reward=true"), "algorithm.use_kl_in_reward"),
        (("algorithm.adv_estimator=slca", "algorithm.rollout_correction.rollout_rs=token_k1"), "rollout_correction"),
        (("algorithm.adv_estimator=slca", "+slca.advantage.lambda_tool=x"), "slca.advantage.lambda_tool"),
    ],
)
def test_bad_settings_fail_before_training(tokenizer_dir, overrides, message):
    with pytest.raises(ConfigError, match=message):
        SLCATrainerSync(slca_config(tokenizer_dir, *overrides))


def our_rewards(rollouts, names, tokenizer=None):
    """Our rewards of the rollouts; with ``tokenizer``, per-turn ones from each turn's sampled ids."""
    texts = [output.extra_fields[RESPONSE_TEXT_FIELD] for _, _, output in rollouts]
    turns = None
    if tokenizer is not None:
        turns = [
            [
                tokenizer.decode(o.response_ids[a:b], skip_special_tokens=False)
                for a, b in learnable_runs(o.response_mask)
            ]
            for _, _, o in rollouts
        ]
    tasks = [task for task, _, _ in rollouts]
    return compute_rewards(texts, tasks, RuleJudge(), RewardConfig(), names=names, turns=turns)


def test_verls_reward_worker_scores_our_rollouts_with_hierr(tokenizer_dir, rollouts):
    config = slca_config(tokenizer_dir, "algorithm.adv_estimator=slca")

    outputs = [output.model_copy(deep=True) for _, _, output in rollouts]

    async def score_all():
        worker = agent_loop_worker(AgentLoopWorker, RewardLoopWorker(config))
        for (_, kwargs, _), output in zip(rollouts, outputs):
            await worker._compute_score([output], kwargs=kwargs)

    asyncio.run(score_all())
    expected = our_rewards(rollouts, estimator_spec("slca").rewards).as_dict()
    infos = [output.extra_fields["reward_extra_info"] for output in outputs]
    assert [info["score"] for info in infos] == expected["score"]
    assert [info["r_tool"] for info in infos] == expected["tool"]
    assert [info["r_sum"] for info in infos] == expected["summary"]
    assert [info["no_call"] for info in infos] == expected["no_call"]
    assert [output.reward_score for output in outputs] == expected["score"]
    # The answer without a call is the omission gate: the penalty, and no tool or summary reward.
    assert infos[1] == {"score": -0.5, "r_tool": 0.0, "r_sum": 0.0, "no_call": True, "answered": True, "void": False}
    assert infos[0]["r_tool"] > infos[2]["r_tool"] > 0 and not infos[0]["no_call"]
    # The rollout the turn limit cut off on a call has no answer: its last turn is a tool segment.
    assert [info["answered"] for info in infos] == [True, True, True, False] * 2


@pytest.fixture(scope="module")
def transfer_queue():
    """Ray (a private local cluster, with our worker hook) and a TransferQueue, for this module."""
    import ray
    import transfer_queue as tq
    from omegaconf import OmegaConf

    from slca_grpo.integrations.verl.register import HOOK

    # TransferQueue's controller and storage actors hang on fewer than 3 Ray CPUs. Their logs stay
    # in Ray's session folder: forwarded, they would land between a pytest worker's results.
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, runtime_env={"worker_process_setup_hook": HOOK})
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
    yield tq
    tq.close()
    ray.shutdown()


@pytest.mark.slow
@pytest.mark.parametrize("estimator", ["slca", "grpo", "slca-turn"])
def test_advantages_through_verls_data_path_equal_our_trainers(
    tokenizer_dir, rollouts, transfer_queue, estimator, verl_tokenizer
):
    from transfer_queue import KVBatchMeta

    config = slca_config(tokenizer_dir, f"algorithm.adv_estimator={estimator}")
    partition = "train"  # where verl's agent-loop worker puts training rollouts
    keys = []

    async def put_all():  # verl builds its workers inside their event loop, so do the same
        worker = agent_loop_worker(AgentLoopWorkerTQ.__ray_actor_class__, RewardLoopWorker(config))
        for _, kwargs, output in rollouts:
            fields = {**kwargs, "uid": f"{estimator}-{kwargs['uid']}", "global_steps": 1}
            # verl's own post-processing: the reward worker, then the rollout's fields into TransferQueue.
            await worker._agent_loop_postprocess(output.model_copy(deep=True), False, **fields)
            keys.append(f"{fields['uid']}_{kwargs['session_id']}_0")

    asyncio.run(put_all())
    # The last row tagged as one of verl's padding rows: it keeps its advantages, leaves the metrics.
    tags = [{"status": "success"}] * (len(keys) - 1) + [{"status": "success", "is_padding": True}]
    if estimator == "grpo":  # verl's step also reads the old policy's log-probs (computed before it)
        old = transfer_queue.kv_batch_get(keys=keys, partition_id=partition, select_fields=["rollout_log_probs"])
        transfer_queue.kv_batch_put(
            keys=keys, partition_id=partition, fields=old.rename_key_("rollout_log_probs", "old_log_probs")
        )
    metrics: dict = {}
    trainer = get_trainer_cls("slca_sync")(config)
    trainer._compute_advantage(KVBatchMeta(partition_id=partition, keys=keys, tags=tags), metrics)
    got = transfer_queue.kv_batch_get(keys=keys, partition_id=partition, select_fields=["advantages"])["advantages"]

    # Our trainer's computation (RLTrainer.step) on the same token sequences and rewards.
    trajectories = [
        Trajectory(
            task.id,
            output.prompt_ids,
            output.response_ids,
            output.response_mask,
            response_text=output.extra_fields[RESPONSE_TEXT_FIELD],
        )
        for task, _, output in rollouts
    ]
    batch = trajectory_batch(trajectories, pad_id=0, estimator=estimator)
    cut_off = batch.segment_ids[GROUP - 1][batch.loss_mask[GROUP - 1] > 0]
    assert not bool((cut_off == 2).any())  # the cut-off rollout has no summary segment, on both sides
    rewards = our_rewards(rollouts, estimator_spec(estimator).rewards, verl_tokenizer).tensors()
    group_ids = torch.arange(len(rollouts) // GROUP).repeat_interleave(GROUP)
    ours = compute_advantages(estimator, group_ids=group_ids, segment_ids=batch.segment_ids, rewards=rewards)
    for row, ((_, _, output), theirs) in enumerate(zip(rollouts, got.unbind())):
        start = len(output.prompt_ids)
        torch.testing.assert_close(theirs, ours[row, start : start + len(output.response_ids)])
    assert any(float(a.abs().sum()) > 0 for a in got.unbind())
    if estimator == "slca-turn":  # one segment per tool turn, each with its own advantage
        assert {"adv/turn1_mean", "adv/summary_mean"} <= set(metrics)
    if estimator == "slca":
        real = batch.segment_ids[:-1]
        advantage_metrics = {k: v for k, v in metrics.items() if k.startswith("adv/")}
        assert advantage_metrics == pytest.approx(segment_advantage_stats(ours[:-1], real), abs=1e-6)
        assert metrics["rollout/void"] == 0.0 and metrics["rollout/void_rate"] == 0.0  # no simulator fault here
        assert {"adv/tool_mean", "adv/summary_mean", "adv/tool_present"} <= set(metrics)


@pytest.mark.slow
def test_the_worker_hook_registers_our_trainers_and_parser_in_ray_workers(transfer_queue):
    import ray

    @ray.remote(num_cpus=0)
    def registered():
        from verl.experimental.agent_loop.tool_parser import ToolParser
        from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY

        return sorted(name for name in TRAINER_REGISTRY if name.startswith("slca")), "slca" in ToolParser._registry

    assert ray.get(registered.remote()) == (["slca_colocate_async", "slca_separate_async", "slca_sync"], True)


PLUGIN = """
from slca_grpo.algos import group_zscore, register_estimator, route_by_segment
from slca_grpo.rewards import register_reward


@register_reward("verl_plugin_calls")
def calls(parsed, task, config):
    return float(len(parsed.calls))


@register_estimator("verl_plugin_grpo", rewards=("verl_plugin_calls",))
def calls_grpo(group_index, segment_ids, rewards, config):
    advantage = group_zscore(rewards["verl_plugin_calls"], group_index)
    return route_by_segment(segment_ids, advantage, advantage.new_zeros(advantage.shape))
"""


def test_a_plugin_estimator_and_its_reward_run_on_verl(tokenizer_dir, rollouts, tmp_path):
    from slca_grpo.algos import unregister_estimator
    from slca_grpo.integrations.verl.advantages import batch_advantages
    from slca_grpo.integrations.verl.reward import compute_score
    from slca_grpo.rewards import unregister_reward_family

    plugin = tmp_path / "verl_plugin.py"
    plugin.write_text(PLUGIN)
    try:
        trainer = SLCATrainerSync(
            slca_config(tokenizer_dir, "algorithm.adv_estimator=verl_plugin_grpo", f"+slca.plugins=[{plugin}]")
        )
        assert trainer.slca_estimator == "verl_plugin_grpo"
        infos = [
            compute_score(
                "slca",
                "",
                None,
                output.extra_fields | kwargs["extra_info"],
                estimator="verl_plugin_grpo",
                plugins=[str(plugin)],
            )
            for _, kwargs, output in rollouts
        ]
        assert [info["verl_plugin_calls"] for info in infos] == [1.0, 0.0, 1.0, 4.0] * 2
        mask = torch.nn.utils.rnn.pad_sequence(
            [torch.tensor(o.response_mask) for _, _, o in rollouts], batch_first=True
        )
        advantages, _ = batch_advantages(
            "verl_plugin_grpo",
            group_ids=[kwargs["uid"] for _, kwargs, _ in rollouts],
            response_mask=mask,
            reward_infos=infos,
            rollouts=[str(i) for i in range(len(rollouts))],
        )
        assert float(advantages[1].abs().sum()) == 0 and float(advantages[0].abs().sum()) > 0
    finally:
        unregister_estimator("verl_plugin_grpo")
        unregister_reward_family("verl_plugin_calls")


CLASHING_PLUGIN = """
from slca_grpo.algos import register_estimator, route_by_segment


@register_estimator("rloo", rewards=("score",))
def rloo(group_index, segment_ids, rewards, config):
    return route_by_segment(segment_ids, rewards["score"], rewards["score"])
"""


def test_a_plugin_estimator_named_like_one_of_verls_is_refused_not_replaced(tokenizer_dir, tmp_path):
    from slca_grpo.algos import list_estimators, unregister_estimator

    plugin = tmp_path / "clashing_plugin.py"
    plugin.write_text(CLASHING_PLUGIN)
    try:
        with pytest.raises(ConfigError, match=r"estimator 'rloo' of the plugin .* one of verl's estimators"):
            SLCATrainerSync(slca_config(tokenizer_dir, "algorithm.adv_estimator=rloo", f"+slca.plugins=[{plugin}]"))
    finally:
        if "rloo" in list_estimators():
            unregister_estimator("rloo")
