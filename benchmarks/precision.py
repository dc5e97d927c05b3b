"""fp32 against bf16 on the CPU: training and generation tokens/s, and what each does to the loss.

    python benchmarks/precision.py                      # SmolLM2-135M-Instruct, a few minutes
    python benchmarks/precision.py --model tiny --steps 8
    python benchmarks/precision.py --threads 2 --batch 4 --json precision.json

Three ways to run the same model on the same batches, side by side with ratios to fp32:

- ``fp32``: float32 weights and math;
- ``bf16-autocast``: float32 weights (and optimizer state), matrix products in bfloat16
  (``torch.autocast``) — what ``rl.bf16: true`` does;
- ``bf16-weights``: the model cast to bfloat16, optimizer included.

Training is SFT on gold trajectories of the synthetic suite with the trainer's own loss (head
applied at learnable tokens only): seconds per step and tokens/s (every token of the padded batch).
Generation is the rollout sampler (KV cache, shared prompts) on ``--prompts`` prompts × ``--group``
rows. Loss fidelity: the loss of one fixed batch before training (difference to fp32's) and after
``--steps`` optimizer steps from the same start on the same batches (a precision that loses small
updates ends higher). CPUs with AMX / avx512_bf16 run bfloat16 matrix products natively.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

MODES = ("fp32", "bf16-autocast", "bf16-weights")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="smollm2, tiny, small or a checkpoint folder")
    parser.add_argument("--batch", type=int, default=4, help="gold trajectories per training step")
    parser.add_argument("--steps", type=int, default=3, help="measured optimizer steps per mode (after one warm-up)")
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--prompts", type=int, default=2, help="distinct prompts per generation call")
    parser.add_argument("--group", type=int, default=4, help="rows per prompt (G)")
    parser.add_argument("--new-tokens", type=int, default=48, help="tokens generated per row")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--json", type=Path, help="also write the results here")
    return parser


def gold_batches(tokenizer, count: int, batch: int):
    from slca_grpo.chat.formatter import ChatFormatter
    from slca_grpo.data.synthetic import generate_tasks
    from slca_grpo.trainer.sft import build_example

    formatter = ChatFormatter(tokenizer, max_tool_response_tokens=96)
    tasks = [t for t in generate_tasks(0, count * batch * 2, "train") if t.reference_answer]
    examples = [e for e in (build_example(t, formatter) for t in tasks) if e is not None]
    return formatter, [examples[i * batch : (i + 1) * batch] for i in range(count)], tasks


def run_mode(mode: str, base_model, formatter, batches, tasks, args) -> dict[str, float]:
    import torch

    from slca_grpo.engine.sampling import SamplingConfig, sample
    from slca_grpo.trainer.optim import build_optimizer
    from slca_grpo.trainer.sft import sft_loss

    model = copy.deepcopy(base_model)
    if mode == "bf16-weights":
        model = model.to(torch.bfloat16)

    def autocast():
        return torch.autocast("cpu", dtype=torch.bfloat16) if mode == "bf16-autocast" else nullcontext()

    model.eval()
    with torch.no_grad(), autocast():
        start_loss = float(sft_loss(model, batches[0], formatter.pad_id))
    optimizer = build_optimizer(model, lr=args.lr, weight_decay=0.0)
    model.train()
    seconds, tokens = [], []
    for step, batch in enumerate(batches[1:]):
        started = time.perf_counter()
        with autocast():
            loss = sft_loss(model, batch, formatter.pad_id)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step > 0:  # the first step warms up kernels and allocators
            seconds.append(time.perf_counter() - started)
            tokens.append(len(batch) * max(len(e.input_ids) for e in batch))
    model.eval()
    with torch.no_grad(), autocast():
        end_loss = float(sft_loss(model, batches[0], formatter.pad_id))

    prompts = [list(formatter.task_prompt_ids(t)) for t in tasks[: args.prompts] for _ in range(args.group)]
    generator = torch.Generator().manual_seed(0)
    generated, generation_seconds = 0, []
    for round_index in range(2):  # the first round warms up
        started = time.perf_counter()
        with torch.no_grad(), autocast():
            outputs = sample(
                model,
                prompts,
                max_new_tokens=args.new_tokens,
                config=SamplingConfig(temperature=1.0),
                stop_token_ids=[],
                pad_id=formatter.pad_id,
                generator=generator,
            )
        if round_index:
            generation_seconds.append(time.perf_counter() - started)
            generated += sum(len(o.token_ids) for o in outputs)
    step_seconds = statistics.median(seconds)
    return {
        "train_s_per_step": step_seconds,
        "train_tokens_per_s": sum(tokens) / sum(seconds),
        "generation_tokens_per_s": generated / sum(generation_seconds),
        "start_loss": start_loss,
        "end_loss": end_loss,
    }


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import torch

    from slca_grpo.models import load_model

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, tokenizer = load_model(args.model)
    formatter, batches, tasks = gold_batches(tokenizer, args.steps + 2, args.batch)
    results = {}
    for mode in args.modes:
        results[mode] = run_mode(mode, model, formatter, batches, tasks, args)
        print(f"[{mode}] {json.dumps({k: round(v, 4) for k, v in results[mode].items()})}", flush=True)

    reference = results.get("fp32")
    print(
        f"\n{args.model}: batch {args.batch} gold trajectories, {args.steps} measured steps, "
        f"{args.prompts}×{args.group} rows × {args.new_tokens} new tokens, {args.threads} threads\n"
    )
    rows = [
        ("train tokens/s", "train_tokens_per_s"),
        ("generation tokens/s", "generation_tokens_per_s"),
        ("train s/step", "train_s_per_step"),
        ("loss before training", "start_loss"),
        (f"loss after {args.steps + 1} steps", "end_loss"),
    ]
    print("| | " + " | ".join(args.modes) + " |")
    print("|---|" + "---:|" * len(args.modes))
    for label, key in rows:
        cells = []
        for mode in args.modes:
            value = results[mode][key]
            ratio = f" ({value / reference[key]:.2f}×)" if reference and "loss" not in key and mode != "fp32" else ""
            cells.append(f"{value:.4g}{ratio}")
        print(f"| {label} | " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(
            json.dumps({"settings": vars(args) | {"json": str(args.json)}, "results": results}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
