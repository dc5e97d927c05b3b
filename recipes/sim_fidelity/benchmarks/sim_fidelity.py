"""SGLS against τ²-Bench's real tools, timed; the same as ``python -m recipes.sim_fidelity`` (the recipe's README.md).

Replays each task's gold tool calls and perturbed copies of them through τ²'s real environment and
through the simulator, prints the sim-to-real table and the wall time.

    python recipes/sim_fidelity/benchmarks/sim_fidelity.py --domain airline            # all 50 airline tasks
    python recipes/sim_fidelity/benchmarks/sim_fidelity.py --domain airline,retail --limit 10
    python recipes/sim_fidelity/benchmarks/sim_fidelity.py --domain retail --returns   # SGLS also sees return schemas
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository's root: the recipe

from recipes.sim_fidelity.cli import main as fidelity


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    status = fidelity(sys.argv[1:] if argv is None else argv)
    print(f"wall time: {time.perf_counter() - started:.1f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
