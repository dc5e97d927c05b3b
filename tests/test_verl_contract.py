"""verl's loss against ours, and the verl behaviour the adapter is built on (fails if verl changes it)."""

from __future__ import annotations

import ast
import inspect

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tensordict import TensorDict
from verl.protocol import DataProto
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl.trainer.ppo.v1 import PPOTrainer
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.tensordict_utils import assign_non_tensor
from verl.workers.utils.losses import ppo_loss
from verl_helpers import verl_config

from slca_grpo.algos import policy_loss

PAPER_LOSS = (
    "actor_rollout_ref.actor.use_kl_loss=true",
    "actor_rollout_ref.actor.kl_loss_coef=0.001",
    "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
    "actor_rollout_ref.actor.entropy_coeff=0",
    "actor_rollout_ref.actor.clip_ratio=0.2",
    "actor_rollout_ref.actor.clip_ratio_c=3.0",
    "actor_rollout_ref.actor.loss_agg_mode=token-mean",
    "actor_rollout_ref.actor.policy_loss.loss_mode=vanilla",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
)


@pytest.fixture(scope="module")
def actor_config():
    return omega_conf_to_dataclass(verl_config(*PAPER_LOSS).actor_rollout_ref.actor)


def verl_policy_loss(config, logp, old_logp, ref_logp, advantages, mask, prompt_lens):
    """verl's actor loss (``ppo_loss``) on one mini-batch, fed as its engine feeds it (jagged rows)."""
    rows = range(len(prompt_lens))
    response_lens = [int(mask[r].nonzero().max()) + 1 if mask[r].any() else 1 for r in rows]

    def jagged(values, lengths):
        return torch.nested.as_nested_tensor([values[r, : lengths[r]] for r in rows], layout=torch.jagged)

    # The model's log-probs come unpadded over prompt + response; position t predicts token t + 1.
    flat = []
    for r in rows:
        sequence = torch.zeros(prompt_lens[r] + response_lens[r], dtype=logp.dtype)
        sequence = sequence.index_put(
            (torch.arange(prompt_lens[r] - 1, prompt_lens[r] - 1 + response_lens[r]),), logp[r, : response_lens[r]]
        )
        flat.append(sequence)
    data = TensorDict(
        {
            "prompts": torch.nested.as_nested_tensor(
                [torch.ones(n, dtype=torch.long) for n in prompt_lens], layout=torch.jagged
            ),
            "responses": jagged(torch.ones_like(mask, dtype=torch.long), response_lens),
            "response_mask": jagged(mask.long(), response_lens),
            "old_log_probs": jagged(old_logp, response_lens),
            "ref_log_prob": jagged(ref_logp, response_lens),
            "advantages": jagged(advantages, response_lens),
        },
        batch_size=len(prompt_lens),
    )
    assign_non_tensor(data, dp_size=1, batch_num_tokens=int(mask.sum()), global_batch_size=len(prompt_lens))
    log_probs = torch.nested.as_nested_tensor(flat, layout=torch.jagged)
    loss, _ = ppo_loss(config, {"log_probs": log_probs}, data)
    return loss


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), rows=st.integers(1, 4), width=st.integers(1, 6))
def test_verls_vanilla_loss_equals_ours_in_value_and_gradient(actor_config, seed, rows, width):
    generator = torch.Generator().manual_seed(seed)
    shape = (rows, width)
    logp = (-torch.rand(shape, generator=generator) * 3).requires_grad_(True)
    old_logp = logp.detach() + torch.randn(shape, generator=generator) * 0.5  # ratios well past the clip
    ref_logp = logp.detach() + torch.randn(shape, generator=generator) * 0.5
    advantages = torch.randn(shape, generator=generator) * 2
    mask = torch.rand(shape, generator=generator) > 0.3
    mask[:, 0] = True
    prompt_lens = [int(n) for n in torch.randint(1, 5, (rows,), generator=generator)]

    theirs = verl_policy_loss(actor_config, logp, old_logp, ref_logp, advantages, mask, prompt_lens)
    (their_grad,) = torch.autograd.grad(theirs, logp)
    ours, _ = policy_loss(logp, old_logp, ref_logp, advantages, mask, clip=0.2, dual_clip=3.0, kl_coef=0.001)
    (our_grad,) = torch.autograd.grad(ours, logp)
    torch.testing.assert_close(theirs, ours, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(their_grad * mask, our_grad * mask, rtol=1e-5, atol=1e-7)


def test_a_registered_estimator_receives_only_token_rewards_mask_groups_and_config():
    """Why the trainer override exists: per-rollout rewards do not reach a registered estimator.

    If this fails, verl now passes more (e.g. the reward extras) and the override may be unneeded."""
    received = {}

    def capture(**kwargs):
        received.update(kwargs)
        return kwargs["token_level_rewards"], kwargs["token_level_rewards"]

    core_algos.register_adv_est("slca_contract_probe")(capture)
    try:
        mask = torch.ones((2, 3))
        data = DataProto.from_dict(
            tensors={"token_level_rewards": torch.zeros((2, 3)), "response_mask": mask},
            non_tensors={"uid": np.array(["a", "a"], dtype=object), "r_tool": np.array([0.5, 0.1])},
        )
        compute_advantage(data, adv_estimator="slca_contract_probe", config=verl_config().algorithm)
    finally:
        del core_algos.ADV_ESTIMATOR_REGISTRY["slca_contract_probe"]
    assert sorted(received) == ["config", "index", "response_mask", "token_level_rewards"]


def test_the_v1_advantage_step_fetches_a_fixed_field_list_without_the_reward_extras():
    """The parent ``_compute_advantage`` reads these TransferQueue fields and no others; if verl adds
    ``extra_fields`` (or changes the step), revisit ``slca_grpo.integrations.verl.trainer``."""
    tree = ast.parse(inspect.getsource(PPOTrainer._compute_advantage).strip())
    first = next(node for node in ast.walk(tree) if isinstance(node, ast.Assign))
    assert ast.literal_eval(first.value) == [
        "uid",
        "response_mask",
        "rm_scores",
        "rollout_log_probs",
        "old_log_probs",
        "ref_log_prob",
        "values",
    ]


def test_verls_group_ids_and_grpo_are_what_our_grpo_computes():
    """verl's GRPO (``grpo``, left to verl by our trainers) equals our ``grpo`` estimator."""
    from slca_grpo.algos import SEG_SUMMARY, compute_advantages

    scores = torch.tensor([1.0, 0.0, 0.5, 2.0, 2.0, -1.0])
    uids = np.array(["a", "a", "a", "b", "b", "c"], dtype=object)
    mask = torch.ones((6, 4))
    rewards = torch.zeros((6, 4))
    rewards[:, -1] = scores
    theirs, _ = core_algos.compute_grpo_outcome_advantage(rewards, mask, uids)
    ours = compute_advantages(
        "grpo", group_ids=list(uids), segment_ids=torch.full((6, 4), SEG_SUMMARY), rewards={"score": scores}
    )
    torch.testing.assert_close(theirs, ours)
