"""CLI: ``slca verl data``, a run config's tasks as verl parquet datasets."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from slca_grpo.cli.common import fail


def register(subparsers: Any) -> None:
    verl = subparsers.add_parser("verl", help="train on verl: prepare its datasets (docs/verl.md)")
    commands = verl.add_subparsers(dest="verl_command", metavar="COMMAND")
    data = commands.add_parser(
        "data",
        help="write a config's train and test tasks as verl parquet files",
        description="Load the tasks of a run config's data section (the synthetic suite or task files) and "
        "write OUT/train.parquet and OUT/test.parquet in verl's row layout.",
    )
    data.add_argument("config", help="a YAML file or a preset name (only its data section is used)")
    data.add_argument("--out", required=True, help="the folder to write")
    data.add_argument("--data-source", default="slca", help="the rows' data_source (default: slca)")
    data.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    data.set_defaults(func=run_data)
    verl.set_defaults(func=lambda args: verl.print_help() or 2)


def run_data(args: argparse.Namespace) -> int:
    from slca_grpo.config import ConfigError, load_yaml_config
    from slca_grpo.data.tasks import TaskFormatError
    from slca_grpo.integrations.verl.rows import write_tasks_parquet
    from slca_grpo.presets import resolve_config_path
    from slca_grpo.trainer.run_config import RunConfig
    from slca_grpo.trainer.run_data import load_data

    try:
        config = load_yaml_config(RunConfig, resolve_config_path(args.config), args.overrides)
        train, test, probe = load_data(config.data)
        out = Path(args.out)
        # The probe set (data.probe_tasks, kept out of train) as its own file: a validation set
        # from the training distribution.
        for split, tasks in (("train", train), ("test", test), ("probe", probe)):
            if tasks:
                count = write_tasks_parquet(tasks, out / f"{split}.parquet", data_source=args.data_source, split=split)
                print(f"{out / f'{split}.parquet'}: {count} rows")
    except (ConfigError, FileNotFoundError, TaskFormatError, ValueError, ImportError, OSError) as exc:
        return fail(str(exc))
    return 0
