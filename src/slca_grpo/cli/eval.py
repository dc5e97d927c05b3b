"""``slca eval``: in-domain, BFCL and τ²-Bench evaluation of any policy."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from slca_grpo.cli.common import add_chat_format_arguments, chat_format_options, default_out_dir, fail


def register(subparsers: Any) -> Any:
    """Add ``slca eval`` and its benchmarks; return its subparsers, where plugin benchmarks go."""
    parser = subparsers.add_parser("eval", help="evaluate a policy: indomain, bfcl, tau2 (or a plugin's benchmark)")
    eval_subparsers = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)

    indomain = eval_subparsers.add_parser(
        "indomain",
        help="the paper's in-domain metrics on a task file over the training stack's agent loop and simulator",
    )
    indomain.add_argument("--policy", required=True, help="oracle, hf:PATH, smollm2, reader or openai:BASE_URL#MODEL")
    indomain.add_argument(
        "--tasks",
        required=True,
        help="a dataset in any format of `slca data` (docs/data.md), or 'synthetic' for the built-in test split",
    )
    indomain.add_argument("--limit", type=int, default=None, help="evaluate the first N tasks")
    indomain.add_argument("--max-turns", type=int, default=4)
    indomain.add_argument("--judge", default="rule", help="summary judge: 'rule' or 'openai:BASE_URL#MODEL'")
    indomain.add_argument("--simulator", default="schema", help="'schema' (offline) or a serve-sim URL (http://...)")
    indomain.add_argument(
        "--simulator-token-file",
        metavar="FILE",
        help="file holding the serve-sim service's bearer token (default: $SLCA_SIM_TOKEN)",
    )
    indomain.add_argument(
        "--simulator-token",
        default=None,
        help="deprecated: shows the token in ps; use --simulator-token-file or $SLCA_SIM_TOKEN",
    )
    add_chat_format_arguments(indomain)
    indomain.add_argument("--out", default=None, help="output folder (default: runs/eval-indomain/<policy>-<time>)")
    indomain.add_argument(
        "--force", action="store_true", help="replace the evaluation that --out holds (refused without it)"
    )
    indomain.set_defaults(func=run_indomain)

    from slca_grpo.cli.bfcl import register_bfcl
    from slca_grpo.cli.tau2 import register_tau2

    register_bfcl(eval_subparsers)
    register_tau2(eval_subparsers)
    return eval_subparsers


def run_indomain(args: argparse.Namespace) -> int:
    from slca_grpo.data.loader import load_dataset
    from slca_grpo.data.tasks import TaskFormatError
    from slca_grpo.eval.indomain import score_trajectories
    from slca_grpo.eval.policies import UnknownPolicySpec, resolve_model_agent
    from slca_grpo.eval.report import write_eval_report
    from slca_grpo.eval.text_loop import TaskOracleAgent, run_text_episodes
    from slca_grpo.rewards.factory import make_judge
    from slca_grpo.rollout.environment import ToolEnvironment
    from slca_grpo.trainer.run_folder import RunFolderBusy, check_out_folder, hold_run_folder

    out = Path(args.out) if args.out else default_out_dir("eval-indomain", args.policy)
    try:
        # Before any work: a file, a checkpoint or another run's folder is refused, not found after it.
        check_out_folder(out, flag="--out", resume=False, force=args.force, can_resume=False)
        if args.tasks == "synthetic":
            from slca_grpo.data.synthetic import generate_suite

            tasks = generate_suite(seed=0, n_train=0, n_test=args.limit or 200).test
        else:
            tasks = load_dataset(args.tasks, limit=args.limit, purpose="eval").tasks
        if not tasks:
            raise ValueError(f"{args.tasks} holds no tasks: nothing to evaluate")
        if args.policy == "oracle":
            agent = TaskOracleAgent(tasks)
        else:
            agent = resolve_model_agent(args.policy, **chat_format_options(args))
        judge = make_judge(args.judge)
        simulator_token = None
        if args.simulator != "schema":
            from slca_grpo.keys import SIMULATOR_TOKEN_ENV, resolve_secret

            simulator_token = resolve_secret(
                file=args.simulator_token_file,
                file_flag="--simulator-token-file",
                env=(SIMULATOR_TOKEN_ENV,),
                flag_value=args.simulator_token,
                flag="--simulator-token",
            )
    except (OSError, TaskFormatError, UnknownPolicySpec, ValueError) as exc:
        return fail(str(exc))
    if args.simulator == "schema":
        from slca_grpo.simulator import SimulatorConfig, build_simulator

        simulator = build_simulator(SimulatorConfig(backend="schema"))
    else:
        from slca_grpo.simulator import SimulatorClient

        simulator = SimulatorClient(args.simulator, token=simulator_token)
    try:
        with hold_run_folder(out, "slca eval indomain", next_step="use another --out"):
            trajectories = run_text_episodes(agent, tasks, ToolEnvironment(simulator), max_turns=args.max_turns)
            items, summary, _ = score_trajectories(trajectories, tasks, judge)
            for item, trajectory in zip(items, trajectories):
                item["response"] = trajectory.response_text
            write_eval_report(
                out,
                items,
                summary,
                title=f"In-domain evaluation of {args.policy}",
                chart_keys=("success@0.9", "name_f1", "arg_match", "process"),
            )
    except RunFolderBusy as exc:
        return fail(str(exc))
    print(json.dumps({k: v for k, v in summary.items() if k not in ("by_kind", "slots")}, indent=1))
    print(f"wrote {out}/per_item.jsonl, summary.json, report.md and metrics.png")
    return 0
