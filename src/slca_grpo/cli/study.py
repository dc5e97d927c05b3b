"""CLI: ``slca study`` (also ``python benchmarks/credit_assignment.py``)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from slca_grpo.cli.common import fail
from slca_grpo.study.plan import DEFAULT_BUDGET, DEFAULT_ESTIMATORS, QUICK_BUDGET, SMOLLM2_ESTIMATORS, STUDY_MODELS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    quick, full = QUICK_BUDGET, DEFAULT_BUDGET
    parser.add_argument(
        "--model",
        default="reader",
        choices=sorted(STUDY_MODELS),
        help="whose study: reader (the quick demo's model, under summary noise; the defaults below) or smollm2 "
        f"(SmolLM2-135M-Instruct, {STUDY_MODELS['smollm2'].budget.seeds} seeds of "
        f"{' and '.join(SMOLLM2_ESTIMATORS)}, scored on held-out tasks and BFCL: docs/study.md)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{quick.seeds} seeds × {quick.steps} steps, noise {quick.noise} (time: docs/study.md, Cost)",
    )
    parser.add_argument("--out", default="runs/study", help="output folder (default: runs/study); rerun to resume")
    parser.add_argument("--seeds", type=int, help=f"RL seeds per cell (default: {full.seeds}; quick {quick.seeds})")
    parser.add_argument(
        "--estimators",
        nargs="+",
        help=f"registered estimator names (default: {' '.join(DEFAULT_ESTIMATORS)}; smollm2: "
        f"{' '.join(SMOLLM2_ESTIMATORS)})",
    )
    parser.add_argument(
        "--noise", help=f"comma-separated noise levels: none, std=S, prob=P, std=S+prob=P (default: {full.noise})"
    )
    parser.add_argument("--steps", type=int, help=f"RL steps per run (default: {full.steps}; quick {quick.steps})")
    parser.add_argument(
        "--eval-tasks",
        type=int,
        help=f"held-out tasks per evaluation (default: {full.eval_tasks}; quick {quick.eval_tasks})",
    )
    parser.add_argument(
        "--prompts",
        type=int,
        help=f"prompts per RL step, G rollouts each (default: {full.prompts_per_step}; quick {quick.prompts_per_step})",
    )
    parser.add_argument("--preset", help=f"base config preset or YAML file (default: {full.preset})")
    parser.add_argument(
        "--bfcl",
        metavar="CATEGORY,...",
        help="also score the start and every final model on these BFCL categories with bfcl-eval's checkers "
        f"(default: none; smollm2: {STUDY_MODELS['smollm2'].budget.bfcl})",
    )
    parser.add_argument(
        "--bfcl-limit", type=int, help=f"the first N entries of each BFCL category (default: {full.bfcl_limit})"
    )
    parser.add_argument(
        "--primary",
        metavar="METRIC",
        help="the held-out metric named in advance as the primary outcome: each estimator − start and − the "
        "baseline, Holm over them, with a task-level test "
        f"(default: none; smollm2: {STUDY_MODELS['smollm2'].budget.primary})",
    )
    parser.add_argument(
        "--kinds",
        metavar="KIND=W,...",
        help="synthetic task mix of every run, SFT included (e.g. two_step=1); sets data.kinds",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting of every run, e.g. --set rl.lr=0.001 (repeatable)",
    )
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite the report from the finished runs in --out, train nothing"
    )
    parser.add_argument("--verbose", action="store_true", help="print every RL step of every run")


def register(subparsers: Any) -> None:
    study = subparsers.add_parser("study", help="multi-seed GRPO-vs-SLCA study under summary-reward noise, with CIs")
    add_arguments(study)
    study.set_defaults(func=run_study_command)


def plan_from_args(args: argparse.Namespace):
    """The StudyPlan the arguments ask for (ConfigError on a bad one)."""
    from slca_grpo.config import ConfigError
    from slca_grpo.study.noise import parse_noise_levels
    from slca_grpo.study.plan import StudyPlan

    model = STUDY_MODELS[args.model]
    if args.quick and model.quick is None:
        raise ConfigError(f"--quick: the {args.model} study has no quick budget; give --seeds or --steps instead")
    budget = model.quick if args.quick else model.budget
    changes = {
        key: value
        for key, value in (
            ("seeds", args.seeds),
            ("steps", args.steps),
            ("eval_tasks", args.eval_tasks),
            ("prompts_per_step", args.prompts),
            ("noise", args.noise),
            ("preset", args.preset),
            ("bfcl", args.bfcl),
            ("bfcl_limit", args.bfcl_limit),
            ("primary", args.primary),
        )
        if value is not None
    }
    for key, option in (
        ("seeds", "--seeds"),
        ("steps", "--steps"),
        ("eval_tasks", "--eval-tasks"),
        ("prompts_per_step", "--prompts"),
        ("bfcl_limit", "--bfcl-limit"),
    ):
        if key in changes and changes[key] < 1:
            raise ConfigError(f"{option} must be >= 1, got {changes[key]}")
    budget = dataclasses.replace(budget, **changes)
    check_outcomes(budget)
    estimators = tuple(args.estimators or model.estimators)
    if len(set(estimators)) != len(estimators):
        raise ConfigError(f"--estimators: a name is given twice ({' '.join(estimators)})")
    overrides = tuple(args.overrides)
    if args.kinds is not None:
        overrides = (kinds_override(args.kinds), *overrides)
    return StudyPlan(budget, estimators, tuple(parse_noise_levels(budget.noise)), overrides)


def check_outcomes(budget) -> None:
    """ConfigError naming the option when ``--primary`` is no held-out metric or ``--bfcl`` names an
    unknown category."""
    from slca_grpo.config import ConfigError
    from slca_grpo.report import HELD_OUT_SAMPLED
    from slca_grpo.study.metrics import STUDY_METRICS

    known = (*STUDY_METRICS, *HELD_OUT_SAMPLED)
    if budget.primary and budget.primary not in known:
        raise ConfigError(f"--primary: {budget.primary!r} is not a held-out metric (one of: {', '.join(known)})")
    if budget.bfcl:
        from slca_grpo.data.bfcl.entries import resolve_categories
        from slca_grpo.study.bfcl import bfcl_categories

        if not bfcl_categories(budget.bfcl):
            raise ConfigError(f"--bfcl: {budget.bfcl!r} names no category (e.g. simple_python,multiple)")
        try:
            resolve_categories(bfcl_categories(budget.bfcl))
        except (ValueError, KeyError) as exc:
            raise ConfigError(f"--bfcl: {exc}") from None


def kinds_override(text: str) -> str:
    """The ``--set`` override of ``--kinds KIND=W,...`` (ConfigError on a bad mix)."""
    import json

    from slca_grpo.config import ConfigError
    from slca_grpo.data.synthetic.generator import parse_kind_weights

    try:
        weights = parse_kind_weights(text)
    except ValueError as exc:
        raise ConfigError(f"--kinds: {exc}") from None
    if not weights:
        raise ConfigError("--kinds: give at least one KIND=WEIGHT, e.g. two_step=1")
    return f"data.kinds={json.dumps(weights)}"


def run_study_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    from slca_grpo.config import ConfigError
    from slca_grpo.data.tasks import TaskFormatError
    from slca_grpo.study.plan import PLAN_FILE, StudyPlan, read_json

    try:
        if args.report_only:
            from slca_grpo.study.report import write_study_report

            saved = read_json(Path(args.out) / PLAN_FILE, None)
            if saved is None:
                return fail(f"{args.out} holds no {PLAN_FILE} (not a study folder?)")
            try:
                plan = StudyPlan.from_dict(saved)
            except (KeyError, TypeError, ValueError, AttributeError):
                return fail(
                    f"{Path(args.out) / PLAN_FILE} is not a study plan (written by another version, or edited?)"
                )
            write_study_report(args.out, plan)
            print(f"wrote {args.out}/report.md, report.json and charts")
            return 0
        from slca_grpo.study.runner import run_study

        if not args.verbose:  # keep the per-run progress lines readable
            from transformers.utils import logging as transformers_logging

            transformers_logging.disable_progress_bar()
        run_study(args.out, plan_from_args(args), verbose=args.verbose)
    except (ConfigError, TaskFormatError, OSError, FloatingPointError) as exc:  # FloatingPointError: diverged
        return fail(str(exc))
    return 0
