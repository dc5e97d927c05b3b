"""Rollouts with each group's prompt prefilled once in every turn, against re-prefilling every row.

    python benchmarks/turn_prefill.py                              # the quick demo's config (the reader)
    python benchmarks/turn_prefill.py --model runs/demo-quick/sft  # a model that calls tools, so turns go on
    python benchmarks/turn_prefill.py --config demo-smollm2 --prompts 2 --repeats 1

After a rollout's first turn its rows differ (their responses and tool results), so a sampler that
dedupes whole prompts prefills every row's full context again: the group's prompt G times per
turn. ``shared`` prefills the prompt once per group and each row's own rest on top of it (what the
agent loop does); ``per-row`` is the same loop with that turned off. Both roll out the same tasks
from the same seed, alternating A B A B, and the table gives the median seconds per rollout batch,
the ratio, and whether they sampled the same tokens (greedy: they must; sampling at temperature 1
may differ where float noise moves a draw across a boundary). Quote the ratio, with the machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from slca_grpo.config import load_yaml_config  # noqa: E402
from slca_grpo.engine.sampling import SamplingConfig, sample  # noqa: E402
from slca_grpo.presets import resolve_config_path  # noqa: E402
from slca_grpo.provenance import cpu_model  # noqa: E402
from slca_grpo.rollout import loop as loop_module  # noqa: E402
from slca_grpo.rollout.environment import ToolEnvironment  # noqa: E402
from slca_grpo.rollout.loop import AgentLoop  # noqa: E402
from slca_grpo.trainer.build import load_policy, make_formatter, make_simulator  # noqa: E402
from slca_grpo.trainer.run_config import RunConfig  # noqa: E402
from slca_grpo.trainer.run_data import load_data  # noqa: E402


def per_row_sample(*args, prefix_lengths=None, **kwargs):
    return sample(*args, **kwargs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="demo-quick", help="preset or YAML (default: demo-quick)")
    parser.add_argument("--model", help="override model.name (e.g. an SFT checkpoint that calls tools)")
    parser.add_argument("--prompts", type=int, default=4, help="tasks per rollout batch (G rollouts each)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--greedy", action="store_true", help="temperature 0 (the token check is then exact)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    overrides = [f"model.name={args.model}"] if args.model else []
    config = load_yaml_config(RunConfig, resolve_config_path(args.config), overrides)
    train_tasks = load_data(config.data).train
    model, tokenizer = load_policy(config.model, train_tasks)
    formatter = make_formatter(config, tokenizer)
    tasks = train_tasks[: args.prompts]
    sampling = SamplingConfig(temperature=0.0) if args.greedy else None
    ways = {"shared": sample, "per-row": per_row_sample}
    times: dict[str, list[float]] = {way: [] for way in ways}
    tokens: dict[str, list[list[int]]] = {}
    turns = []
    for repeat in range(args.repeats + 1):  # the first round warms up
        for way in ways if repeat % 2 == 0 else reversed(list(ways)):
            loop_module.sample = ways[way]
            # A fresh simulator each time: the same sessions then answer the same calls alike.
            loop = AgentLoop(model, formatter, ToolEnvironment(make_simulator(config)), config.rollout)
            started = time.perf_counter()
            trajectories = loop.run(
                tasks, sampling=sampling, generator=torch.Generator().manual_seed(0), session_prefix="bench"
            )
            if repeat:
                times[way].append(time.perf_counter() - started)
            tokens[way] = [t.response_ids for t in trajectories]
            turns = [len(t.turns) for t in trajectories]
    loop_module.sample = sample
    base = statistics.median(times["per-row"])
    print(f"{cpu_model()}, {torch.get_num_threads()} threads, torch {torch.__version__}; {config.model.name}")
    print(
        f"{len(tasks)} prompts × G = {config.rollout.group_size}, {sum(turns) / len(turns):.2f} turns a rollout, "
        f"{args.repeats} repeats{', greedy' if args.greedy else ''}"
    )
    print("| way | s / rollout batch | vs per-row |")
    print("|---|---:|---:|")
    for way in ways:
        median = statistics.median(times[way])
        print(f"| {way} | {median:.2f} | {base / median:.2f}x |")
    same = tokens["shared"] == tokens["per-row"]
    print(f"same tokens: {'yes' if same else 'no'}")


if __name__ == "__main__":
    main()
