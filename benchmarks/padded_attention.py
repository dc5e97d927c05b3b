"""A right-padded SmolLM2 training pass, attention causal without the padding mask against with it.

    python benchmarks/padded_attention.py              # an SFT step's batch: 4 rows, forward + backward
    python benchmarks/padded_attention.py --no-bf16 --lengths 300,820,870

A padded batch hands SDPA a mask, and with a mask PyTorch's CPU flash kernel computes every
query-key block; ``unmasked_padding_attention`` (models/attention.py) runs right-padded batches
causal without one. Alternating order after a warm-up round; prints the median seconds each way, their ratio and the
largest log-prob difference. Times depend on the CPU: quote the ratio, with the machine.
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _common import alternate, print_medians  # noqa: E402

from slca_grpo.engine import token_logprobs  # noqa: E402
from slca_grpo.models import attention, load_model  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--lengths", default="820,847,858,870", help="tokens per row (default: 820,847,858,870)")
    parser.add_argument("--no-bf16", dest="bf16", action="store_false", help="float32 (default: bf16 autocast)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    try:
        lengths = [int(n) for n in args.lengths.split(",")]
    except ValueError:
        parser.error("--lengths takes comma-separated token counts")
    if min(lengths) < 2 or args.repeats < 1:
        parser.error("--lengths must be at least 2 tokens each and --repeats positive")

    model, tokenizer = load_model(args.model)
    generator = torch.Generator().manual_seed(0)
    high = len(tokenizer) - 20
    rows = [torch.randint(300, high, (n,), generator=generator).tolist() for n in lengths]
    width = max(lengths)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, tokens in enumerate(rows):
        ids[row, : len(tokens)] = torch.tensor(tokens)
        mask[row, : len(tokens)] = 1
    positions = mask.bool()
    positions[:, : width // 4] = False  # a prompt, then what is learned

    def step(min_hidden: int) -> torch.Tensor:
        attention.UNMASKED_PADDING_MIN_HIDDEN = min_hidden
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            values = token_logprobs(model, ids, mask, positions=positions)
        values.sum().backward()
        return values.detach()

    model.train()
    threshold = attention.UNMASKED_PADDING_MIN_HIDDEN
    try:
        times, results = alternate({"mask": lambda: step(10**9), "no mask": lambda: step(threshold)}, args.repeats)
    finally:
        attention.UNMASKED_PADDING_MIN_HIDDEN = threshold
    print(f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    precision = "bf16 autocast" if args.bf16 else "float32"
    print(f"{args.model}: forward + backward, rows of {lengths} tokens, {precision}")
    print_medians(times, base="mask")
    print(f"largest log-prob difference: {float((results['mask'] - results['no mask']).abs().max()):.2e}")


if __name__ == "__main__":
    main()
