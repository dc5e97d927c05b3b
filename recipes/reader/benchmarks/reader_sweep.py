"""Size the reader by measurement: model shapes pretrained on the same budget and the recipe's corpus.

Each run is ``SHAPE[@STEPS]`` (``4x128``, ``8x256@9000``): a full ``recipes.reader.pretrain``
build (warm-up, length curriculum, cosine schedule) of that shape, with the probe set every 100
steps and, every ``--task-eval-every`` steps, greedy rollouts
on 40 synthetic test tasks and greedy drills. Each run writes its own folder under ``--out``
(resumable: a rerun continues unfinished runs and skips finished ones) and ``result.json``; the
sweep then gathers every run in ``--out`` into ``sweep.json`` and ``sweep.png`` (probe loss, copied
and name accuracy, task Name-F1 and greedy drills against training compute, 6 x parameters x tokens).

    python recipes/reader/benchmarks/reader_sweep.py 4x128 4x192 --steps 3000 --out runs/reader-sweep
    python recipes/reader/benchmarks/reader_sweep.py 4x128 6x192 8x256 --device cuda --jobs 3 --out $OUT/sweep
    python recipes/reader/benchmarks/reader_sweep.py --out runs/reader-sweep     # gather and plot only

``--minutes M`` instead sizes each run to M minutes of this machine (its step time measured first),
the CPU-budget sweep; ``--jobs`` runs several at once (a GPU has room; a 2-core CPU has not).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository's root: the recipe

from recipes.reader.pretrain import PretrainConfig, next_token_loss, pretrain
from slca_grpo.models import load_model
from slca_grpo.models.checkpoint import latest_checkpoint
from slca_grpo.models.tiny import TinyModelConfig, build_tiny_model, count_parameters
from slca_grpo.models.tokenizer import train_tokenizer
from slca_grpo.trainer.logger import read_metrics

SHAPES = {
    "4x128": TinyModelConfig(num_layers=4, hidden_size=128, num_heads=4, num_kv_heads=2, intermediate_size=384),
    "4x192": TinyModelConfig(num_layers=4, hidden_size=192, num_heads=6, num_kv_heads=2, intermediate_size=576),
    "6x192": TinyModelConfig(num_layers=6, hidden_size=192, num_heads=6, num_kv_heads=2, intermediate_size=576),
    "8x256": TinyModelConfig(num_layers=8, hidden_size=256, num_heads=8, num_kv_heads=2, intermediate_size=768),
}


def parse_run(spec: str, default_steps: int) -> tuple[str, int]:
    """``SHAPE[@STEPS]`` as (shape, steps); a bad one is a one-line error."""
    shape, _, steps = spec.partition("@")
    if shape not in SHAPES or (steps and not steps.isdigit()):
        raise SystemExit(f"run {spec!r}: expected SHAPE[@STEPS], SHAPE in {list(SHAPES)}")
    return shape, int(steps) if steps else default_steps


def run_name(shape: str, steps: int) -> str:
    return f"{shape}-{steps}"


def build_config(shape: str, steps: int, args: argparse.Namespace) -> PretrainConfig:
    base = PretrainConfig(bf16=args.bf16, task_eval_every=args.task_eval_every)
    config = replace(base, model=SHAPES[shape], steps=steps)
    if steps < base.steps:  # a short budget keeps the schedule's proportions
        scale = steps / base.steps
        config = replace(
            config,
            warmup_steps=max(5, int(base.warmup_steps * scale)),
            short_seq_steps=int(base.short_seq_steps * scale),
            corpus=replace(config.corpus, warmup_docs=int(base.corpus.warmup_docs * scale)),
            probe_every=max(1, steps // 10),
        )
    return config


def step_seconds(config: PretrainConfig, device: str) -> float:
    """The best of three optimizer steps of this shape on random tokens (the probe of its cost)."""
    tokenizer = train_tokenizer(["a b c d e f g"] * 10, vocab_size=300, pretokenizer=config.pretokenizer)
    model = build_tiny_model(tokenizer, config.model).to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(1, len(tokenizer), (config.rows_per_step, config.seq_len), device=device)
    times = []
    for _ in range(3):
        began = time.perf_counter()
        loss = next_token_loss(model, ids, ids, bf16=config.bf16)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - began)
    return min(times)


def run_one(spec: str, args: argparse.Namespace) -> None:
    shape, steps = parse_run(spec, args.steps)
    if args.minutes:
        seconds = step_seconds(build_config(shape, 3000, args), args.device)
        steps = max(20, int(args.minutes * 60 / seconds))
    config = build_config(shape, steps, args)
    folder = Path(args.out) / run_name(shape, steps)
    if (folder / "result.json").exists():
        print(f"{folder.name}: done before, skipped", flush=True)
        return
    print(f"{folder.name}: {steps} steps on {args.device}", flush=True)
    began = time.monotonic()
    resume = (folder / "checkpoints").exists()
    final = pretrain(config, folder, resume=resume, progress=False, device=args.device)
    result = {
        "shape": shape,
        "steps": steps,
        "parameters": _parameters(final),
        "tokens_per_step": config.rows_per_step * config.seq_len,
        "device": args.device,
        "machine": _machine(args.device),
        "wall_seconds_this_call": time.monotonic() - began,
        "resumed": resume,
        "curve": _curve(folder / "metrics.jsonl"),
    }
    (folder / "result.json").write_text(json.dumps(result, indent=1))
    print(f"{folder.name}: done in {result['wall_seconds_this_call']:.0f} s; last: {result['curve'][-1]}", flush=True)


def _curve(metrics_path: Path) -> list[dict]:
    """Each probe step's measurements (probe set, task evaluation, greedy drills) from a metrics.jsonl."""
    return [
        {k: v for k, v in row.items() if k == "step" or k.startswith(("probe/", "tasks/", "drill/"))}
        for row in read_metrics(metrics_path)
        if "probe/loss" in row
    ]


