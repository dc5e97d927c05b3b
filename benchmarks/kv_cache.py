"""Decode-step time of the rollout sampler's cache and attention against ``transformers``' own.

    python benchmarks/kv_cache.py                      # the reader's shape, 48 rows, ~1,000 cached tokens
    python benchmarks/kv_cache.py --rows 16 --steps 40 --repeats 5
    python benchmarks/kv_cache.py --model smollm2 --rows 16 --group-size 4 --prompt-tokens 650 --steps 20 --bf16
    python benchmarks/kv_cache.py --model smollm2 --rows 16 --group-size 4 --prompt-tokens 650 --bf16 \
        --ways fused,torch-attention                   # the C attention on a bfloat16 cache against PyTorch's

Eight ways to run the same one-token decode steps after the same left-padded prefill, each
repeated ``--repeats`` times in alternating order so background load hits all alike:
``dynamic`` (``DynamicCache`` and SDPA: what ``transformers`` does), ``in-place`` (our
``GrowingLayer`` cache), ``grouped`` (our one-token attention that does not expand grouped keys)
``both``, ``packed``: both, with the large linear layers' weights packed once for oneDNN, and
``shared``: packed, with the rows of a prompt sharing its cached keys and values, and ``fused``:
shared, with each step run by ``FusedDecoder`` instead of the model's layers (what the sampler
uses; on a model narrower than 128 (``SHARED_PREFIX_MIN_HIDDEN``), or not a Llama or Qwen2, the last
three change nothing), and
``torch-attention``: fused, with the shared-prompt attention in PyTorch's batched products instead
of the C kernel (``engine/native.py``; float32 or, with ``--bf16``, bfloat16 caches).
``--ways`` picks some of them. It prints the median
milliseconds per step of each and its ratio to ``dynamic``, and the largest logit difference from
``dynamic`` (numerics, not speed).
Times depend on the CPU: quote the ratios, with the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from slca_grpo.engine import kv_cache, native  # noqa: E402
from slca_grpo.engine.fused_decode import FusedDecoder  # noqa: E402
from slca_grpo.engine.packed_linear import packed_linears  # noqa: E402
from slca_grpo.engine.sampling import cache_keyword, distinct_rows, output_cache, prefill_shared  # noqa: E402
from slca_grpo.models import load_model  # noqa: E402

# way -> (in-place cache, grouped one-token attention, packed linear weights, shared prompts, fused step,
# the shared-prompt attention in C where it applies)
WAYS = {
    "dynamic": (False, False, False, False, False, True),
    "in-place": (True, False, False, False, False, True),
    "grouped": (False, True, False, False, False, True),
    "both": (True, True, False, False, False, True),
    "packed": (True, True, True, False, False, True),
    "shared": (True, True, True, True, False, True),
    "fused": (True, True, True, True, True, True),
    "torch-attention": (True, True, True, True, True, False),
}


def decode_steps(model, prompts, pad_id, steps, growing, grouped, packed, shared, fused, c_attention, bf16):
    cache = kv_cache.growing_cache(model, share_prefixes=shared) if growing else None
    extra = {cache_keyword(model): cache} if growing else {}
    attention = kv_cache.decode_attention(model, cache) if grouped else contextlib.nullcontext()
    packing = packed_linears(model) if packed else contextlib.nullcontext()
    # Refused by the C kernel, kv_cache.prefix_decode_attention takes PyTorch's products.
    refused = mock.patch.object(native, "prefix_decode_attention", lambda *args: None)
    in_c = contextlib.nullcontext() if c_attention else refused
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16), attention, packing, in_c:
        prefill = prefill_shared(model, *distinct_rows(prompts), pad_id=pad_id, device="cpu", logits_to_keep=1, **extra)
        past, attention, last = prefill.cache, prefill.attention, prefill.positions[:, -1:]
        tokens = torch.full((len(prompts),), 5)
        logits = []
        decoder = FusedDecoder.for_sampler(model, past, len(prompts)) if fused else None  # packs its weights
        start = time.perf_counter()
        for _ in range(steps):
            attention = torch.cat([attention, attention.new_ones((len(prompts), 1))], dim=1)
            last = last + 1
            if decoder is not None:
                logits.append(decoder.step(past, tokens, attention, last))
            else:
                output = model(
                    input_ids=tokens[:, None],
                    attention_mask=attention,
                    position_ids=last,
                    use_cache=True,
                    **{cache_keyword(model): past},
                )
                past = output_cache(output)
                logits.append(output.logits[:, -1])
            tokens = logits[-1].argmax(-1)
        seconds = (time.perf_counter() - start) / steps
    return seconds, torch.stack(logits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="reader", help="a model name or folder (default: the shipped reader)")
    parser.add_argument("--rows", type=int, default=48, help="rollouts decoding together (default: 6 prompts x 8)")
    parser.add_argument("--prompt-tokens", type=int, default=1000, help="longest prompt (others shorter)")
    parser.add_argument("--group-size", type=int, default=8, help="rows that share a prompt (default: 8)")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--bf16", action="store_true", help="decode under bf16 autocast (as bf16: auto does on native-bf16 CPUs)"
    )
    parser.add_argument("--ways", default=",".join(WAYS), help="comma-separated ways to time (default: all)")
    args = parser.parse_args()
    ways = [way.strip() for way in args.ways.split(",") if way.strip()]
    if not ways or any(way not in WAYS for way in ways):
        parser.error(f"--ways takes some of {', '.join(WAYS)}")
    if "dynamic" not in ways:
        ways.insert(0, "dynamic")  # the reference for ratios and logits
    if min(args.rows, args.prompt_tokens, args.group_size, args.steps, args.repeats) < 1:
        parser.error("--rows, --prompt-tokens, --group-size, --steps and --repeats must be positive")
    if args.prompt_tokens - 90 * (max(1, args.rows // args.group_size) - 1) < 1:
        parser.error("--prompt-tokens is too short for that many prompts (each is 90 tokens shorter than the last)")

    model, tokenizer = load_model(args.model)
    generator = torch.Generator().manual_seed(0)
    groups = max(1, args.rows // args.group_size)
    lengths = [args.prompt_tokens - 90 * i for i in range(groups)]
    distinct = [torch.randint(300, len(tokenizer) - 20, (n,), generator=generator).tolist() for n in lengths]
    # Prompt by prompt, as the trainer lays out a group's rollouts.
    prompts = [distinct[min(i // args.group_size, groups - 1)] for i in range(args.rows)]
    times: dict[str, list[float]] = {way: [] for way in ways}
    reference = None
    differences: dict[str, float] = {}
    for repeat in range(args.repeats):
        order = ways if repeat % 2 == 0 else list(reversed(ways))
        for way in order:
            seconds, logits = decode_steps(model, prompts, tokenizer.pad_token_id, args.steps, *WAYS[way], args.bf16)
            times[way].append(seconds)
            if way == "dynamic" and reference is None:
                reference = logits
            elif reference is not None:
                differences[way] = max(differences.get(way, 0.0), float((logits - reference).abs().max()))
    base = statistics.median(times["dynamic"])
    print(f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    precision = "bf16 autocast" if args.bf16 else "float32"
    print(
        f"{args.rows} rows ({args.group_size} per prompt), prompts up to {args.prompt_tokens} tokens, "
        f"{args.steps} steps, {args.repeats} repeats"
    )
    print(f"precision: {precision}")
    print("| way | ms / step | vs dynamic | max logit diff |")
    print("|---|---:|---:|---:|")
    for way in ways:
        median = statistics.median(times[way])
        diff = "–" if way == "dynamic" else f"{differences.get(way, 0.0):.1e}"
        print(f"| {way} | {median * 1000:.1f} | {base / median:.2f}x | {diff} |")


if __name__ == "__main__":
    main()
