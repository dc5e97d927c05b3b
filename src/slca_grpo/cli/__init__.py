"""The ``slca`` command line: one module per area of subcommands, all in this package."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

# Each module exposes ``register(subparsers)``, adding parsers whose ``func(args) -> int`` runs the
# command. Heavy imports (torch, servers) stay inside those functions so ``slca --help`` is fast.
COMMAND_MODULES: tuple[str, ...] = (
    "slca_grpo.cli.train",
    "slca_grpo.cli.study",
    "slca_grpo.cli.eval",
    "slca_grpo.cli.simulate",
    "slca_grpo.cli.rewards",
    "slca_grpo.cli.algos",
    "slca_grpo.cli.verl",
    "slca_grpo.cli.data",
    "slca_grpo.cli.pretrain",
)

# Subcommands plugins add: (register(subparsers), the parent command or None for the top level).
_PLUGIN_COMMANDS: list[tuple[Callable[[Any], Any], str | None]] = []


def register_command(register: Callable[[Any], Any], *, under: str | None = None) -> Callable[[Any], Any]:
    """Add a plugin's subcommands: ``register(subparsers)`` is called with the top-level subparsers,
    or with those of ``slca eval`` when ``under="eval"`` (so a new benchmark is ``slca eval NAME``)."""
    if under not in (None, "eval"):
        raise ValueError(f"commands can be added at the top level or under 'eval', not under {under!r}")
    _PLUGIN_COMMANDS.append((register, under))
    return register


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
    added = {name: importlib.import_module(name).register(subparsers) for name in COMMAND_MODULES}
    groups = {None: subparsers, "eval": added["slca_grpo.cli.eval"]}  # eval's register returns its subparsers
    for register, under in _PLUGIN_COMMANDS:
        register(groups[under])
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
