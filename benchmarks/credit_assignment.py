"""The multi-seed credit-assignment study; the same as ``slca study`` (docs/study.md).

From one SFT checkpoint, N seeds of each estimator (paired: same prompts per step within a seed)
at several levels of summary-reward noise; report with intervals over seeds and exact paired tests.

    python benchmarks/credit_assignment.py --quick                # 8 seeds, 8 steps a run
    python benchmarks/credit_assignment.py                        # 8 seeds, 16 steps a run

Time: docs/study.md, "Cost".
    python benchmarks/credit_assignment.py --noise none,std=0.25,std=0.5 --seeds 8 --out runs/study-std
"""

from __future__ import annotations

import argparse
import sys

from slca_grpo.cli.study import add_arguments, run_study_command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run_study_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
