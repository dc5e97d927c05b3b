#!/usr/bin/env bash
# The one prepared check for a CUDA machine (torch and transformers preinstalled, nothing
# downloadable, minutes of device time). Run from the repository root:
#
#   bash benchmarks/gpu_check.sh [OUT_DIR]          # default OUT_DIR: ${OUT:-runs/gpu-check}
#
# 1. Makes the package importable without the network: PYTHONPATH=src, plus the wheels in
#    $GPU_WHEELS (default .whl; made here with `pip download --no-deps --only-binary=:all:
#    --python-version 3.12 ... -d .whl fastapi pydantic jsonschema ...`) for what the machine lacks.
# 2. Runs the CUDA tests (tests/test_cuda.py: CPU vs CUDA log-probs, sampler vs full forward in
#    float32 and bf16, greedy decoding, gradients) and the device, memory and LoRA tests.
# 3. Times short RL runs of the shipped reader (the quick demo's preset: SFT then GRPO) on CUDA at
#    float32 and bf16 autocast, at the demo's batch and at 8x its rollouts, and writes
#    OUT_DIR/gpu_check.json: seconds per step (first and steady), tokens/s, peak GPU memory.
#
# GPU_CHECK_DEVICE=cpu GPU_CHECK_STEPS=2 GPU_CHECK_SFT_STEPS=5 dry-runs it on a CPU; GPU_CHECK_RUNS puts
# the runs' folders elsewhere; GPU_CHECK_TEST_S / GPU_CHECK_RUN_S bound the two parts in seconds;
# GPU_CHECK_TESTS names the test files, GPU_CHECK_CONFIGS the runs (default 6:fp32,6:bf16,48:fp32,48:bf16:
# prompts per step and precision; a third field `nocache` runs without the kept turn cache, for an A/B
# on one machine and one commit).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR="${1:-${OUT:-runs/gpu-check}}"
mkdir -p "$OUT_DIR"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
WHEELS="${GPU_WHEELS:-.whl}"
if [ -d "$WHEELS" ] && ! python3 -c "import fastapi, jsonschema, tenacity" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/slca-site \
        "$WHEELS"/*.whl > "$OUT_DIR/pip.log" 2>&1 || echo "some wheels did not install (see $OUT_DIR/pip.log)"
    export PYTHONPATH="$PYTHONPATH:/tmp/slca-site"
fi
python3 - <<'PY' | tee "$OUT_DIR/environment.txt"
import torch, transformers
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
print("device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")
print("transformers", transformers.__version__)
if torch.cuda.is_available():
    print("memory_gb", round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1))
PY

timeout "${GPU_CHECK_TEST_S:-200}" python3 -m pytest -s -rs -p no:randomly -p no:cacheprovider -k "not smollm2" \
    ${GPU_CHECK_TESTS:-tests/test_cuda.py tests/test_device.py tests/test_memory.py tests/test_lora.py} 2>&1 | tee "$OUT_DIR/tests.txt" | tail -25

timeout "${GPU_CHECK_RUN_S:-330}" python3 - "$OUT_DIR" <<'PY'
import json, os, sys, time
from pathlib import Path

import torch

from slca_grpo.config import load_yaml_config
from slca_grpo.presets import resolve_config_path
from slca_grpo.trainer.logger import read_metrics
from slca_grpo.trainer.run import RunConfig, train

out = Path(sys.argv[1])
runs = Path(os.environ.get("GPU_CHECK_RUNS", out / "runs"))  # the runs' folders (only the summary is needed back)
device = os.environ.get("GPU_CHECK_DEVICE", "cuda")
steps = int(os.environ.get("GPU_CHECK_STEPS", "5"))
sft_steps = int(os.environ.get("GPU_CHECK_SFT_STEPS", "100"))
results = []
# The demo's batch (6 prompts x 8 rollouts) and 8x its rollouts; float32 first: the demo's precision.
runs_wanted = os.environ.get("GPU_CHECK_CONFIGS", "6:fp32,6:bf16,48:fp32,48:bf16")
import slca_grpo.rollout.loop as agent_loop

keep_turns = agent_loop.TurnCache
for config in runs_wanted.split(","):
    prompts, dtype, *variant = config.split(":")
    prompts, bf16, no_turn_cache = int(prompts), dtype == "bf16", variant == ["nocache"]
    # Without a turn cache every turn prefills its whole sequence again (the code before the cache).
    agent_loop.TurnCache = (lambda: None) if no_turn_cache else keep_turns
    name = f"reader-{prompts}x8-{dtype}" + ("-nocache" if no_turn_cache else "")
    overrides = [
        f"train.device={device}", f"train.out_dir={runs / name}", f"sft.steps={sft_steps}",
        f"rl.steps={steps}", f"rl.prompts_per_step={prompts}", f"rl.mini_batch_prompts={prompts}",
        f"rl.micro_batch_rollouts={prompts * 8}", f"rl.bf16={str(bf16).lower()}", f"sft.bf16={str(bf16).lower()}",
        "train.eval_every=0", "train.eval_tasks=8", "train.save_every=0", "train.progress=false",
    ]
    started = time.perf_counter()
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    try:
        train(load_yaml_config(RunConfig, resolve_config_path("demo-quick"), overrides), echo=False)
    except Exception as exc:  # record and go on: one failure should not hide the other numbers
        results.append({"run": name, "error": f"{type(exc).__name__}: {exc}"})
    else:
        rows = [m for m in read_metrics(runs / name / "metrics.jsonl") if "reward/score" in m]
        first, steady = rows[0], rows[1:] or rows
        mean = lambda key: sum(m[key] for m in steady) / len(steady)  # noqa: E731
        results.append({
            "run": name, "device": device, "rollouts_per_step": prompts * 8,
            "wall_s": round(time.perf_counter() - started, 1),
            "first_step_s": round(first["time/rollout_s"] + first["time/train_s"], 2),
            "steady_rollout_s": round(mean("time/rollout_s"), 2), "steady_train_s": round(mean("time/train_s"), 2),
            "rollout_tokens_per_s": round(mean("throughput/rollout_tokens_per_s")),
            "train_tokens_per_s": round(mean("throughput/train_tokens_per_s")),
            "truncated": round(mean("rollout/truncated"), 3), "kl": round(mean("train/kl"), 5),
            "peak_gb": round(max(m["memory/peak_gb"] for m in rows), 3),
        })
    print(results[-1], flush=True)
    (out / "gpu_check.json").write_text(json.dumps(results, indent=1))  # after each run: a time-out keeps what ran
PY
echo "results in $OUT_DIR/gpu_check.json"
