"""A preset's rollout phase as the sampler runs it against without its CPU shortcuts, one by one.

    python benchmarks/fused_decode.py                        # demo-smollm2: 4 prompts x G = 4, bf16: auto
    python benchmarks/fused_decode.py --rounds 5
    python benchmarks/fused_decode.py --set rl.bf16=false    # float32
    python benchmarks/fused_decode.py --ways fused,torch-attention
    python benchmarks/fused_decode.py --set rl.bf16=true --ways fused,torch-attention   # its bfloat16 path

One process builds the preset's RL trainer and rolls out the same tasks from the same seed in each
way, in alternating order after a warm-up, so background load hits all alike: ``fused``
(``FusedDecoder`` with the shared-prompt attention in C, ``engine/native.py``, and distinct prompts
prefilled one by one: what the sampler does for Llama and Qwen2 models at least 512 wide on a CPU),
``torch-attention`` (that attention in PyTorch's batched products, on float32 caches or, under bf16
autocast, bfloat16 ones), ``layers`` (the fused step switched off), ``padded-prefill`` (the
distinct prompts prefilled as one left-padded batch) and
``onednn-products`` (float32 weights packed for oneDNN's product instead of the C kernel's,
``csrc/small_product.c``, and a prefill's rows in the plain product); each changes that one thing.
Prints the median seconds of the phase each way, the response tokens each sampled and the ratios to
``fused``, per phase and per token: rounding can move a draw (the C attention does not round its
scores to bfloat16 as PyTorch's products do), so the ways may sample different tokens, and then
seconds per token is the fairer ratio. Quote the ratios, with the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import statistics
import sys
import weakref
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _common import alternate  # noqa: E402

from slca_grpo.config import ConfigError, load_yaml_config  # noqa: E402
from slca_grpo.engine import fused_decode, native, packed_linear, sampling  # noqa: E402
from slca_grpo.engine.fused_decode import FusedDecoder  # noqa: E402
from slca_grpo.models.device import bf16_autocast  # noqa: E402
from slca_grpo.presets import resolve_config_path  # noqa: E402
from slca_grpo.trainer.build import build_rl_trainer, rl_models, start_process  # noqa: E402
from slca_grpo.trainer.run_config import RunConfig  # noqa: E402
from slca_grpo.trainer.run_data import load_data, task_sampler  # noqa: E402

# Each way but "fused" switches one of the sampler's CPU shortcuts off for the rollouts it times.
CONTEXTS = {
    "fused": contextlib.nullcontext,
    # the model's layers for every decode step
    "layers": lambda: mock.patch.object(FusedDecoder, "for_sampler", classmethod(lambda cls, *args: None)),
    # the shared-prompt attention in PyTorch's products
    "torch-attention": lambda: mock.patch.object(native, "prefix_decode_attention", lambda *args: None),
    # distinct prompts prefilled as one left-padded batch
    "padded-prefill": lambda: mock.patch.object(sampling, "_prefills_one_by_one", lambda *args: False),
    # float32 weights packed for oneDNN's product, and a prefill's rows in the plain product (the C
    # kernel's panels kept apart)
    "onednn-products": lambda: _onednn_products(),
}


@contextlib.contextmanager
def _onednn_products():
    with (
        mock.patch.object(native, "pack_panels", lambda weight: None),
        mock.patch.object(packed_linear, "_float32_panels", weakref.WeakKeyDictionary()),
        mock.patch.object(fused_decode, "_packed_models", _onednn_packed_models),
    ):
        yield


_onednn_packed_models = weakref.WeakKeyDictionary()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="demo-smollm2", help="a preset name or YAML file (default: demo-smollm2)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rollout phases each way (default: 3)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--ways", default=",".join(CONTEXTS), help="comma-separated ways to time (default: all)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be positive")
    ways = [way.strip() for way in args.ways.split(",") if way.strip()]
    if not ways or any(way not in CONTEXTS for way in ways):
        parser.error(f"--ways takes some of {', '.join(CONTEXTS)}")
    if "fused" not in ways:
        ways.insert(0, "fused")  # the reference for ratios

    try:
        config = load_yaml_config(RunConfig, resolve_config_path(args.config), args.overrides)
    except (ConfigError, FileNotFoundError) as error:
        parser.error(str(error))
    device = start_process(config)
    train_tasks = load_data(config.data).train
    model, tokenizer, ref_model = rl_models(config, config.model.name, None, train_tasks, device)
    trainer = build_rl_trainer(config, model, ref_model, tokenizer, rl=config.rl)
    tasks = task_sampler(train_tasks, config.train.seed, config.rl.prompts_per_step)(0)

    def rollouts(way: str) -> int:
        with CONTEXTS[way](), bf16_autocast(trainer.device, trainer.bf16):
            trajectories = trainer.loop.run(tasks, generator=torch.Generator().manual_seed(7), session_prefix="bench")
        return sum(len(t.response_ids) for t in trajectories)

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
    print("| way | seconds (median) | response tokens | ms / token | fused is faster: phase / per token |")
    print("|---|---:|---:|---:|---:|")
    fused = statistics.median(seconds["fused"]) / max(1, tokens["fused"])
    for way in ways:
        median = statistics.median(seconds[way])
        per_token = median / max(1, tokens[way])
        ratios = f"{median / statistics.median(seconds['fused']):.2f}x / {per_token / fused:.2f}x"
        print(f"| {way} | {median:.2f} | {tokens[way]:,} | {1000 * per_token:.2f} | {ratios} |")


if __name__ == "__main__":
    main()
