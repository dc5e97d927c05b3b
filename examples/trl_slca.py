"""SLCA-GRPO from a TRL script: the shipped reader trained with TRL's GRPOTrainer and SLCA's advantages.

    python examples/trl_slca.py                     # ~5 minutes on 2 CPU cores (AVX2)
    python examples/trl_slca.py --estimator grpo    # the same run with GRPO's advantages

The ten lines a TRL user writes are in ``train()``: a model and its tokenizer, the tasks as a
dataset (each row carries its tools and gold calls), TRL's ``GRPOConfig``, and ``SLCATrainer`` in
place of ``GRPOTrainer``. Rollouts run through slca-grpo's agent loop (the simulator plays every
tool), HierR scores them, and the estimator's per-token advantages feed TRL's loss.

Before and after training, a fixed probe set of held-out tasks (no update trains on them) is rolled
out greedily and scored with HierR: the probe reward is what the run learned.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # TRL calls rollout_func experimental

from trl import GRPOConfig

from slca_grpo.chat.chat_format import build_formatter
from slca_grpo.data.synthetic import generate_suite
from slca_grpo.integrations.trl import AgentLoopRollouts, SLCATrainer, TaskRewards, task_dataset
from slca_grpo.models import load_model
from slca_grpo.rollout.loop import RolloutConfig


def train(estimator: str, steps: int, out: str, train_tasks, seed: int):
    model, tokenizer = load_model("reader")
    args = GRPOConfig(
        output_dir=out, max_steps=steps, per_device_train_batch_size=32, num_generations=8, learning_rate=2e-4,
        beta=0.001, max_completion_length=160, use_cpu=True, bf16=False, logging_steps=5, save_strategy="no",
        report_to=[], seed=seed,
    )  # fmt: skip
    trainer = SLCATrainer(
        model, args=args, train_dataset=task_dataset(train_tasks), processing_class=tokenizer, estimator=estimator
    )
    trainer.train()
    return trainer.model, tokenizer


def probe_reward(model, tokenizer, tasks) -> dict[str, float]:
    """Mean HierR score and R_tool of one greedy rollout per probe task."""
    rollouts = AgentLoopRollouts()
    rollouts.formatter = build_formatter(tokenizer)
    greedy = RolloutConfig(group_size=1, temperature=0.0, max_response_tokens=160)
    trajectories = rollouts.run(model, tasks, settings=greedy, seed=0)
    scored = TaskRewards().score(
        [t.response_text for t in trajectories], tasks, turns=[[turn.text for turn in t.turns] for t in trajectories]
    )
    values = scored.batch.as_dict()
    return {"score": statistics.fmean(values["score"]), "tool": statistics.fmean(values["tool"])}


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--estimator", default="slca", help="any registered estimator: slca, grpo, toolpo, ...")
    parser.add_argument("--steps", type=int, default=15, help="RL steps of 4 prompts x 8 rollouts")
    parser.add_argument("--probe", type=int, default=32, help="held-out probe tasks")
    parser.add_argument("--out", default="runs/trl-slca")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    suite = generate_suite(seed=args.seed, n_train=4 * args.steps, n_test=args.probe)
    before_model, tokenizer = load_model("reader")
    before = probe_reward(before_model, tokenizer, suite.test)
    started = time.perf_counter()
    model, tokenizer = train(args.estimator, args.steps, args.out, suite.train, args.seed)
    minutes = (time.perf_counter() - started) / 60
    after = probe_reward(model, tokenizer, suite.test)
    print(
        f"{args.estimator} through TRL, {args.steps} steps in {minutes:.1f} min: probe score "
        f"{before['score']:.3f} -> {after['score']:.3f}, R_tool {before['tool']:.3f} -> {after['tool']:.3f}"
    )
    return {"before": before["score"], "after": after["score"], "minutes": minutes}


if __name__ == "__main__":
    main()
