"""The ``slca`` command line: one module per area of subcommands, all in this package."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from slca_grpo.registry import Registry

# A plugin's commands: ``register(subparsers)`` and the parent command (None: the top level).
COMMANDS: Registry[tuple[Any, str | None]] = Registry("command")

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
    "slca_grpo.cli.presets",
    "slca_grpo.cli.bench",
)


def register_command(
    register: Callable[[Any], Any], *, under: str | None = None, replace: bool = False
) -> Callable[[Any], Any]:
    """Add a plugin's subcommands: ``register(subparsers)`` is called with the top-level subparsers,
    or with those of ``slca eval`` when ``under="eval"`` (so a new benchmark is ``slca eval NAME``).
    Registered under the function's qualified name (``module.function``)."""
    if under not in (None, "eval"):
        raise ValueError(f"commands can be added at the top level or under 'eval', not under {under!r}")
    module = getattr(register, "__module__", "") or ""
    name = f"{module}.{getattr(register, '__qualname__', repr(register))}"
    COMMANDS.add(name, (register, under), origin=module, replace=replace)
    return register


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slca",
        description="SLCA-GRPO: segment-locked credit assignment for tool-calling RL.",
    )
    from slca_grpo import __version__

    parser.add_argument("--version", action="version", version=f"slca-grpo {__version__}")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="show the traceback of an error too (also SLCA_DEBUG=1); without it, an expected error is one line",
    )
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
    for register, under in COMMANDS.values():
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
    from slca_grpo.cli import common

    common.DEBUG = args.debug or os.environ.get("SLCA_DEBUG", "").strip() not in ("", "0")
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # inside the try: a reader that went away is a BrokenPipeError here
        return status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``slca data inspect ... | head``): stop quietly, as cat does.
        _silence_stdout()
        return 141
    except Exception as exc:
        if not isinstance(exc, _expected_errors()):
            raise  # a bug: the traceback is what a report needs
        return common.fail(str(exc) or type(exc).__name__)


def _expected_errors() -> tuple[type[BaseException], ...]:
    """Errors a user can cause (a bad setting, file or checkpoint): one line, not a traceback."""
    from slca_grpo.config import ConfigError
    from slca_grpo.data.tasks import TaskFormatError
    from slca_grpo.engine import NonFiniteLogits
    from slca_grpo.models.checkpoint import CheckpointError, CheckpointWriteError
    from slca_grpo.plugins import PluginError
    from slca_grpo.trainer.run_folder import RunFolderTaken

    return (
        ConfigError,
        NonFiniteLogits,
        RunFolderTaken,
        TaskFormatError,
        PluginError,
        CheckpointError,
        CheckpointWriteError,
        FileNotFoundError,
        IsADirectoryError,
        NotADirectoryError,
        PermissionError,
    )


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
