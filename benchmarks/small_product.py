"""The float32 products of one decode step: the C kernel's panels against oneDNN's packed weights.

    python benchmarks/small_product.py                    # SmolLM2's shapes, 16 rows
    python benchmarks/small_product.py --rows 4 --rounds 9
    python benchmarks/small_product.py --rows 840 --rounds 3   # a prefill's rows

A decode step of SmolLM2 multiplies a few rows by each of its 30 layers' joined weights (query, key
and value; output; gate and up; down) and by the output head: 121 products, 540 MB of float32
weights, so each step streams them from memory. This builds weights of those shapes (random: the
values do not change the time), packs each both ways (``engine/native.py``'s panels for
``csrc/small_product.c``, and ``torch.ops.mkldnn``'s reorder as ``packed_linear`` did before), and
times the whole sequence each way and with the plain weights (``torch.nn.functional.linear``: what
a prefill's hundreds of rows used before, ``--rows 840``), in alternating order, printing the median
milliseconds, the GFLOP/s and the ratio. Quote the ratio with the machine; on an AVX2-only CPU emulate with
``ONEDNN_MAX_CPU_ISA=AVX2 SLCA_NATIVE_CFLAGS=-march=x86-64-v3`` if you have none.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _common import alternate  # noqa: E402

from slca_grpo.engine import native  # noqa: E402
from slca_grpo.engine.packed_linear import packed_product, packing_available  # noqa: E402

# SmolLM2-135M: hidden 576, 9 query and 3 key/value heads of 64, MLP 1536, vocabulary 49,152.
LAYER_SHAPES = [(960, 576), (576, 576), (3072, 576), (576, 1536)]  # [out, in] of the joined weights
HEAD_SHAPE = (49152, 576)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=16, help="rows of a decode step (default: 16)")
    parser.add_argument("--layers", type=int, default=30, help="layers (default: 30, SmolLM2's)")
    parser.add_argument("--rounds", type=int, default=7, help="timed steps each way (default: 7)")
    args = parser.parse_args()
    if args.rows < 1 or args.layers < 1 or args.rounds < 1:
        parser.error("--rows, --layers and --rounds must be positive")
    if native.library() is None or not packing_available():
        sys.exit("error: this benchmark needs the C kernels built (a C compiler) and torch's oneDNN ops")

    shapes = LAYER_SHAPES * args.layers + [HEAD_SHAPE]
    generator = torch.Generator().manual_seed(0)
    weights = [torch.randn(shape, generator=generator) * 0.02 for shape in shapes]
    packed = {
        "c-panels": [native.pack_panels(weight) for weight in weights],
        "onednn": [torch.ops.mkldnn._reorder_linear_weight(weight, args.rows) for weight in weights],
        "plain": weights,
    }
    inputs = {width: torch.randn(args.rows, width, generator=generator) for width in {k for _, k in shapes}}

    def step(way: str) -> None:
        for weight, (_, width) in zip(packed[way], shapes):
            if way == "plain":
                torch.nn.functional.linear(inputs[width], weight)
            else:
                packed_product(inputs[width], weight, None)

    seconds, _ = alternate({way: lambda way=way: step(way) for way in packed}, args.rounds)
    flops = sum(2 * args.rows * n * k for n, k in shapes)
    megabytes = sum(4 * n * k for n, k in shapes) / 1e6
    print(f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    print(f"{len(shapes)} float32 products of {args.rows} rows, {megabytes:,.0f} MB of weights, {args.rounds} rounds")
    print("| way | ms (median) | GFLOP/s | c-panels is faster |")
    print("|---|---:|---:|---:|")
    reference = statistics.median(seconds["c-panels"])
    for way, values in seconds.items():
        median = statistics.median(values)
        print(f"| {way} | {1000 * median:.1f} | {flops / median / 1e9:.0f} | {median / reference:.2f}x |")


if __name__ == "__main__":
    main()