def _parameters(model_folder: Path) -> int:
    return count_parameters(load_model(model_folder)[0])


def _machine(device: str) -> str:
    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return platform.processor() or platform.machine()


def gather(out: Path) -> dict:
    results = {}
    for path in sorted(out.glob("*/result.json")):
        results[path.parent.name] = json.loads(path.read_text())
    for path in sorted(out.glob("*/metrics.jsonl")):  # unfinished runs: their curve so far
        name = path.parent.name
        checkpoint = latest_checkpoint(path.parent / "checkpoints")
        if name not in results and checkpoint is not None:  # its weights give the parameter count
            config = json.loads((path.parent / "pretrain_config.json").read_text())
            results[name] = {
                "unfinished": True,
                "steps": config["steps"],
                "parameters": _parameters(checkpoint / "model"),
                "tokens_per_step": config["rows_per_step"] * config["seq_len"],
                "curve": _curve(path),
            }
    (out / "sweep.json").write_text(json.dumps(results, indent=1))
    if results:
        plot(results, out / "sweep.png")
    return results


def _compute(result: dict, step: int) -> float:
    """Training compute up to ``step``: 6 x parameters x tokens (embeddings included)."""
    return 6 * result["parameters"] * step * result["tokens_per_step"]


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (
        ("probe/loss", "probe loss (nats/token)"),
        ("probe/copy_acc", "probe: copied tokens right"),
        ("probe/name_acc", "probe: called names right"),
        ("tasks/name_f1", "40 test tasks, greedy: Name-F1"),
        ("drill/recall", "greedy drills: recall"),
        ("drill/fill", "greedy drills: fill JSON"),
    )
    figure, axes = plt.subplots(2, 3, figsize=(15, 8))
    for (key, title), axis in zip(panels, axes.flat):
        for name, result in results.items():
            points = [p for p in result["curve"] if key in p]
            if points:
                axis.plot(
                    [_compute(result, p["step"]) for p in points], [p[key] for p in points], marker=".", label=name
                )
        axis.set_xscale("log")
        axis.set_xlabel("training compute (FLOP, 6 x parameters x tokens)")
        axis.set_title(title)
        if key != "probe/loss":
            axis.set_ylim(0, 1)
    axes.flat[0].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="*", help="SHAPE[@STEPS]; none: gather and plot what --out holds")
    parser.add_argument("--steps", type=int, default=3000, help="steps of a run that names none (default 3000)")
    parser.add_argument("--minutes", type=float, help="instead: each run's steps fill this many minutes here")
    parser.add_argument("--out", default="runs/reader-sweep")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--task-eval-every", type=int, default=500)
    parser.add_argument("--jobs", type=int, default=1, help="runs at once, each in its own process")
    parser.add_argument("--threads", type=int, help="torch threads per run")
    parser.add_argument("--no-gather", action="store_true", help=argparse.SUPPRESS)  # a --jobs child
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.threads:
        torch.set_num_threads(args.threads)
    for spec in args.runs:
        parse_run(spec, args.steps)  # every spec checked before any work
    if args.jobs > 1 and len(args.runs) > 1:
        base = [
            sys.executable,
            __file__,
            "--no-gather",
            "--out",
            args.out,
            "--steps",
            str(args.steps),
            "--device",
            args.device,
        ]
        base += ["--task-eval-every", str(args.task_eval_every)] + (["--bf16"] if args.bf16 else [])
        base += ["--threads", str(args.threads)] if args.threads else []
        base += ["--minutes", str(args.minutes)] if args.minutes else []
        pending, running = list(args.runs), []
        while pending or running:
            while pending and len(running) < args.jobs:
                spec = pending.pop(0)
                log = open(out / f"{spec.replace(':', '-').replace('@', '-')}.log", "w")  # noqa: SIM115
                running.append((subprocess.Popen([*base, spec], stdout=log, stderr=subprocess.STDOUT), log))
            time.sleep(2)
            for process, log in [r for r in running if r[0].poll() is not None]:
                log.close()
                running.remove((process, log))
    else:
        for spec in args.runs:
            run_one(spec, args)
    if args.no_gather:
        return
    results = gather(out)
    for name, result in results.items():
        last = result["curve"][-1] if result["curve"] else {}
        print(name, "(unfinished)" if result.get("unfinished") else "", json.dumps(last), flush=True)


if __name__ == "__main__":
    main()
