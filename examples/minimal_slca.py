"""SLCA-GRPO in one file, top to bottom, on the pure functions the trainer itself uses.

A tiny model learns the tool-call format from a few gold trajectories (SFT), then each RL step:
roll out G answers per prompt against the schema simulator, score every answer with HierR
(R_tool for the calls, R_sum for the final answer), turn the scores into per-token advantages
with the SLCA estimator (each reward normalised in its group and routed to its own segment's
tokens), and take one PPO-clip step. `slca train` does the same with checkpoints, evaluation,
logging and the fast paths; this file leaves those out so that the algorithm reads in one go.

    python examples/minimal_slca.py              # ~1 minute on 2 CPU cores
    python examples/minimal_slca.py --estimator grpo
"""

from __future__ import annotations

import argparse
import copy
import random

import torch

from slca_grpo.algos import compute_advantages, policy_loss, segments_from_mask
from slca_grpo.chat.formatter import ChatFormatter
from slca_grpo.data.synthetic import generate_suite, render_gold
from slca_grpo.engine import token_logprobs
from slca_grpo.models import build_tiny
from slca_grpo.rewards import RuleJudge, hierr
from slca_grpo.rollout.environment import ToolEnvironment
from slca_grpo.rollout.loop import AgentLoop, RolloutConfig
from slca_grpo.simulator import SimulatorConfig, build_simulator
from slca_grpo.trainer.batch import ends_with_answer, trajectory_batch
from slca_grpo.trainer.sft import SFTConfig, build_example, train_sft


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--estimator", default="slca", help="any registered estimator that needs HierR: slca, grpo")
    parser.add_argument("--sft-steps", type=int, default=150)
    parser.add_argument("--rl-steps", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=4, help="prompts per RL step")
    parser.add_argument("--group-size", type=int, default=6, help="rollouts per prompt (G)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)

    # 1. Tasks (prompt, tools, gold calls) and a tiny model whose tokenizer is trained on them.
    tasks = generate_suite(seed=args.seed, n_train=600, n_test=0).train
    model, tokenizer = build_tiny("tiny", seed=args.seed, corpus_texts=[render_gold(t) for t in tasks[:300]])
    formatter = ChatFormatter(tokenizer, max_tool_response_tokens=96)
    simulator = build_simulator(SimulatorConfig(backend="schema", seed=args.seed))

    # 2. SFT: a few gold trajectories teach the format (loss on the assistant's tokens only).
    def observe(call, task):
        return simulator.simulate(call, task.tools, f"sft-{task.id}").text

    examples = [e for e in (build_example(t, formatter, observe) for t in tasks) if e is not None]
    train_sft(
        model,
        examples,
        SFTConfig(steps=args.sft_steps, batch_size=16, lr=5e-3, warmup_ratio=0.05),
        pad_id=formatter.pad_id,
        seed=args.seed,
    )

    # 3. RL. The reference policy for the KL term is the SFT model, frozen.
    reference = copy.deepcopy(model).eval().requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.0)
    loop = AgentLoop(
        model,
        formatter,
        ToolEnvironment(simulator),
        RolloutConfig(
            group_size=args.group_size,
            max_turns=3,
            max_response_tokens=128,
            max_tool_response_tokens=96,
            temperature=1.0,
        ),
    )
    judge = RuleJudge()  # offline: rates how well the final answer is grounded in the tool responses
    rng = random.Random(args.seed)
    metrics: dict[str, float] = {}
    for step in range(args.rl_steps):
        prompts = rng.sample(tasks, args.prompts)

        # 3a. Rollouts: G per prompt, token-exact (prompt ids + sampled ids + injected tool responses).
        model.eval()
        with torch.no_grad():
            rollouts = loop.run(prompts, generator=torch.Generator().manual_seed(step), session_prefix=f"s{step}")
        rollout_tasks = [task for task in prompts for _ in range(args.group_size)]
        group_ids = torch.arange(len(prompts)).repeat_interleave(args.group_size)

        # 3b. HierR per rollout: the omission gate, R_tool (format, names, keys, values, parallel), R_sum.
        rewards = [hierr(r.response_text, task, judge) for r, task in zip(rollouts, rollout_tasks)]
        reward_tensors = {
            "score": torch.tensor([r.score for r in rewards]),
            "tool": torch.tensor([r.r_tool for r in rewards]),
            "summary": torch.tensor([r.r_sum for r in rewards]),
            "no_call": torch.tensor([r.no_call for r in rewards]),
        }

        # 3c. One right-padded batch of prompt + response; the learnable tokens are the sampled ones
        # (response_mask: 1 for generated tokens, 0 for injected tool responses).
        batch = trajectory_batch(rollouts, formatter.pad_id)
        input_ids, attention, learnable = batch.input_ids, batch.attention_mask, batch.loss_mask

        # 3d. Segments from the mask and what each turn holds: runs that asked for tool results are
        # the tool segment, the last run the summary when it is an answer; a rollout cut off on a
        # call has none (batch.segment_ids holds the same, computed by trajectory_batch). The
        # estimator routes each reward's group-normalised advantage to its own tokens.
        segment_ids = segments_from_mask(learnable, [ends_with_answer(r) for r in rollouts])
        advantages = compute_advantages(
            args.estimator, group_ids=group_ids, segment_ids=segment_ids, rewards=reward_tensors
        )

        # 3e. PPO-clip with dual clip and a k3 KL to the reference, token-mean; one optimizer step.
        model.train()
        logp = token_logprobs(model, input_ids, attention)
        with torch.no_grad():
            ref_logp = token_logprobs(reference, input_ids, attention)
        loss, loss_metrics = policy_loss(
            logp, None, ref_logp, advantages, learnable, clip=0.2, dual_clip=3.0, kl_coef=0.001, segment_ids=segment_ids
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

        metrics = {
            "score": float(reward_tensors["score"].mean()),
            "r_tool": float(reward_tensors["tool"].mean()),
            "r_sum": float(reward_tensors["summary"].mean()),
            "calls": sum(r.num_calls for r in rollouts) / len(rollouts),
            "loss": float(loss.detach()),
            **{k: float(v) for k, v in loss_metrics.items()},
        }
        print(
            f"step {step}: score {metrics['score']:+.3f}  R_tool {metrics['r_tool']:.3f}  "
            f"R_sum {metrics['r_sum']:.3f}  calls/rollout {metrics['calls']:.2f}  loss {metrics['loss']:+.4f}"
        )
    return metrics


if __name__ == "__main__":
    main()
