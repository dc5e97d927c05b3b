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
    indomain.add_argument("--policy", help="oracle, hf:PATH, smollm2, reader or openai:BASE_URL#MODEL")
    indomain.add_argument(
        "--tasks",
        help="a dataset in any format of `slca data` (docs/data.md), or 'synthetic' for the built-in test split",
    )
    indomain.add_argument(
        "--run",
        metavar="DIR",
        help="instead of --policy and --tasks: a training run's model on that run's own held-out tasks, rollout "
        "limits, simulator and judge, through the loop its evaluations take (greedy, it gives the numbers the run "
        "recorded)",
    )
    indomain.add_argument(
        "--checkpoint",
        metavar="STEP",
        help="with --run: the checkpoint of this step, or 'start' (the model its RL started from); default the newest",
    )
    indomain.add_argument("--limit", type=int, default=None, help="evaluate the first N tasks (N >= 1)")
    indomain.add_argument("--max-turns", type=int, default=4)
    indomain.add_argument(
        "--answer-at-limit",
        action="store_true",
        help="a model still calling on its last turn gets the results and one more turn to answer without tools "
        "(rollout.answer_at_limit; counted as forced_answer)",
    )
    indomain.add_argument(
        "--answer-on-repeat",
        action="store_true",
        help="likewise when a turn repeats a call already made (rollout.answer_on_repeat)",
    )
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
    indomain.add_argument(
        "--samples",
        type=int,
        default=None,
        help="episodes per task (default 1, at most 64); above 1 the metrics are means over every episode, the "
        "sampled policy's expected scores (needs --temperature > 0); with --run, N rollouts of each task at the "
        "run's rollout temperature (default: greedy)",
    )
    indomain.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        help="local and endpoint models: sampling temperature (default 0: greedy)",
    )
    indomain.add_argument(
        "--seed",
        type=int,
        default=None,
        help="local models: the sampling seed (default 0; with --run, the run's train.seed, as its own sampled "
        "evaluations draw)",
    )
    indomain.add_argument(
        "--batch-size", type=int, default=8, help="local models: episodes decoded together (default 8)"
    )
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
    if args.run is not None:
        return run_indomain_of_run(args)
    args.samples = 1 if args.samples is None else args.samples
    if args.policy is None or args.tasks is None:
        return fail("slca eval indomain needs --policy and --tasks, or --run DIR")
    if args.checkpoint is not None:
        return fail("--checkpoint goes with --run")
    from tqdm.auto import tqdm

    from slca_grpo.data.loader import load_dataset
    from slca_grpo.data.tasks import TaskFormatError
    from slca_grpo.eval.indomain import score_trajectories
    from slca_grpo.eval.policies import UnknownPolicySpec, resolve_model_agent
    from slca_grpo.eval.report import check_request_failures, write_eval_report
    from slca_grpo.eval.text_loop import TaskOracleAgent, run_text_episodes
    from slca_grpo.rewards.factory import make_judge
    from slca_grpo.rollout.environment import ToolEnvironment
    from slca_grpo.trainer.run_folder import RunFolderBusy, check_out_folder, hold_run_folder

    out = Path(args.out) if args.out else default_out_dir("eval-indomain", args.policy)
    try:
        # Before any work: a file, a checkpoint or another run's folder is refused, not found after it.
        check_out_folder(out, flag="--out", resume=False, force=args.force, can_resume=False)
        sampling = sampling_options(args)
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
            agent = resolve_model_agent(args.policy, **chat_format_options(args), **sampling)
        judge = make_judge(args.judge)
        simulator_token = service = None
        if args.simulator != "schema":
            from slca_grpo.keys import SIMULATOR_TOKEN_ENV, resolve_secret
            from slca_grpo.simulator import SimulatorServiceConfig

            try:
                service = SimulatorServiceConfig(url=args.simulator)
            except ValueError as exc:
                raise ValueError(f"--simulator: 'schema' or a serve-sim URL; {exc}") from None
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

        simulator = SimulatorClient(service, token=simulator_token)
    try:
        with hold_run_folder(out, "slca eval indomain", next_step="use another --out"):
            environment = ToolEnvironment(simulator)
            trajectories, samples = [], []
            for sample in tqdm(range(args.samples), desc="samples", disable=args.samples == 1):
                # One pass over the tasks per sample, each in its own simulator sessions: a
                # sample's calls never meet the records an earlier sample's calls created.
                prefix = "eval" if args.samples == 1 else f"eval-sample{sample}"
                trajectories += run_text_episodes(
                    agent,
                    tasks,
                    environment,
                    max_turns=args.max_turns,
                    session_prefix=prefix,
                    answer_at_limit=args.answer_at_limit,
                    answer_on_repeat=args.answer_on_repeat,
                )
                samples += [sample] * len(tasks)
            items, summary, _ = score_trajectories(trajectories, tasks, judge)
            for item, trajectory, sample in zip(items, trajectories, samples):
                item["response"] = trajectory.response_text
                if args.samples > 1:
                    item["sample"] = sample
            summary |= {"samples": args.samples, "temperature": args.temperature, "seed": args.seed or 0}
            write_eval_report(
                out,
                items,
                summary,
                title=f"In-domain evaluation of {args.policy}" + sampled_title(args),
                chart_keys=("success@0.9", "name_f1", "arg_match", "process"),
            )
            failed_requests = check_request_failures(agent, out / "summary.json")
    except RunFolderBusy as exc:
        return fail(str(exc))
    print(json.dumps({k: v for k, v in summary.items() if k not in ("by_kind", "slots")}, indent=1))
    print(f"wrote {out}/per_item.jsonl, summary.json, report.md and metrics.png")
    return fail(failed_requests, 1) if failed_requests else 0


