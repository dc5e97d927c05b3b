#!/usr/bin/env bash
# A three-step smoke run of the verl pipeline on one GPU: Qwen2.5-0.5B-Instruct, 8 prompts × 4
# rollouts per step, the offline schema simulator and rule judge (config/smoke_1gpu.yaml).
# It writes its own small synthetic dataset first. Needs vLLM and a CUDA GPU (docs/verl.md).
#   MODEL  a local folder or Hugging Face id (default Qwen/Qwen2.5-0.5B-Instruct)
#   OUT    where the data goes (default runs/verl-smoke)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
MODEL="${MODEL:-Qwen/Qwen2.5-0.5B-Instruct}"
OUT="$(realpath -m "${OUT:-runs/verl-smoke}")"  # Ray workers do not start in this folder
slca verl data demo-quick --out "${OUT}/data" --set data.n_train=64 --set data.n_test=16
exec python -m verl.trainer.main_ppo \
    --config-path="${HERE}/config" --config-name=smoke_1gpu \
    actor_rollout_ref.model.path="${MODEL}" \
    data.train_files="${OUT}/data/train.parquet" data.val_files="${OUT}/data/test.parquet" \
    trainer.default_local_dir="${OUT}/checkpoints" \
    "$@"
