"""Our RL trainer against TRL's GRPOTrainer (and SLCA through TRL) on the same fixed tasks: reward curves and speed.

    python benchmarks/trl_parity.py                          # reader, 3 seeds x 20 steps per arm
    python benchmarks/trl_parity.py --seeds 1 --steps 5      # a quick look
    python benchmarks/trl_parity.py --out runs/trl-parity    # curves.png, results.json, table.md there

One invocation trains the shipped reader from the same weights with each arm, seed by seed:

- ``ours``: our ``RLTrainer`` (estimator ``grpo``), our agent loop;
- ``trl``: TRL's own ``GRPOTrainer`` — its generation (``model.generate`` on the prompt as our
  formatter renders it, tools included), its advantages and loss — with HierR's ``score`` as its
  reward function;
- ``trl+slca``: ``slca_grpo.integrations.trl.SLCATrainer`` (estimator ``--estimator``, default
  ``slca``), TRL's loss and optimiser on rollouts of our agent loop.

All arms see the same 4 fixed tasks every step (two two-step tasks, an irrelevant request, a
parallel call; one assistant turn), G rollouts each, the same lr, KL coefficient (TRL ``beta``, plain
k3: ``use_bias_correction_kl=False``), clip 0.2, token-mean loss (TRL ``dapo``), group-std scaling,
one update per step, fp32. The reward plotted is each step's mean HierR score over its rollouts
(the tasks are fixed, so it is a learning curve, not a sample of fresh prompts). Steps per second
exclude each trainer's set-up.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from _common import pin_torch_threads, require_module  # noqa: E402

ARMS = ("ours", "trl", "trl+slca")
INSTALL_HINT = 'pip install -e ".[trl]"'
FIXED_KINDS = ("two_step", "two_step", "irrelevant", "parallel")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="RL steps per run")
    parser.add_argument("--seeds", type=int, default=3, help="runs per arm (seeds 0..N-1)")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=160)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--kl", type=float, default=0.001)
    parser.add_argument("--estimator", default="slca", help="the estimator of the trl+slca arm")
    parser.add_argument("--model", default="reader", help="model to train (a name or folder; default the reader)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated subset of {', '.join(ARMS)}")
    parser.add_argument("--out", type=Path, default=Path("runs/trl-parity"))
    return parser


def check_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    for name in ("steps", "seeds", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.group_size < 2:
        parser.error(f"--group-size must be at least 2, got {args.group_size}")
    arms = [arm.strip() for arm in args.arms.split(",") if arm.strip()]
    unknown = [arm for arm in arms if arm not in ARMS]
    if unknown or not arms:
        parser.error(f"--arms: unknown {unknown or 'none given'}; choose from {', '.join(ARMS)}")
    args.arms = arms


def fixed_tasks() -> list:
    """Four train-split tasks, the first of each kind in FIXED_KINDS (two different two-step ones)."""
    from slca_grpo.data.synthetic import generate_tasks

    pool = generate_tasks(0, 200)
    chosen: list = []
    for kind in FIXED_KINDS:
        chosen.append(next(t for t in pool if t.metadata.get("kind") == kind and t not in chosen))
    return chosen


def prompt_text(task) -> str:
    """The prompt exactly as our formatter renders it, tools included (TRL's own generation gets it as text)."""
    from slca_grpo.chat.formatter import prompt_tools
    from slca_grpo.chat.template import render_chat

    return render_chat(task.messages, prompt_tools(task.tools), add_generation_prompt=True)


def trl_args(args: argparse.Namespace, seed: int, out: Path):
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(out),
        max_steps=args.steps,
        seed=seed,
        per_device_train_batch_size=len(FIXED_KINDS) * args.group_size,
        num_generations=args.group_size,
        max_completion_length=args.max_new_tokens,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        beta=args.kl,
        use_bias_correction_kl=False,  # our KL term is plain k3
        epsilon=0.2,
        loss_type="dapo",
        scale_rewards="group",
        learning_rate=args.lr,
        lr_scheduler_type="constant",
        weight_decay=0.0,
        max_grad_norm=1.0,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        shuffle_dataset=False,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
    )


def run_ours(args: argparse.Namespace, tasks: list, seed: int) -> dict[str, Any]:
    from slca_grpo.chat.formatter import ChatFormatter
    from slca_grpo.models import load_model
    from slca_grpo.rewards.config import RewardConfig
    from slca_grpo.rewards.rule_judge import RuleJudge
    from slca_grpo.rollout.environment import ToolEnvironment
    from slca_grpo.rollout.loop import AgentLoop, RolloutConfig
    from slca_grpo.simulator import SimulatorConfig, build_simulator
    from slca_grpo.trainer.rl import RLConfig, RLTrainer

    model, tokenizer = load_model(args.model)
    ref_model = copy.deepcopy(model).eval().requires_grad_(False)
    rollout = RolloutConfig(group_size=args.group_size, max_turns=1, max_response_tokens=args.max_new_tokens)
    loop = AgentLoop(model, ChatFormatter(tokenizer), ToolEnvironment(build_simulator(SimulatorConfig())), rollout)
    config = RLConfig(
        estimator="grpo",
        steps=args.steps,
        prompts_per_step=len(tasks),
        mini_batch_prompts=len(tasks),
        micro_batch_rollouts=len(tasks) * args.group_size,
        lr=args.lr,
        kl_coef=args.kl,
        bf16=False,
    )
    trainer = RLTrainer(model, ref_model, loop, RuleJudge(), RewardConfig(), config, seed=seed)
    rewards, started = [], time.perf_counter()
    for step in range(args.steps):
        metrics, _ = trainer.step(tasks, step)
        rewards.append(metrics["reward/score"])
    return {"reward": rewards, "seconds": time.perf_counter() - started}


