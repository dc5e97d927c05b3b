"""The ``slca`` command line: one module per area of subcommands, all in this package."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Each module exposes ``register(subparsers)``, adding parsers whose ``func(args) -> int`` runs the
# command. Heavy imports (torch, servers) stay inside those functions so ``slca --help`` is fast.
COMMAND_MODULES: tuple[str, ...] = (
    "slca_grpo.cli.train",
    "slca_grpo.cli.study",
    "slca_grpo.cli.eval",
    "slca_grpo.cli.simulate",
    "slca_grpo.cli.rewards",
    "slca_grpo.cli.algos",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slca",
        description="SLCA-GRPO: segment-locked credit assignment for tool-calling RL.",
    )
    from slca_grpo import __version__

    parser.add_argument("--version", action="version", version=f"slca-grpo {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
