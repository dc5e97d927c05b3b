"""One pretraining step of the reader (forward, backward, AdamW) with the loss through the output
layer a chunk at a time (``recipes/reader/chunked_loss.py``, what ``recipes.reader.pretrain`` runs)
against the model's own loss (full logits, ``transformers``' cross-entropy).

    python recipes/reader/benchmarks/pretrain_step.py      # the reader's shape, 6 rows of 2,048 tokens
    python recipes/reader/benchmarks/pretrain_step.py --rounds 5 --rows 12 --seq-len 1024

Alternating order, the first round a warm-up; prints the median seconds of each and their ratio.
Times depend on the CPU: quote the ratio, with the machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "src"), str(ROOT / "benchmarks")]  # the recipe, the package, _common

from _common import alternate, print_medians

from recipes.reader.pretrain import PretrainConfig, next_token_loss
from slca_grpo.models import READER, load_model
from slca_grpo.models.tiny import build_tiny_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=PretrainConfig.rows_per_step)
    parser.add_argument("--seq-len", type=int, default=PretrainConfig.seq_len)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bf16", action="store_true")
    args = parser.parse_args()
    if min(args.rows, args.seq_len, args.rounds) < 1:
        parser.error("--rows, --seq-len and --rounds must be positive")
    _, tokenizer = load_model(READER)
    model = build_tiny_model(tokenizer, PretrainConfig().model)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(1, len(tokenizer), (args.rows, args.seq_len), generator=torch.Generator().manual_seed(0))

    def step(loss_of) -> float:
        loss = loss_of()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.item()

    def model_loss() -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            return model(input_ids=ids, labels=ids).loss

    ways = {
        "chunked": lambda: step(lambda: next_token_loss(model, ids, ids, bf16=args.bf16)),
        "model-loss": lambda: step(model_loss),
    }
    times, _ = alternate(ways, args.rounds)
    print(f"{args.rows} rows x {args.seq_len} tokens, {'bf16' if args.bf16 else 'float32'}")
    print_medians(times, base="model-loss")


if __name__ == "__main__":
    main()
