#!/usr/bin/env bash
# SLCA-GRPO on verl, the paper's setting: Qwen2.5-7B-Instruct on NNODES nodes × 8 GPUs, G = 16,
# 128 prompts per step (config/qwen2.5-7b.yaml, laid over verl's ppo_trainer; docs/verl.md).
# Start Ray on every node first (`ray start --head` here, `ray start --address=HEAD:6379` on the
# others), with this package and its verl extra installed in the same environment everywhere.
#   MODEL      a local folder or Hugging Face id (default Qwen/Qwen2.5-7B-Instruct)
#   DATA       a folder with train.parquet and test.parquet (`slca verl data`; default data/verl)
#   NNODES     nodes (default 1)
#   SIMULATOR  URL of a shared `slca serve-sim` (default: a simulator in each agent-loop worker)
#   JUDGE      the judge, "rule" or openai:URL#MODEL (default: the config's gpt-oss-120b endpoint)
# Any further arguments are hydra overrides, e.g. algorithm.adv_estimator=grpo for the baseline.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
MODEL="${MODEL:-Qwen/Qwen2.5-7B-Instruct}"
DATA="$(realpath -m "${DATA:-data/verl}")"  # Ray workers do not start in this folder
NNODES="${NNODES:-1}"
extra=()
[[ -n "${SIMULATOR:-}" ]] && extra+=("slca.simulator_service.url=${SIMULATOR}")
[[ -n "${JUDGE:-}" ]] && extra+=("slca.reward.judge=${JUDGE}")
exec python -m verl.trainer.main_ppo \
    --config-path="${HERE}/config" --config-name=qwen2.5-7b \
    actor_rollout_ref.model.path="${MODEL}" \
    data.train_files="${DATA}/train.parquet" data.val_files="${DATA}/test.parquet" \
    trainer.nnodes="${NNODES}" trainer.n_gpus_per_node=8 \
    "${extra[@]}" "$@"
