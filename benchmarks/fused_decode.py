"""A preset's rollout phase with the sampler's fused decode step against the model's own layers.

    python benchmarks/fused_decode.py                        # demo-smollm2: 4 prompts x G = 4, bf16: auto
    python benchmarks/fused_decode.py --rounds 5
    python benchmarks/fused_decode.py --set rl.bf16=false    # float32

One process builds the preset's RL trainer and rolls out the same tasks from the same seed, ``fused``
(``FusedDecoder``: what the sampler does for Llama and Qwen2 models at least 512 wide) and
``layers`` (the fused step switched off) in alternating order after a warm-up, so background load
hits both alike. Prints the median seconds of the phase each way, their ratio, and the response
tokens each sampled: under bf16 autocast the fused step's logits are the layers' bit for bit on the
CPUs we measured, so both sample the same tokens; in float32 rounding can move a draw, and then
seconds per token is the fairer ratio. Quote the ratios, with the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _common import alternate  # noqa: E402

from slca_grpo.config import ConfigError, load_yaml_config  # noqa: E402
from slca_grpo.models.device import bf16_autocast  # noqa: E402
from slca_grpo.presets import resolve_config_path  # noqa: E402
from slca_grpo.rollout.fused_decode import FusedDecoder  # noqa: E402
from slca_grpo.trainer.build import build_rl_trainer, rl_models, start_process  # noqa: E402
from slca_grpo.trainer.run_config import RunConfig  # noqa: E402
from slca_grpo.trainer.run_data import load_data, task_sampler  # noqa: E402


@contextlib.contextmanager
def layers_only():
    """The sampler runs the model's layers for every decode step within the block."""
    real = FusedDecoder.__dict__["for_sampler"]
    FusedDecoder.for_sampler = classmethod(lambda cls, *args: None)
    try:
        yield
    finally:
        FusedDecoder.for_sampler = real


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="demo-smollm2", help="a preset name or YAML file (default: demo-smollm2)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rollout phases each way (default: 3)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be positive")

    try:
        config = load_yaml_config(RunConfig, resolve_config_path(args.config), args.overrides)
    except (ConfigError, FileNotFoundError) as error:
        parser.error(str(error))
    device = start_process(config)
    train_tasks, _ = load_data(config.data)
    model, tokenizer, ref_model = rl_models(config, config.model.name, None, train_tasks, device)
    trainer = build_rl_trainer(config, model, ref_model, tokenizer, rl=config.rl)
    tasks = task_sampler(train_tasks, config.train.seed, config.rl.prompts_per_step)(0)

    def rollouts(way: str) -> int:
        context = layers_only() if way == "layers" else contextlib.nullcontext()
        with context, bf16_autocast(trainer.device, trainer.bf16):
            trajectories = trainer.loop.run(tasks, generator=torch.Generator().manual_seed(7), session_prefix="bench")
        return sum(len(t.response_ids) for t in trajectories)

    ways = ["fused", "layers"]
    # The warm-up round also packs the weights and starts the allocator and the simulator.
    seconds, tokens = alternate(
        {way: lambda way=way: rollouts(way) for way in ways},
        args.rounds,
        report=lambda way, elapsed, count: print(f"[{way}] {elapsed:.2f} s, {count:,} response tokens", flush=True),
    )
    print(f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    precision = "bf16 autocast" if trainer.bf16 else "float32"
    rounds = f"{args.rounds} round" + ("s" if args.rounds != 1 else "")
    print(f"{args.config}: {len(tasks)} prompts x G = {config.rollout.group_size}, {precision}, {rounds}")
    print("| way | seconds (median) | response tokens | ms / token |")
    print("|---|---:|---:|---:|")
    for way in ways:
        median = statistics.median(seconds[way])
        print(f"| {way} | {median:.2f} | {tokens[way]:,} | {1000 * median / max(1, tokens[way]):.2f} |")
    fused, layers = (statistics.median(seconds[way]) for way in ways)
    per_token = (layers / max(1, tokens["layers"])) / (fused / max(1, tokens["fused"]))
    print(f"fused: {layers / fused:.2f}x the layers' phase, {per_token:.2f}x per token")


if __name__ == "__main__":
    main()
