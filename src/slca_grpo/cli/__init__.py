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
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE_OR_FILE",
        help="import your module (dotted name or .py file) first, e.g. to register estimators; "
        "repeatable, allowed anywhere on the line",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from slca_grpo.plugins import PluginError, load_plugins, split_plugin_args

    try:
        plugins, argv = split_plugin_args(sys.argv[1:] if argv is None else list(argv))
        load_plugins(plugins)
    except PluginError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
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
