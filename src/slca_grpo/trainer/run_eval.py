"""A run's evaluation, one way for the run itself and for ``slca eval indomain --run``: its own
held-out tasks, through its agent loop (rollout limits, simulator, chat format) and its judge, in
the precision it trains in. Evaluated again later, a checkpoint gives the numbers the run recorded
for it (greedy: exactly, on the same machine and threads)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from slca_grpo.config import ConfigError, load_yaml_config
from slca_grpo.datatypes import Task
from slca_grpo.eval.indomain import evaluate_loop
from slca_grpo.models.checkpoint import checkpoints_in
from slca_grpo.models.device import bf16_autocast, resolve_bf16
from slca_grpo.models.lora import load_adapters
from slca_grpo.plugins import load_plugins
from slca_grpo.rewards.factory import make_judge
from slca_grpo.rewards.judge_base import Judge
from slca_grpo.rollout.environment import ToolEnvironment
from slca_grpo.rollout.loop import AgentLoop
from slca_grpo.trainer.build import load_policy, make_formatter, make_simulator, start_process
from slca_grpo.trainer.run_config import RunConfig
from slca_grpo.trainer.run_data import load_data
from slca_grpo.trainer.run_folder import checkpoint_step, recorded_plugins

START = "start"  # the model a run's RL started from (its SFT result, or model.name), evaluated as step -1


def evaluate_tasks(
    loop: AgentLoop,
    judge: Judge,
    config: RunConfig,
    tasks: list[Task],
    *,
    name: str,
    step: int,
    temperature: float,
    bf16: bool,
    device: torch.device,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One evaluation of ``tasks`` as a run makes it: ``name`` (``eval``, ``probe``, with
    ``-sampled`` for the sampled one) and ``step`` name its simulator sessions, so every
    evaluation starts from fresh ones and an evaluation made again meets the same."""
    with bf16_autocast(device, bf16):
        return evaluate_loop(
            loop,
            tasks,
            judge,
            config.reward,
            batch_size=config.train.eval_batch_size,
            temperature=temperature,
            seed=config.train.seed,
            session_prefix=f"{name}-step{step}",
        )


@dataclass
class RunEvaluation:
    """A run's model, loop and held-out tasks, ready to evaluate as the run did."""

    config: RunConfig
    loop: AgentLoop
    judge: Judge
    tasks: list[Task]
    step: int  # the checkpoint's step; -1 for the start
    bf16: bool
    device: torch.device

    def __call__(self, samples: int = 0, seed: int | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Greedy on every task, or ``samples`` rollouts of each at the run's rollout temperature
        (as ``train.eval_samples`` draws them; ``seed``: other draws than the run's own)."""
        if samples:
            repeated = [task for task in self.tasks for _ in range(samples)]
            temperature, name, tasks = self.config.rollout.temperature, "eval-sampled", repeated
        else:
            temperature, name, tasks = 0.0, "eval", self.tasks
        config = self.config if seed is None else replace(self.config, train=replace(self.config.train, seed=seed))
        return evaluate_tasks(
            self.loop,
            self.judge,
            config,
            tasks,
            name=name,
            step=self.step,
            temperature=temperature,
            bf16=self.bf16,
            device=self.device,
        )


def load_run_evaluation(
    run_dir: str | Path, checkpoint: str | None = None, *, limit: int | None = None
) -> RunEvaluation:
    """The evaluation of ``run_dir``'s model at ``checkpoint`` (a step, ``start``, or None for the
    newest), with the run's own settings (``limit``: its first held-out tasks only). One-line
    ``ConfigError`` for a folder that is no run, or a checkpoint it does not hold."""
    run = Path(run_dir)
    saved = run / "config.yaml"
    if not saved.is_file():
        raise ConfigError(f"--run: {run} is not a training run's folder (it has no config.yaml)")
    load_plugins(recorded_plugins(saved))
    config = load_yaml_config(RunConfig, saved)
    found = {checkpoint_step(folder): folder for folder in checkpoints_in(run) if (folder / "model").is_dir()}
    if checkpoint == START:
        step, folder = -1, None
    elif checkpoint is None:
        if not found:
            raise ConfigError(f"--run: {run} holds no checkpoint yet (--checkpoint start evaluates its start)")
        step = max(found)
        folder = found[step]
    else:
        try:
            step = int(checkpoint)
        except ValueError:
            raise ConfigError(f"--checkpoint must be a step or 'start', got {checkpoint!r}") from None
        if step not in found:
            steps = ", ".join(map(str, sorted(found))) or "none"
            raise ConfigError(f"--checkpoint: {run} holds no checkpoint of step {step} (it holds: {steps})")
        folder = found[step]
    device = start_process(config)
    data = load_data(config.data)
    start_model = _start_model(config, run)
    if config.model.lora.enabled:
        base, tokenizer = load_policy(replace(config.model, name=start_model), data.train)
        model = base if folder is None else load_adapters(base, folder / "model", trainable=False)
    else:
        model, tokenizer = load_policy(
            replace(config.model, name=start_model if folder is None else str(folder / "model")), data.train
        )
    tasks = data.test[: config.train.eval_tasks][:limit]
    _check_tasks(run, tasks)
    model.to(device).eval()
    loop = AgentLoop(model, make_formatter(config, tokenizer), ToolEnvironment(make_simulator(config)), config.rollout)
    return RunEvaluation(
        config=config,
        loop=loop,
        judge=make_judge(config=config.reward),
        tasks=tasks,
        step=step,
        bf16=resolve_bf16(config.rl.bf16, device, "rl.bf16"),
        device=device,
    )


def _check_tasks(run: Path, tasks: list[Task]) -> None:
    """Refuse when today's code makes other held-out tasks than the run evaluated: the task ids its
    evaluation items recorded, in order (a run without them is taken at its word)."""
    for name in ("eval_start_items.jsonl", "eval_items.jsonl"):
        try:
            items = [json.loads(line) for line in (run / name).read_text(encoding="utf-8").splitlines() if line]
            recorded = [item["task_id"] for item in items]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        made = [task.id for task in tasks]
        if recorded[: len(made)] != made:
            raise ConfigError(
                f"--run: today's code makes other held-out tasks than {run} evaluated (its {name}); evaluate it "
                "with the code the run was made with"
            )
        return


def _start_model(config: RunConfig, run: Path) -> str:
    """The model the run's RL started from: its LoRA base, its SFT result, or ``model.name``."""
    if config.model.lora.enabled and (run / "lora_base" / "config.json").is_file():
        return str(run / "lora_base")
    if config.sft.steps > 0:
        return str(run / "sft")
    return config.model.name
