"""CLI: ``slca bench`` — this machine's floor for a config's RL and SFT steps, beside the measured time."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    bench = subparsers.add_parser(
        "bench",
        help="time a config's RL and SFT steps against this machine's floor (matmul rate, memory bandwidth)",
        description="Measure this machine (matrix products at the model's shapes in fp32 and bf16, memory read "
        "bandwidth), run a few RL and SFT steps of CONFIG from its model as loaded, and print each phase's "
        "time beside its floor (the step's real tokens at those rates) and the ratio. docs/performance.md, "
        "'How close to the hardware'.",
    )
    bench.add_argument(
        "config", nargs="?", default="demo-quick", help="a preset name or YAML file (default: demo-quick)"
    )
    bench.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting, e.g. --set rl.prompts_per_step=2 (repeatable)",
    )
    bench.add_argument(
        "--steps", type=int, default=2, help="timed RL steps after one warm-up step (default 2; 0: none)"
    )
    bench.add_argument(
        "--sft-steps", type=int, default=3, help="timed SFT steps after one warm-up (default 3; 0: none)"
    )
    bench.add_argument("--json", metavar="FILE", help="also write the numbers here (a new file)")
    bench.add_argument("--force", action="store_true", help="replace the file --json names when it exists")
    bench.set_defaults(func=run_bench_command)


def check_json_target(path: Path, *, force: bool) -> None:
    """ConfigError (one line) for a ``--json`` the writer would refuse (a folder, a socket: the
    dataset writers' rule, ``output_target``) or a regular file ``force`` does not allow to replace;
    a device or pipe (``/dev/stdout``) is written through, a missing folder is made."""
    from slca_grpo.config import ConfigError
    from slca_grpo.data.output import OutputPathError, output_target

    try:
        target, through = output_target(path)
    except OutputPathError as exc:
        raise ConfigError(f"--json {exc}") from None
    if not through and target.exists() and not force:
        raise ConfigError(f"--json {path} exists; add --force to replace it, or name another file")


def run_bench_command(args: argparse.Namespace) -> int:
    from slca_grpo.config import ConfigError, load_yaml_config
    from slca_grpo.presets import resolve_config_path
    from slca_grpo.trainer.bench import format_bench, run_bench, write_bench_json
    from slca_grpo.trainer.run import RunConfig

    for option, value in (("--steps", args.steps), ("--sft-steps", args.sft_steps)):
        if value < 0:
            raise ConfigError(f"{option} must be >= 0, got {value}")
    if args.json:  # before minutes of measuring, not after
        check_json_target(Path(args.json), force=args.force)
    config = load_yaml_config(RunConfig, resolve_config_path(args.config), args.overrides)
    result = run_bench(config, rl_steps=args.steps, sft_steps=args.sft_steps)
    print(format_bench(result))
    if args.json:
        write_bench_json(result, args.json)
    return 0
