"""CLI: ``slca pretrain`` (build the small base model that reads, from the generated corpus)."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from slca_grpo.cli.common import fail


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "pretrain",
        help="pretrain a small base model on the generated copy-heavy corpus (how the shipped 'reader' was built)",
        description="Pretrain a small Qwen2-style base model and its tokenizer on a corpus generated here "
        "(train-split synthetic tasks with disguised tools and fresh values, requests for invented tools, "
        "copy and conversion drills). The defaults are the next build of the 'reader' model; the shipped "
        "reader's own settings are in its pretrain_config.json (docs/models.md, The reader). Rerun with "
        "--resume to continue an interrupted build.",
    )
    parser.add_argument("--out", default="runs/reader", help="output folder (default: runs/reader)")
    parser.add_argument("--steps", type=int, help="optimizer steps (default: 3000)")
    parser.add_argument("--seed", type=int, default=0, help="corpus and initialisation seed (default: 0)")
    parser.add_argument(
        "--bf16",
        action="store_true",
        help="bfloat16 autocast: ~1.5x faster on CPUs with native bf16 (AMX, avx512_bf16), far slower elsewhere "
        "(off by default)",
    )
    parser.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in --out")
    parser.add_argument(
        "--force", action="store_true", help="replace the build that --out holds (refused without --resume or this)"
    )
    parser.add_argument(
        "--stop-at",
        type=int,
        metavar="STEP",
        help="stop after STEP with a checkpoint (split a build; --resume goes on)",
    )
    parser.add_argument(
        "--task-eval-every",
        type=int,
        metavar="STEPS",
        help="roll the model out greedily on 40 synthetic test tasks every STEPS steps (default: 500; 0: never)",
    )
    parser.add_argument(
        "--device",
        default="cpu",
        help="where the steps run: cpu (default), cuda, cuda:N or auto; the build is the same, so one may be "
        "resumed on another",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any pretraining setting (repeatable): lr=1e-3, corpus.warmup_docs=0, init=reader "
        "(continue that model's weights and tokenizer), model.hidden_size=192 (docs/models.md)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (probe lines are still printed)")
    parser.set_defaults(func=run_pretrain)


def run_pretrain(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from slca_grpo.config import apply_overrides
    from slca_grpo.data.corpus import CorpusConfig
    from slca_grpo.models.checkpoint import CheckpointError
    from slca_grpo.trainer.pretrain import PretrainConfig, pretrain
    from slca_grpo.trainer.run_folder import RunFolderBusy

    try:
        config = PretrainConfig(seed=args.seed, corpus=CorpusConfig(seed=args.seed), bf16=args.bf16)
        if args.steps is not None:
            config = replace(config, steps=args.steps)
        if args.task_eval_every is not None:
            config = replace(config, task_eval_every=args.task_eval_every)
        config = apply_overrides(config, args.set)
        final = pretrain(
            config,
            args.out,
            resume=args.resume,
            force=args.force,
            progress=not args.no_progress,
            stop_at=args.stop_at,
            device=args.device,
        )
    except (ValueError, CheckpointError, FloatingPointError, RunFolderBusy) as exc:
        return fail(str(exc))
    if final is None:
        print(f"stopped after step {args.stop_at}; continue with: {resume_command(args)}")
        return 0
    print(f"base model written to {final} (use it as model.name: {final}, or slca eval --policy hf:{final})")
    return 0


def resume_command(args: argparse.Namespace) -> str:
    """The command that continues this build: every setting it was started with, and --resume."""
    words = ["slca pretrain", "--out", shlex.quote(str(args.out))]
    if args.steps is not None:
        words += ["--steps", str(args.steps)]
    if args.seed != 0:
        words += ["--seed", str(args.seed)]
    if args.bf16:
        words.append("--bf16")
    if args.device != "cpu":
        words += ["--device", shlex.quote(args.device)]
    for override in args.set:
        words += ["--set", shlex.quote(override)]
    return " ".join([*words, "--resume"])
