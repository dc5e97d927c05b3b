#!/usr/bin/env bash
# The reader sweep (recipes/reader/benchmarks/reader_sweep.py) on a CUDA machine with minutes to
# spare: several shapes at once, then everything packed into a few files of OUT_DIR.
#
#   bash recipes/reader/benchmarks/reader_sweep_gpu.sh [OUT_DIR] [RUN ...]   # default OUT_DIR: ${OUT:-runs/sweep-gpu}
#
# Wheels in $GPU_WHEELS (default .whl) are installed for what the machine lacks, as
# benchmarks/gpu_check.sh does. SWEEP_S bounds the sweep in seconds (unfinished runs keep their
# curves so far); SWEEP_THREADS sets the CPU threads of each run; SWEEP_MODELS names the runs whose models come
# back (a finished run's model/, else its newest checkpoint's: weights only, no optimizer state).
# The device tool brings back at most 8 files: sweep.tgz (curves, logs) and up to 7 models.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT_DIR="${1:-${OUT:-runs/sweep-gpu}}"
shift || true
RUNS=("$@")
[ ${#RUNS[@]} -gt 0 ] || RUNS=(4x128 4x192 6x192 8x256)
mkdir -p "$OUT_DIR"
export PYTHONPATH="$PWD:$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
WHEELS="${GPU_WHEELS:-.whl}"
if [ -d "$WHEELS" ] && ! python3 -c "import fastapi, jsonschema, tenacity" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/slca-site \
        "$WHEELS"/*.whl > /tmp/slca-pip.log 2>&1 || { echo "some wheels did not install:"; tail -5 /tmp/slca-pip.log; }
    export PYTHONPATH="$PYTHONPATH:/tmp/slca-site"
fi
WORK="${SWEEP_WORK:-/tmp/reader-sweep}"
mkdir -p "$WORK"
DEVICE="${SWEEP_DEVICE:-cuda}"
timeout "${SWEEP_S:-420}" python3 recipes/reader/benchmarks/reader_sweep.py "${RUNS[@]}" --device "$DEVICE" --jobs ${#RUNS[@]} \
    --threads "${SWEEP_THREADS:-2}" --out "$WORK" > "$WORK/sweep.log" 2>&1
python3 recipes/reader/benchmarks/reader_sweep.py --out "$WORK" 2>&1 | tee "$WORK/gather.log"  # curves of unfinished runs too
tar czf "$OUT_DIR/sweep.tgz" -C "$WORK" --exclude=checkpoints --exclude=model --exclude=.lock .
for name in $(echo ${SWEEP_MODELS:-} | tr ' ' '\n' | head -7); do
    run="$WORK/$name"
    model="$run/model"
    [ -d "$model" ] || model="$(ls -d "$run"/checkpoints/step-*/model 2>/dev/null | tail -1)"
    [ -n "$model" ] && [ -d "$model" ] && tar czf "$OUT_DIR/model-$name.tgz" -C "$(dirname "$model")" model
done
ls -la "$OUT_DIR"
