"""Size the reader by measurement: a few model shapes pretrained for the same CPU time each.

Each shape gets the number of steps its measured step time allows within ``--minutes`` (a full
warm-up and cosine schedule over those steps), then its probe loss, copy accuracy and greedy
drill accuracy are recorded against compute (tokens and CPU-seconds). Finished shapes are
skipped on a rerun, and an interrupted one resumes. Writes ``sweep.json`` and ``sweep.png`` into
``--out``.

    python benchmarks/reader_sweep.py --minutes 6 --out runs/reader-sweep
    python benchmarks/reader_sweep.py --out runs/reader-sweep --with-run "4x128 build=runs/reader@3.3"

``--step-seconds 4x128=2.11,...`` gives step times measured beforehand on the idle machine (the
measurement is skewed while other work shares the cores); ``--with-run`` adds a finished build's
probe curve (a longer budget) to the plot.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import torch

from slca_grpo.models import load_model
from slca_grpo.models.tiny import TinyModelConfig, build_tiny_model, count_parameters
from slca_grpo.models.tokenizer import train_tokenizer
from slca_grpo.trainer.logger import read_metrics
from slca_grpo.trainer.pretrain import PretrainConfig, drill_accuracy, next_token_loss, pretrain

SHAPES = {
    "4x128": TinyModelConfig(num_layers=4, hidden_size=128, num_heads=4, num_kv_heads=2, intermediate_size=384),
    "4x192": TinyModelConfig(num_layers=4, hidden_size=192, num_heads=6, num_kv_heads=2, intermediate_size=576),
    "6x192": TinyModelConfig(num_layers=6, hidden_size=192, num_heads=6, num_kv_heads=2, intermediate_size=576),
}


def step_seconds(config: PretrainConfig, shape: TinyModelConfig, tokenizer) -> float:
    """The best of three optimizer steps of this shape on random tokens (the probe of its cost)."""
    model = build_tiny_model(tokenizer, shape)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(1, len(tokenizer), (config.rows_per_step, config.seq_len))
    times = []
    for _ in range(3):
        began = time.perf_counter()
        loss = next_token_loss(model, ids, ids, bf16=config.bf16)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - began)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=8.0, help="CPU minutes of training per shape")
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, from {', '.join(SHAPES)}")
    parser.add_argument("--out", default="runs/reader-sweep")
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument(
        "--with-run",
        action="append",
        default=[],
        metavar="NAME=DIR@S",
        help="also plot a finished `slca pretrain` run (its metrics.jsonl) at S seconds a step, e.g. a longer build",
    )
    parser.add_argument(
        "--step-seconds",
        default="",
        metavar="NAME=S,...",
        help="step times measured beforehand on the idle machine (a busy one would skew the budgets)",
    )
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = PretrainConfig(bf16=args.bf16)
    from slca_grpo.data.corpus import document

    tokenizer = train_tokenizer(
        [document(i, base.corpus)[1] for i in range(200)], vocab_size=base.vocab_size, pretokenizer=base.pretokenizer
    )
    results = json.loads((out / "sweep.json").read_text()) if (out / "sweep.json").exists() else {}
    for name in [n for n in args.shapes.split(",") if n]:
        shape = SHAPES[name]
        run = out / name
        if name in results:
            print(f"{name}: done before, skipped")
            continue
        given = dict(item.split("=") for item in args.step_seconds.split(",") if item)
        seconds = float(given[name]) if name in given else step_seconds(base, shape, tokenizer)
        steps = max(20, int(args.minutes * 60 / seconds))
        config = replace(
            base, model=shape, steps=steps, warmup_steps=max(5, steps // 10), probe_every=max(1, steps // 4)
        )
        print(f"{name}: {seconds:.2f} s a step -> {steps} steps", flush=True)
        began = time.monotonic()
        final = pretrain(config, run, resume=(run / "checkpoints").exists(), progress=False)
        elapsed = time.monotonic() - began
        model, model_tokenizer = load_model(final)
        torch.manual_seed(0)
        drills = drill_accuracy(model, model_tokenizer, per_kind=50, seed=123)
        probes = [r for r in read_metrics(run / "metrics.jsonl") if "probe/loss" in r]
        results[name] = {
            "parameters": count_parameters(model),
            "step_seconds": seconds,
            "steps": steps,
            "tokens": steps * config.rows_per_step * config.seq_len,
            "wall_seconds": elapsed,
            "curve": [
                {
                    "step": r["step"],
                    "tokens": r["step"] * config.rows_per_step * config.seq_len,
                    "loss": r["probe/loss"],
                    "copy_acc": r["probe/copy_acc"],
                }
                for r in probes
            ],
            "drills": drills,
        }
        (out / "sweep.json").write_text(json.dumps(results, indent=1))
        print(f"{name}: {json.dumps(results[name]['drills'])} probe loss {probes[-1]['probe/loss']:.3f}", flush=True)
    for item in args.with_run:
        name, _, rest = item.partition("=")
        folder, _, seconds = rest.rpartition("@")
        probes = [r for r in read_metrics(Path(folder) / "metrics.jsonl") if "probe/loss" in r]
        config = json.loads((Path(folder) / "pretrain_config.json").read_text())
        tokens_per_step = config["rows_per_step"] * config["seq_len"]
        results[name] = {
            "parameters": results.get(name, {}).get("parameters") or _parameters(config),
            "step_seconds": float(seconds),
            "steps": probes[-1]["step"],
            "curve": [
                {
                    "step": r["step"],
                    "tokens": r["step"] * tokens_per_step,
                    "loss": r["probe/loss"],
                    "copy_acc": r["probe/copy_acc"],
                }
                for r in probes
            ],
        }
    plot(results, out / "sweep.png")


def _parameters(config: dict) -> int:
    from slca_grpo.models import load_model

    _, tokenizer = load_model("reader")
    return count_parameters(build_tiny_model(tokenizer, TinyModelConfig(**config["model"])))


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for name, result in results.items():
        seconds = [point["step"] * result["step_seconds"] / 60 for point in result["curve"]]
        label = f"{name} ({result['parameters'] / 1e6:.1f} M, {result['steps']} steps)"
        left.plot(seconds, [point["loss"] for point in result["curve"]], marker="o", label=label)
        right.plot(seconds, [point["copy_acc"] for point in result["curve"]], marker="o", label=label)
    left.set_xlabel("CPU minutes (2 cores)")
    left.set_ylabel("probe loss (nats/token)")
    right.set_xlabel("CPU minutes (2 cores)")
    right.set_ylabel("probe copy accuracy (teacher-forced)")
    right.set_ylim(0, 1)
    for axis in (left, right):
        axis.set_xscale("log")
    left.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


if __name__ == "__main__":
    main()