MAX_SAMPLES = 64  # episodes per task

# Options of --policy evaluations that a run's own settings replace under --run (name: default).
RUN_REPLACES = {
    "policy": None,
    "tasks": None,
    "max_turns": 4,
    "answer_at_limit": False,
    "answer_on_repeat": False,
    "judge": "rule",
    "simulator": "schema",
    "temperature": 0.0,
    "batch_size": 8,
    "chat_format": "auto",
    "chat_template": None,
    "tool_parser": "auto",
    "max_new_tokens": 512,
    "bf16": "auto",
}


def run_indomain_of_run(args: argparse.Namespace) -> int:
    """``--run DIR``: the run's model evaluated as the run evaluates it, and compared with what the
    run recorded for that step."""
    from slca_grpo.eval.report import write_eval_report
    from slca_grpo.trainer.run_eval import load_run_evaluation
    from slca_grpo.trainer.run_folder import RunFolderBusy, check_out_folder, hold_run_folder

    given = [name for name, default in RUN_REPLACES.items() if getattr(args, name, default) != default]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        return fail(f"--run evaluates with the run's own settings; leave out {flags}")
    try:
        check_samples_and_limit(args)
    except ValueError as exc:
        return fail(str(exc))
    if args.seed is not None and args.samples is None:
        return fail("--seed with --run seeds sampled rollouts: give --samples N too")
    run = Path(args.run)
    out = Path(args.out) if args.out else default_out_dir("eval-indomain", f"run-{run.name}")
    check_out_folder(out, flag="--out", resume=False, force=args.force, can_resume=False)
    evaluation = load_run_evaluation(run, args.checkpoint, limit=args.limit)
    samples = args.samples or 0  # 0: greedy
    try:
        with hold_run_folder(out, "slca eval indomain", next_step="use another --out"):
            items, summary = evaluation(samples, seed=args.seed)
            summary |= {
                "run": str(run),
                "step": evaluation.step,
                "samples": samples or 1,
                "temperature": evaluation.config.rollout.temperature if samples else 0.0,
                "seed": evaluation.config.train.seed if args.seed is None else args.seed,
                "limit": args.limit,
            }
            where = "its start" if evaluation.step < 0 else f"step {evaluation.step}"
            write_eval_report(
                out,
                items,
                summary,
                title=f"In-domain evaluation of {run} at {where}" + (f", {samples} samples a task" if samples else ""),
                chart_keys=("success@0.9", "name_f1", "arg_match", "process"),
            )
    except RunFolderBusy as exc:
        return fail(str(exc))
    print(json.dumps({k: v for k, v in summary.items() if k not in ("by_kind", "slots")}, indent=1))
    if args.limit is None and args.seed is None:  # otherwise the run made no such evaluation
        print(_against_the_run(run, evaluation.step, summary, sampled=bool(samples)))
    print(f"wrote {out}/per_item.jsonl, summary.json, report.md and metrics.png")
    return 0


