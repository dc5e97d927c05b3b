"""``slca eval bfcl``: score a policy on BFCL from the command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from slca_grpo.cli.common import add_chat_format_arguments, chat_format_options, default_out_dir, fail
from slca_grpo.eval.agent import ChatAgent


def resolve_agent(spec: str, **model_options: Any) -> ChatAgent:
    """The agent a ``--policy`` spec names.

    ``oracle`` (replays the gold answers), ``oracle:corrupt=F[,mode=drop|alter][,seed=N]``
    (answers a fraction F of entries wrongly), or a model spec of
    :func:`slca_grpo.eval.policies.resolve_model_agent` (``hf:PATH``, ``smollm2``, ``reader``,
    ``openai:BASE_URL#MODEL``)
    with ``model_options`` (e.g. ``max_new_tokens``, ``bf16`` for local models).
    """
    from slca_grpo.eval.bfcl.oracle import BFCLOracleAgent

    spec = spec.strip()
    kind, _, options = spec.partition(":")
    if kind == "oracle":
        return BFCLOracleAgent(**_oracle_options(options, spec))
    from slca_grpo.eval.policies import resolve_model_agent

    return resolve_model_agent(spec, **model_options)


def _oracle_options(text: str, spec: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        try:
            if not sep:
                raise ValueError("expected key=value")
            if key == "corrupt":
                options["corrupt"] = float(value)
            elif key == "mode":
                options["corrupt_mode"] = value
            elif key == "seed":
                options["seed"] = int(value)
            else:
                raise ValueError(f"unknown option {key!r}")
        except ValueError as exc:
            raise ValueError(f"bad oracle option {item!r} in policy spec {spec!r}: {exc}") from exc
    return options


def register_bfcl(eval_subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``bfcl`` subcommand to the subparsers of ``slca eval``."""
    parser = eval_subparsers.add_parser(
        "bfcl",
        help="score a policy on BFCL with bfcl-eval's official data and checkers (offline)",
        description="Run a policy on BFCL categories and score it with the bfcl-eval package's checkers.",
    )
    parser.add_argument("--policy", required=True, help="policy spec, e.g. 'oracle'")
    parser.add_argument(
        "--categories",
        nargs="+",
        default=None,
        metavar="CATEGORY",
        help="BFCL categories or aliases (simple, java, javascript, ...), space- or comma-separated; "
        "default: the paper's 13",
    )
    parser.add_argument("--limit", type=int, default=None, help="first N entries of each category")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: runs/bfcl/<policy>-<time>)")
    parser.add_argument(
        "--force", action="store_true", help="replace the evaluation that --out holds (refused without it)"
    )
    parser.add_argument("--batch-size", type=int, default=8, help="episodes answered per agent call")
    parser.add_argument(
        "--max-steps-per-turn",
        type=int,
        default=None,
        help="multi-turn step limit per user turn (default: bfcl-eval's 20)",
    )
    add_chat_format_arguments(parser)
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.set_defaults(func=run_bfcl_command)
    return parser


def run_bfcl_command(args: argparse.Namespace) -> int:
    from slca_grpo.data.bfcl.entries import UnsupportedCategoryError
    from slca_grpo.data.bfcl.package import BFCLNotInstalledError
    from slca_grpo.eval.bfcl.report import markdown_table
    from slca_grpo.eval.bfcl.runner import run_bfcl
    from slca_grpo.eval.report import check_request_failures
    from slca_grpo.trainer.run_folder import RunFolderBusy, check_out_folder, hold_run_folder

    out_dir = args.out if args.out is not None else default_out_dir("bfcl", args.policy)
    try:
        check_out_folder(out_dir, flag="--out", resume=False, force=args.force, can_resume=False)
        agent = resolve_agent(args.policy, **chat_format_options(args))
        with hold_run_folder(out_dir, "slca eval bfcl", next_step="use another --out"):
            report = run_bfcl(
                agent,
                categories=args.categories,
                limit=args.limit,
                out_dir=out_dir,
                batch_size=args.batch_size,
                max_steps_per_turn=args.max_steps_per_turn,
                progress=not args.no_progress,
            )
            failed_requests = check_request_failures(agent, Path(out_dir) / "summary.json")
    except (BFCLNotInstalledError, UnsupportedCategoryError, ValueError, RunFolderBusy) as exc:
        print(f"slca eval bfcl: {exc}", file=sys.stderr)
        return 2
    print(markdown_table(report))
    print(f"wrote {out_dir}")
    return fail(failed_requests, 1) if failed_requests else 0
