"""Is a run a function of its inputs, whatever the machine's load? The same short run (an SFT
checkpoint made once, then RL steps from it) alone and beside a torch job holding the cores, every
non-time metric compared exactly.

    python benchmarks/load_determinism.py [--preset demo-quick] [--steps 2] [--threads 2] [--out DIR]

Each run is a fresh ``slca train`` process with ``train.torch_threads`` fixed; the job beside it is
another process multiplying matrices on ``--load-threads`` threads until the run ends. Prints the
fields that differ (none, when the run does not depend on the load) and exits 1 if any does. The
records are in docs/experiments/training.md.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

# What a run writes that is a time, a rate or a memory figure, not a result.
TIME_WORDS = ("time", "seconds", "_s", "per_s", "throughput", "eta", "memory", "rss", "elapsed")

LOAD = """
import sys, torch
torch.set_num_threads(int(sys.argv[1]))
a = torch.randn(1024, 1024)
while True:
    a = torch.tanh(a @ a.T / 32)
"""


def is_time(key: str) -> bool:
    return any(word in key.lower() for word in TIME_WORDS)


def results(run: Path) -> dict[str, object]:
    """Every logged value that is not a time, keyed by file, line and name."""
    found: dict[str, object] = {}
    for name in ("metrics.jsonl", "sft_metrics.jsonl"):
        path = run / name
        if not path.exists():
            continue
        for number, line in enumerate(path.read_text().splitlines()):
            for key, value in json.loads(line).items():
                if not is_time(key):
                    found[f"{name}:{number}:{key}"] = value
    summary = json.loads((run / "summary.json").read_text())
    for key, value in summary.items():
        if not is_time(key) and key != "native_kernels":
            found[f"summary.json:{key}"] = value
    return found


def train(args: argparse.Namespace, out: Path, sft: Path | None) -> None:
    command = [
        sys.executable, "-c", "import sys; from slca_grpo.cli import main; sys.exit(main())", "train", args.preset,
        "--set", f"train.out_dir={out}", "--set", f"train.torch_threads={args.threads}",
        "--set", f"rl.steps={args.steps}", "--set", f"train.eval_tasks={args.eval_tasks}",
        "--set", "train.progress=false",
    ]  # fmt: skip
    if sft is not None:  # from the SFT checkpoint made once, so both runs start from the same weights
        command += ["--set", f"model.name={sft}", "--set", "sft.steps=0"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="demo-quick")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2, help="train.torch_threads of both runs")
    parser.add_argument("--load-threads", type=int, default=2, help="threads of the job beside the loaded run")
    parser.add_argument("--eval-tasks", type=int, default=8)
    parser.add_argument("--out", default="runs/load-determinism")
    args = parser.parse_args()
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    train(args, out / "sft-run", None)  # SFT, then the first alone run
    sft = out / "sft-run" / "sft"
    train(args, out / "alone", sft)
    load = subprocess.Popen([sys.executable, "-c", LOAD, str(args.load_threads)])
    try:
        time.sleep(2)  # the job is multiplying before the run starts (its timing is not compared)
        train(args, out / "loaded", sft)
    finally:
        load.kill()
        load.wait()
    alone, loaded = results(out / "alone"), results(out / "loaded")
    differ = sorted(k for k in alone.keys() | loaded.keys() if not _same(alone.get(k), loaded.get(k)))
    print(f"{len(alone)} values compared, {len(differ)} differ ({time.perf_counter() - started:.0f} s)")
    for key in differ[:40]:
        print(f"  {key}: alone {alone.get(key)!r}, loaded {loaded.get(key)!r}")
    return 1 if differ else 0


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


if __name__ == "__main__":
    sys.exit(main())
