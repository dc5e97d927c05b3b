"""Time the segmenters and every registered advantage estimator on a large batch.

Default: 2,048 rollouts x 8,192 tokens in groups of 16, random masks with several runs each (as a
multi-turn rollout has). Prints the median seconds of a few repeats and the ratio to GRPO.

    python benchmarks/advantages.py [--rollouts 2048] [--tokens 8192] [--repeats 5] [--device cpu]

Exits non-zero only when something raises.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import torch

from slca_grpo.algos import (
    compute_advantages,
    estimator_spec,
    list_estimators,
    segment_ids_from_mask,
    turn_count,
)

BOOL_REWARDS = {"no_call", "success"}
PER_TURN_REWARDS = {"turn"}
SEGMENTERS = {"role": "segments_from_mask", "turn": "turn_segments_from_mask"}


def random_masks(rollouts: int, tokens: int, generator: torch.Generator) -> torch.Tensor:
    """``[B, T]`` bool masks: alternating assistant runs / tool responses, then padding.

    Each row flips between learnable and injected text about every ``tokens / 8`` positions and
    stops at a random length, so rows have 1 to ~8 runs (some only a summary).
    """
    flip_rate = 8.0 / tokens
    flips = torch.rand(rollouts, tokens, generator=generator) < flip_rate
    in_assistant_turn = flips.cumsum(dim=1) % 2 == 0
    lengths = torch.randint(tokens // 8, tokens + 1, (rollouts, 1), generator=generator)
    return in_assistant_turn & (torch.arange(tokens) < lengths)


def random_rewards(names: set[str], rollouts: int, generator: torch.Generator, turns: int = 1) -> dict:
    """One random value per rollout for each reward; ``[B, turns]`` for the per-turn ones."""
    rewards: dict[str, torch.Tensor] = {}
    for name in names:
        if name in PER_TURN_REWARDS:
            rewards[name] = torch.rand(rollouts, max(1, turns), generator=generator)
        elif name in BOOL_REWARDS:
            rewards[name] = torch.rand(rollouts, generator=generator) < 0.2
        elif name == "score":
            # Some negative scores so SLCA's penalty branch runs too.
            rewards[name] = torch.rand(rollouts, generator=generator) * 2.5 - 0.5
        else:
            rewards[name] = torch.rand(rollouts, generator=generator)
    return rewards


def median_seconds(operations: dict[str, Callable[[], object]], repeats: int, device: torch.device) -> dict[str, float]:
    """Median wall time of each operation; repeats are interleaved (round-robin) so that a burst
    of background load hits every operation alike instead of skewing the ratios."""

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    times: dict[str, list[float]] = {name: [] for name in operations}
    for repeat in range(repeats + 1):  # the first round is a warm-up (allocator, lazy init)
        for name, operation in operations.items():
            sync()
            start = time.perf_counter()
            operation()
            sync()
            if repeat:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=2048)
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--group-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    args = parser.parse_args(argv)
    if min(args.rollouts, args.tokens, args.group_size, args.repeats) < 1:
        parser.error("--rollouts, --tokens, --group-size and --repeats must be positive")

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    generator = torch.Generator().manual_seed(args.seed)
    mask = random_masks(args.rollouts, args.tokens, generator).to(device)
    group_ids = (torch.arange(args.rollouts) // args.group_size).to(device)
    names = list_estimators()
    layouts = sorted({estimator_spec(name).segmentation for name in names} | {"role"})
    segment_ids = {layout: segment_ids_from_mask(layout, mask) for layout in layouts}
    turns = turn_count(segment_ids["turn"]) if "turn" in segment_ids else 0
    reward_names = {key for name in names for key in estimator_spec(name).rewards}
    rewards = random_rewards(reward_names, args.rollouts, generator, turns)
    rewards = {key: value.to(device) for key, value in rewards.items()}
    runs = (mask[:, 1:] & ~mask[:, :-1]).sum(1) + mask[:, 0]

    print(
        f"{args.rollouts} rollouts x {args.tokens} tokens, groups of {args.group_size}, "
        f"{args.repeats} repeats (median), device {device}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} CPU threads; runs per row: mean {runs.float().mean():.1f}, "
        f"max {int(runs.max())}"
    )
    operations: dict[str, Callable[[], object]] = {
        SEGMENTERS[layout]: lambda layout=layout: segment_ids_from_mask(layout, mask) for layout in layouts
    }
    for name in names:
        operations[name] = lambda name=name: compute_advantages(
            name, group_ids=group_ids, segment_ids=segment_ids[estimator_spec(name).segmentation], rewards=rewards
        )
    timings = median_seconds(operations, args.repeats, device)

    baseline = timings.get("grpo")
    width = max(len(key) for key in timings)
    print(f"{'operation'.ljust(width)}  {'seconds':>9}  {'x grpo':>7}")
    for key, seconds in timings.items():
        ratio = f"{seconds / baseline:7.2f}" if baseline else "      -"
        print(f"{key.ljust(width)}  {seconds:9.4f}  {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