def _against_the_run(run: Path, step: int, summary: dict[str, Any], *, sampled: bool) -> str:
    """Whether the evaluation gave what the run recorded for that step (its metrics.jsonl)."""
    prefix = "eval/sampled_" if sampled else "eval/"
    recorded: dict[str, Any] = {}
    try:
        for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            if entry.get("step") == step and any(key.startswith(prefix) for key in entry):
                recorded = {k[len(prefix) :]: v for k, v in entry.items() if k.startswith(prefix)}
    except (OSError, ValueError):
        pass
    shared = sorted(key for key in recorded if key in summary and isinstance(summary[key], (int, float)))
    if not shared:
        return "the run recorded no such evaluation to compare with"
    differ = [key for key in shared if summary[key] != recorded[key]]
    if not differ:
        return f"the same as the run recorded at that step ({len(shared)} metrics, exactly)"
    shown = ", ".join(f"{key} {summary[key]!r} (run: {recorded[key]!r})" for key in differ[:4])
    return f"differs from what the run recorded at that step in {len(differ)} of {len(shared)} metrics: {shown}"


def check_samples_and_limit(args: argparse.Namespace) -> None:
    """``--samples`` (when given) and ``--limit``, as every in-domain evaluation bounds them."""
    if args.samples is not None and not 1 <= args.samples <= MAX_SAMPLES:
        # Every episode is kept for the report: a bound, not hours of decoding and gigabytes of texts.
        raise ValueError(f"--samples must be between 1 and {MAX_SAMPLES}, got {args.samples}")
    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit must be >= 1 (leave it out for every task), got {args.limit}")


def sampling_options(args: argparse.Namespace) -> dict[str, Any]:
    """The agent's sampling options from ``--samples``, ``--temperature``, ``--seed`` and
    ``--batch-size`` (ValueError on a bad one)."""
    check_samples_and_limit(args)
    if args.max_turns < 1:
        raise ValueError(f"--max-turns must be >= 1, got {args.max_turns}")
    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1, got {args.batch_size}")
    from slca_grpo.engine import MIN_TEMPERATURE

    if not (args.temperature == 0.0 or MIN_TEMPERATURE <= args.temperature <= 100.0):  # also refuses nan
        raise ValueError(
            f"--temperature must be 0 (greedy) or between {MIN_TEMPERATURE} and 100, got {args.temperature}"
        )
    if args.samples > 1 and args.temperature == 0.0:
        raise ValueError(f"--samples {args.samples} needs --temperature above 0: greedy episodes would all be the same")
    if args.policy == "oracle":
        return {}
    options: dict[str, Any] = {"temperature": args.temperature}
    if not args.policy.startswith("openai:"):
        options |= {"seed": args.seed or 0, "batch_size": args.batch_size}
    return options


def sampled_title(args: argparse.Namespace) -> str:
    if args.samples == 1 and args.temperature == 0.0:
        return ""
    return f", {args.samples} sample{'s' if args.samples > 1 else ''} a task at temperature {args.temperature:g}"
