#!/usr/bin/env bash
# Set-up on a fresh machine: CPU torch first (an unpinned torch may pull a multi-GB CUDA build),
# then this package with its test tools.
set -euo pipefail
cd "$(dirname "$0")"
PIP="${PIP:-python -m pip}"
$PIP install --quiet torch==2.13.0
$PIP install --quiet -e ".[dev]"
