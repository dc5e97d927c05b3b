"""Write a synthetic suite as JSONL: ``python -m slca_grpo.data.synthetic --out data/synthetic``."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from slca_grpo.data.synthetic.generator import (
    DEFAULT_KIND_WEIGHTS,
    KINDS,
    SuiteConfig,
    generate_suite,
    parse_kind_weights,
)
from slca_grpo.data.synthetic.gold import write_jsonl


def _kind_weights(text: str) -> dict[str, float]:
    try:
        return parse_kind_weights(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slca_grpo.data.synthetic", description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-train", type=int, default=1000)
    parser.add_argument("--n-test", type=int, default=200)
    parser.add_argument("--out", type=Path, required=True, help="folder for train.jsonl and test.jsonl")
    parser.add_argument(
        "--kinds",
        type=_kind_weights,
        default=None,
        help="mix, e.g. 'single=1,parallel=1' (default: "
        + ",".join(f"{k}={v}" for k, v in DEFAULT_KIND_WEIGHTS.items())
        + ")",
    )
    parser.add_argument(
        "--heldout-share", type=float, default=None, help="probability that a test task builds on a held-out tool"
    )
    args = parser.parse_args(argv)
    options: dict[str, object] = {}
    if args.kinds is not None:
        options["kind_weights"] = args.kinds
    if args.heldout_share is not None:
        options["heldout_share"] = args.heldout_share
    try:
        suite = generate_suite(args.seed, args.n_train, args.n_test, config=SuiteConfig(**options))  # type: ignore[arg-type]
    except ValueError as exc:
        parser.error(str(exc))
    for split, tasks in (("train", suite.train), ("test", suite.test)):
        path = write_jsonl(tasks, args.out / f"{split}.jsonl")
        kinds = Counter(t.metadata["kind"] for t in tasks)
        print(f"{path}: {len(tasks)} tasks ({', '.join(f'{k} {kinds[k]}' for k in KINDS if kinds[k])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