def run_trl(args: argparse.Namespace, tasks: list, seed: int, out: Path) -> dict[str, Any]:
    import datasets
    from trl import GRPOTrainer

    from slca_grpo.integrations.trl import TaskRewards, task_rows
    from slca_grpo.models import load_model

    model, tokenizer = load_model(args.model)
    rows = task_rows(tasks * args.steps)
    for row, task in zip(rows, tasks * args.steps):
        row["prompt"] = prompt_text(task)  # text: TRL's own chat rendering would leave the tools out
    rewards = TaskRewards(("score",))
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[rewards.function("score")],
        args=trl_args(args, seed, out),
        train_dataset=datasets.Dataset.from_list(rows),
        processing_class=tokenizer,
    )
    return _train(trainer)


def run_trl_slca(args: argparse.Namespace, tasks: list, seed: int, out: Path) -> dict[str, Any]:
    from slca_grpo.integrations.trl import AgentLoopRollouts, SLCATrainer, task_dataset
    from slca_grpo.models import load_model
    from slca_grpo.rollout.loop import RolloutConfig

    model, tokenizer = load_model(args.model)
    trainer = SLCATrainer(
        model,
        args=trl_args(args, seed, out),
        train_dataset=task_dataset(tasks * args.steps),
        processing_class=tokenizer,
        estimator=args.estimator,
        rollouts=AgentLoopRollouts(rollout=RolloutConfig(max_turns=1)),
    )
    return _train(trainer)


def _train(trainer) -> dict[str, Any]:
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # one line per run is printed here instead
    started = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - started
    rewards = [entry["reward"] for entry in trainer.state.log_history if "reward" in entry]
    return {"reward": rewards, "seconds": seconds}


def mean_curve(runs: list[dict[str, Any]]) -> list[float]:
    return [statistics.fmean(run["reward"][step] for run in runs) for step in range(len(runs[0]["reward"]))]


def table(results: dict[str, list[dict[str, Any]]], steps: int) -> list[str]:
    window = max(1, min(5, steps // 4))
    lines = [
        f"| arm | runs | reward, first {window} steps | reward, last {window} steps | gain | s / step | steps / s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for arm, runs in results.items():
        curve = mean_curve(runs)
        first, last = statistics.fmean(curve[:window]), statistics.fmean(curve[-window:])
        per_step = statistics.fmean(run["seconds"] / len(run["reward"]) for run in runs)
        lines.append(
            f"| {arm} | {len(runs)} | {first:.3f} | {last:.3f} | {last - first:+.3f} | {per_step:.2f} | "
            f"{1 / per_step:.3f} |"
        )
    return lines


def plot(results: dict[str, list[dict[str, Any]]], path: Path) -> None:
    from slca_grpo.plotting import agg_pyplot

    plt = agg_pyplot()
    figure, axis = plt.subplots(figsize=(6.4, 3.8))
    for arm, runs in results.items():
        curve = mean_curve(runs)
        steps = range(1, len(curve) + 1)
        for run in runs:
            axis.plot(steps, run["reward"], alpha=0.2, linewidth=0.8, color=_color(arm))
        axis.plot(steps, curve, label=f"{arm} (mean of {len(runs)})", linewidth=2, color=_color(arm))
    axis.set_xlabel("RL step")
    axis.set_ylabel("mean HierR score of the step's rollouts")
    axis.set_title("Same reader, same 4 fixed tasks, G = 8")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _color(arm: str) -> str:
    return {"ours": "tab:blue", "trl": "tab:orange", "trl+slca": "tab:green"}[arm]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_options(parser, args)
    require_module("trl", INSTALL_HINT)
    pin_torch_threads(args.threads)
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    tasks = fixed_tasks()
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[dict[str, Any]]] = {arm: [] for arm in args.arms}
    with tempfile.TemporaryDirectory() as scratch:
        for seed in range(args.seeds):
            for arm in args.arms:
                torch.manual_seed(seed)
                out = Path(scratch) / f"{arm}-{seed}"
                if arm == "ours":
                    run = run_ours(args, tasks, seed)
                elif arm == "trl":
                    run = run_trl(args, tasks, seed, out)
                else:
                    run = run_trl_slca(args, tasks, seed, out)
                results[arm].append(run)
                print(
                    f"{arm} seed {seed}: reward {run['reward'][0]:.3f} -> {run['reward'][-1]:.3f}, "
                    f"{run['seconds'] / len(run['reward']):.2f} s/step",
                    flush=True,
                )
    lines = table(results, args.steps)
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, {args.threads} threads"
    print("\n".join(lines))
    (args.out / "table.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (args.out / "results.json").write_text(
        json.dumps({"settings": vars(args) | {"out": str(args.out)}, "machine": machine, "runs": results}, indent=1),
        encoding="utf-8",
    )
    plot(results, args.out / "curves.png")
    print(f"wrote {args.out}/table.md, results.json, curves.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
