"""``slca eval tau2``: run a policy through τ²-Bench and write its report.

Only light imports at module level: ``slca --help`` must not import τ² (litellm takes seconds).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from slca_grpo.cli.common import add_chat_format_arguments, chat_format_options, fail

# slca_grpo.eval.tau2.DOMAINS, spelled out so that building the parser (slca --help) does not
# import τ² and litellm (~3 s); a test keeps the two equal.
TAU2_DOMAINS = ("airline", "retail", "telecom")

POLICY_SPECS = ("oracle", "hf:PATH", "smollm2", "reader", "openai:BASE_URL#MODEL")
USER_KINDS = ("llm", "scripted")


class UnknownPolicy(ValueError):
    """A ``--policy`` spec this command cannot build."""


def resolve_agent(spec: str, domain: str, **model_options: Any) -> Any:
    """The :class:`~slca_grpo.eval.agent.ChatAgent` named by ``spec`` for ``domain``.

    ``oracle`` replays gold answers; model specs (local checkpoints, SmolLM2, endpoints)
    come from the shared policy factory.
    """
    name = (spec or "").strip()
    if name == "oracle":
        from slca_grpo.eval.tau2.oracle import Tau2OracleAgent

        return Tau2OracleAgent(domain=domain)
    from slca_grpo.eval.policies import UnknownPolicySpec, resolve_model_agent

    try:
        return resolve_model_agent(name, **model_options)
    except UnknownPolicySpec as exc:
        raise UnknownPolicy(f"{exc} (for τ²: {', '.join(POLICY_SPECS)})") from None


def register_tau2(eval_subparsers: Any) -> argparse.ArgumentParser:
    """Add ``tau2`` to the ``slca eval`` subcommands."""
    parser = eval_subparsers.add_parser(
        "tau2",
        help="τ²-Bench (airline, retail, telecom) with τ²'s user simulator and evaluator",
        description=(
            "Run a policy in τ²-Bench's environments and score it with τ²'s own evaluator. "
            "The user is τ²'s LLM user simulator on an OpenAI-compatible endpoint (--user-llm), or a "
            "scripted user (--user scripted) for offline harness checks."
        ),
    )
    parser.add_argument("--policy", required=True, help=f"policy spec ({', '.join(POLICY_SPECS)})")
    parser.add_argument("--domain", required=True, choices=TAU2_DOMAINS)
    parser.add_argument("--split", default="base", help="τ² task split (base, train, test, ...; default base)")
    parser.add_argument("--task-ids", nargs="+", default=None, help="run only these task ids")
    parser.add_argument("--limit", type=int, default=None, help="run only the first N selected tasks")
    parser.add_argument("--trials", type=int, default=1, help="trials per task (pass^1..pass^K)")
    parser.add_argument("--user", choices=USER_KINDS, default="llm", help="LLM user simulator or scripted user")
    parser.add_argument("--user-llm", default=None, metavar="openai:BASE_URL#MODEL", help="endpoint of the LLM user")
    parser.add_argument("--max-steps", type=int, default=200, help="τ² orchestrator steps per simulation")
    parser.add_argument("--max-errors", type=int, default=10, help="tool errors before a simulation stops")
    parser.add_argument("--seed", type=int, default=300, help="seed of the per-trial seeds (τ²'s default)")
    parser.add_argument("--concurrency", type=int, default=1, help="simulations in parallel (agent turns batched)")
    parser.add_argument("--out", default=None, help="output directory (default runs/tau2/<domain>_<policy>_<time>)")
    parser.add_argument(
        "--force", action="store_true", help="replace the evaluation that --out holds (refused without it)"
    )
    add_chat_format_arguments(parser)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run_tau2_command)
    return parser


def _default_out(domain: str, policy: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in policy)[:60] or "policy"
    return Path("runs") / "tau2" / f"{domain}_{safe}_{time.strftime('%Y%m%d-%H%M%S')}"


def run_tau2_command(args: argparse.Namespace) -> int:
    from slca_grpo.data.tau2.package import Tau2Unavailable
    from slca_grpo.endpoints import EndpointSpecError
    from slca_grpo.eval.tau2.runner import MISSING_USER_MESSAGE
    from slca_grpo.eval.tau2.spec import parse_user_llm

    if args.user == "scripted":
        user: Any = "scripted"
    elif not args.user_llm:
        return fail(MISSING_USER_MESSAGE)
    else:
        try:
            user = parse_user_llm(args.user_llm)
        except EndpointSpecError as exc:
            return fail(str(exc))
    from slca_grpo.trainer.run_folder import RunFolderBusy, check_out_folder, hold_run_folder

    try:
        from slca_grpo.data.tau2.tasks import TaskSelectionError
        from slca_grpo.eval.report import check_request_failures
        from slca_grpo.eval.tau2.runner import run_tau2

        out_dir = Path(args.out) if args.out else _default_out(args.domain, args.policy)
        check_out_folder(out_dir, flag="--out", resume=False, force=args.force, can_resume=False)
        agent = resolve_agent(args.policy, args.domain, **chat_format_options(args))
        with hold_run_folder(out_dir, "slca eval tau2", next_step="use another --out"):
            report = run_tau2(
                agent,
                args.domain,
                user=user,
                out_dir=out_dir,
                task_ids=args.task_ids,
                limit=args.limit,
                split=args.split,
                trials=args.trials,
                max_steps=args.max_steps,
                max_errors=args.max_errors,
                seed=args.seed,
                concurrency=args.concurrency,
                progress=not args.no_progress,
            )
            summary_file = report.files.get("summary")
            failed_requests = check_request_failures(agent, summary_file)
    except (Tau2Unavailable, UnknownPolicy, TaskSelectionError, RunFolderBusy) as exc:
        return fail(str(exc))
    except ValueError as exc:  # bad numbers (trials, limits): the message names the argument
        return fail(str(exc))
    scores = "  ".join(f"pass^{k}={v:.3f}" for k, v in sorted(report.pass_hat_k.items()))
    print(
        f"τ² {report.domain} ({report.num_tasks} tasks × {report.num_trials} trials, user {report.user}): "
        f"{scores}  avg reward={report.avg_reward:.3f}"
    )
    if report.num_errors:
        print(f"warning: {report.num_errors} simulation(s) raised; see {report.files.get('per_item')}", file=sys.stderr)
    print(f"report: {report.files.get('report')}")
    if failed_requests:
        return fail(failed_requests, 1)
    return 1 if report.num_errors == report.num_simulations else 0
