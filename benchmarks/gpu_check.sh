#!/usr/bin/env bash
# The one prepared check for a CUDA machine (torch and transformers preinstalled, nothing
# downloadable, ~15 minutes). Run from the repository root:
#
#   bash benchmarks/gpu_check.sh [OUT_DIR]          # default OUT_DIR: ${OUT:-runs/gpu-check}
#
# 1. Makes the package importable without the network: PYTHONPATH=src, plus wheels from
#    $GPU_WHEELS (a folder made here with `pip download -d wheels tenacity peft regex ...`) when the
#    machine lacks them.
# 2. Runs the device tests on CUDA (tests/test_device.py's CUDA test, the LoRA and memory tests).
# 3. Times short RL runs (tiny and small models, fp32 and bf16 autocast) on cuda and writes
#    OUT_DIR/gpu_check.json: tokens/s of rollouts and training, seconds per step, peak GPU memory.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR="${1:-${OUT:-runs/gpu-check}}"
mkdir -p "$OUT_DIR"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
if [ -n "${GPU_WHEELS:-}" ] && [ -d "$GPU_WHEELS" ]; then
    python -m pip install --quiet --no-index --find-links "$GPU_WHEELS" --no-deps "$GPU_WHEELS"/*.whl \
        > "$OUT_DIR/pip.log" 2>&1 || echo "some wheels did not install (see $OUT_DIR/pip.log)"
fi
python - <<'PY' | tee "$OUT_DIR/environment.txt"
import torch, transformers
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
print("device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")
print("transformers", transformers.__version__)
PY

timeout 300 python -m pytest -q -p no:randomly -p no:cacheprovider tests/test_device.py tests/test_memory.py \
    tests/test_lora.py 2>&1 | tail -15 | tee "$OUT_DIR/tests.txt"

timeout 540 python - "$OUT_DIR" <<'PY'
import json, sys, time
from pathlib import Path

from slca_grpo.config import load_yaml_config
from slca_grpo.presets import resolve_config_path
from slca_grpo.trainer.logger import read_metrics
from slca_grpo.trainer.run import RunConfig, train

out = Path(sys.argv[1])
results = []
for model in ("tiny", "small"):
    for bf16 in (False, True):
        name = f"{model}-{'bf16' if bf16 else 'fp32'}"
        overrides = [
            f"model.name={model}", "train.device=cuda", f"train.out_dir={out / name}", "data.n_train=2000",
            "data.n_test=32", "sft.steps=200", "rl.steps=12", "rl.prompts_per_step=8", "rl.mini_batch_prompts=8",
            "rollout.group_size=8", f"rl.bf16={str(bf16).lower()}", f"sft.bf16={str(bf16).lower()}",
            "train.eval_tasks=32", "train.eval_every=0", "train.save_every=0", "train.progress=false",
        ]
        started = time.perf_counter()
        try:
            train(load_yaml_config(RunConfig, resolve_config_path("demo-quick"), overrides), echo=False)
        except Exception as exc:  # record and go on: one failure should not hide the other numbers
            results.append({"run": name, "error": f"{type(exc).__name__}: {exc}"})
            continue
        steps = [m for m in read_metrics(out / name / "metrics.jsonl") if "reward/score" in m][2:]  # warm
        mean = lambda key: sum(m[key] for m in steps) / len(steps)  # noqa: E731
        results.append({
            "run": name,
            "wall_s": round(time.perf_counter() - started, 1),
            "rollout_tokens_per_s": round(mean("throughput/rollout_tokens_per_s")),
            "train_tokens_per_s": round(mean("throughput/train_tokens_per_s")),
            "step_s": round(mean("time/rollout_s") + mean("time/train_s"), 3),
            "peak_gb": round(max(m["memory/peak_gb"] for m in steps), 3),
        })
        print(results[-1], flush=True)
(out / "gpu_check.json").write_text(json.dumps(results, indent=1))
PY
echo "results in $OUT_DIR/gpu_check.json"
