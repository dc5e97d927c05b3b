"""SGLS against τ²-Bench's real tools; the same as ``slca fidelity`` (docs/simulator.md, "Sim-to-real fidelity").

Replays each task's gold tool calls and perturbed copies of them through τ²'s real environment and
through the simulator, prints the sim-to-real table and the wall time.

    python benchmarks/sim_fidelity.py --domain airline            # all 50 airline tasks
    python benchmarks/sim_fidelity.py --domain airline,retail --limit 10
    python benchmarks/sim_fidelity.py --domain retail --returns   # SGLS also sees τ²'s return schemas
"""

from __future__ import annotations

import argparse
import sys
import time

from slca_grpo.cli.fidelity import register


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["fidelity", *(sys.argv[1:] if argv is None else argv)])
    started = time.perf_counter()
    status = args.func(args)
    print(f"wall time: {time.perf_counter() - started:.1f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
