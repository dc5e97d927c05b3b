"""One SmolLM2 training micro-batch (forward + backward) under bf16 autocast, with attention in
bfloat16 (what autocast does) and in float32 (what ``token_logprobs`` does on a CPU).

    python benchmarks/train_attention.py              # 4 rollouts: a 550-token prompt + 175 tokens each
    python benchmarks/train_attention.py --repeats 5

Alternating order, the first round a warm-up; prints the median seconds of each, their ratio and
the largest log-prob difference. Times depend on the CPU: quote the ratio, with the machine.
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _common import alternate, print_medians  # noqa: E402

from slca_grpo.engine import logprobs as batch  # noqa: E402
from slca_grpo.models import load_model  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--rows", type=int, default=4, help="rollouts of one prompt (the preset's micro-batch)")
    parser.add_argument("--prompt-tokens", type=int, default=550)
    parser.add_argument("--response-tokens", type=int, default=175)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if min(args.rows, args.prompt_tokens, args.response_tokens, args.repeats) < 1:
        parser.error("--rows, --prompt-tokens, --response-tokens and --repeats must be positive")

    model, tokenizer = load_model(args.model)
    model.train()
    generator = torch.Generator().manual_seed(0)
    high = len(tokenizer) - 20
    prompt = torch.randint(300, high, (args.prompt_tokens,), generator=generator)
    responses = [torch.randint(300, high, (args.response_tokens,), generator=generator) for _ in range(args.rows)]
    rows = torch.stack([torch.cat([prompt, response]) for response in responses])
    mask = torch.ones_like(rows)
    positions = torch.zeros_like(rows, dtype=torch.bool)
    positions[:, args.prompt_tokens :] = True
    # token_logprobs is _token_logprobs inside training_attention; the bf16 way skips the switch.
    passes = {
        "bf16 attention": lambda: batch._token_logprobs(model, rows, mask, 1.0, 1, positions),
        "float32 attention": lambda: batch.token_logprobs(model, rows, mask, positions=positions),
    }

    def step(way: str) -> torch.Tensor:
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            values = passes[way]()
        values.sum().backward()
        return values.detach()

    times, logprobs = alternate({way: lambda way=way: step(way) for way in passes}, args.repeats)
    print(f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    shape = f"{args.rows} rows x ({args.prompt_tokens} prompt + {args.response_tokens}) tokens"
    print(f"{args.model}: {shape}, {args.repeats} repeats")
    print_medians(times, base="bf16 attention")
    difference = (logprobs["bf16 attention"] - logprobs["float32 attention"]).abs().max()
    print(f"largest log-prob difference: {float(difference):.3f}")


if __name__ == "__main__":
    main()
