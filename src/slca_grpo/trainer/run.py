"""A whole training run from one config: data → model → SFT → RL with evals and checkpoints.

``slca train CONFIG`` calls :func:`train`; ``slca demo`` calls it once per estimator from a
shared SFT checkpoint. Resuming (``resume=True``) restores model, optimizer, scheduler and RNG
state from the newest checkpoint; every step's randomness is derived from (seed, step), so a
resumed run continues exactly as the uninterrupted one would have.
"""

from __future__ import annotations

import copy
import json
import random
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from slca_grpo.config import ConfigError, at_least, from_dict, save_yaml_config, to_dict
from slca_grpo.data.config import DataConfig
from slca_grpo.eval.indomain import evaluate_loop
from slca_grpo.models.config import ModelConfig
from slca_grpo.provenance import describe, provenance, record_provenance
from slca_grpo.rewards.config import RewardConfig
from slca_grpo.rewards.factory import make_checker, make_judge
from slca_grpo.rollout.environment import ToolEnvironment
from slca_grpo.rollout.formatter import ChatFormatter, build_formatter
from slca_grpo.rollout.loop import AgentLoop, RolloutConfig
from slca_grpo.rollout.native_format import ChatTemplateError
from slca_grpo.simulator import SimulatorConfig, build_simulator
from slca_grpo.simulator.config import SimulatorServiceConfig
from slca_grpo.trainer.checkpoint import (
    latest_checkpoint,
    load_latest_checkpoint,
    save_checkpoint,
    save_pretrained_atomic,
    set_rng_state,
)
from slca_grpo.trainer.device import DEVICE_SPEC, bf16_autocast, resolve_device
from slca_grpo.trainer.diagnostics import std
from slca_grpo.trainer.logger import MetricsLogger, progress_note
from slca_grpo.trainer.memory import check_fits, estimate_memory
from slca_grpo.trainer.optim import TrainingDiverged
from slca_grpo.trainer.rl import RLConfig, RLTrainer
from slca_grpo.trainer.run_data import MAX_WORD_CHARS as MAX_WORD_CHARS
from slca_grpo.trainer.run_data import load_data, tokenizer_corpus
from slca_grpo.trainer.run_folder import check_model_name, hold_run_folder, resume_config
from slca_grpo.trainer.sft import SFTConfig, build_example, train_sft
from slca_grpo.trainer.sft_record import sft_fingerprint, sft_is_current, sft_settings
from slca_grpo.types import Task


@dataclass
class TrainConfig:
    out_dir: str = "runs/default"
    seed: int = 0
    eval_every: int = 10  # RL steps between held-out evaluations (0: only at the end)
    eval_tasks: int = 64
    eval_batch_size: int = 32
    save_every: int = 10
    keep_last: int = 2
    tensorboard: bool = False
    wandb: bool = False
    wandb_project: str = "slca-grpo"
    progress: bool = True
    torch_threads: int = 0  # 0: torch's default
    plugins: list[str] = field(default_factory=list)  # your modules (names or .py files) imported first
    device: str = "auto"  # auto (CUDA when there is one), cpu, cuda or cuda:N

    def __post_init__(self) -> None:
        if not self.out_dir.strip():  # "" would train into the current folder
            raise ConfigError("out_dir is empty: name the run's folder, e.g. runs/my-run")
        if not DEVICE_SPEC.fullmatch(self.device):
            raise ConfigError(f"device must be auto, cpu, cuda or cuda:N, got {self.device!r}")
        at_least(self, 0, "eval_every", "eval_tasks", "save_every", "torch_threads")
        at_least(self, 1, "eval_batch_size", "keep_last")


@dataclass
class RunConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    simulator: SimulatorConfig = field(default_factory=SimulatorConfig)
    simulator_service: SimulatorServiceConfig = field(default_factory=SimulatorServiceConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    rl: RLConfig = field(default_factory=RLConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


def make_simulator(config: RunConfig):
    """The in-process simulator, or a client of the simulator service when one is configured."""
    return simulator_from(config.simulator, config.simulator_service)


def simulator_from(simulator: SimulatorConfig, service: SimulatorServiceConfig):
    """The simulator of a ``simulator`` section, or a client of ``service`` when it has a URL."""
    if not service.url:
        return build_simulator(simulator)
    from slca_grpo.simulator import SimulatorClient

    # Checked again: the fields may have changed since loading.
    service = from_dict(SimulatorServiceConfig, to_dict(service), prefix="simulator_service.")
    return SimulatorClient(
        service.url,
        timeout_s=service.timeout_s,
        max_retries=service.max_retries,
        batch_size=service.batch_size,
        max_observation_tokens=simulator.max_observation_tokens,
    )


def check_estimators(names, log_rewards=()) -> None:
    """Fail before any training on an estimator the registry does not know, or a reward (read by
    an estimator or asked for in ``rl.log_rewards``) that no reward family provides."""
    from slca_grpo.algos import estimator_spec, list_estimators
    from slca_grpo.rewards import list_rewards

    unknown = [n for n in names if n not in list_estimators()]
    if unknown:
        raise ConfigError(
            f"unknown estimator(s) {', '.join(unknown)}; registered: {', '.join(list_estimators())} "
            "(one a plugin registers needs that plugin: slca --plugin MODULE_OR_FILE ..., or train.plugins)"
        )
    wanted = [(f"estimator {n!r} reads", r) for n in names for r in estimator_spec(n).rewards]
    wanted += [("rl.log_rewards names", r) for r in log_rewards]
    for who, reward in wanted:
        if reward not in list_rewards():
            raise ConfigError(
                f"{who} reward {reward!r}, which no reward family provides; registered: {', '.join(list_rewards())}"
            )


def load_policy(config: ModelConfig, corpus_tasks: list[Task] | None = None):
    """(model, tokenizer); a fresh tiny model's tokenizer is trained on ``corpus_tasks``. The
    tokenizer gets the chat template the run renders with (``model.chat_template``, or the Hermes
    one under ``chat_format: hermes``), so checkpoints carry the format they were trained in."""
    from slca_grpo.chat.jinja import hermes_chat_template
    from slca_grpo.models import PRESETS, load_model

    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16}
    kwargs = {}
    if config.name in PRESETS and corpus_tasks:
        kwargs["corpus_texts"] = tokenizer_corpus(corpus_tasks)
    template = None
    if config.chat_template:
        try:
            template = Path(config.chat_template).expanduser().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"model.chat_template: cannot read {config.chat_template}: {exc}") from None
        if not template.strip():  # an empty template would silently mean "no template": the Hermes format
            raise ConfigError(f"model.chat_template: {config.chat_template} is empty")
    try:
        model, tokenizer = load_model(config.name, dtype=dtypes[config.dtype], **kwargs)
    except ValueError as exc:  # a Hub id the Hub does not serve, a damaged folder
        raise ConfigError(f"model.name: {exc}") from None
    if template is not None:
        tokenizer.chat_template = template
    elif config.chat_format == "hermes":
        tokenizer.chat_template = hermes_chat_template()
    return model, tokenizer


def make_formatter(config: RunConfig, tokenizer) -> ChatFormatter:
    """The chat formatter ``config.model`` asks for; a template that cannot be used is a ConfigError."""
    try:
        return build_formatter(
            tokenizer,
            chat_format=config.model.chat_format,
            tool_parser=config.model.tool_parser,
            max_tool_response_tokens=config.rollout.max_tool_response_tokens,
        )
    except ChatTemplateError as exc:
        raise ConfigError(f"model.chat_format: {config.model.name}: {exc}") from None


def _task_sampler(tasks: list[Task], seed: int, per_step: int):
    def tasks_for_step(step: int) -> list[Task]:
        return random.Random(seed * 7_919 + step).sample(tasks, min(per_step, len(tasks)))

    return tasks_for_step


def run_sft(
    config: RunConfig,
    model,
    tokenizer,
    train_tasks: list[Task],
    out_dir: Path,
    logger: MetricsLogger,
    *,
    echo: bool = False,
) -> Path:
    formatter = make_formatter(config, tokenizer)
    simulator = make_simulator(config)

    def observe(call, task):
        return simulator.simulate(call, task.tools, f"sft-{task.id}").text

    examples = [e for e in (build_example(t, formatter, observe) for t in train_tasks) if e is not None]
    if not examples:
        raise ConfigError(
            "no training task has a reference answer to learn from (SFT needs gold trajectories; "
            "set sft.steps=0 to skip SFT)"
        )
    started = time.perf_counter()

    every = max(1, config.sft.steps // 10)

    def on_step(step: int, metrics: dict[str, float]) -> None:
        if step % 10 == 0 or step == config.sft.steps - 1:
            logger.log(step, metrics, echo=False)
        if echo and ((step + 1) % every == 0 or step == config.sft.steps - 1):
            note = progress_note(step + 1, config.sft.steps, time.perf_counter() - started)
            print(f"[sft] loss={metrics.get('sft/loss', float('nan')):.4g} [{note}]", flush=True)

    losses = train_sft(model, examples, config.sft, pad_id=formatter.pad_id, seed=config.train.seed, on_step=on_step)
    target = save_pretrained_atomic(model, tokenizer, out_dir / "sft")
    (out_dir / "sft_summary.json").write_text(
        json.dumps(
            {
                "fingerprint": sft_fingerprint(config),
                "settings": sft_settings(config),
                "examples": len(examples),
                "steps": len(losses),
                "first_loss": losses[0],
                "final_loss": losses[-1],
                "seconds": time.perf_counter() - started,
                "provenance": provenance(),
            },
            indent=1,
        )
    )
    return target


def start_process(config: RunConfig) -> torch.device:
    """This process's torch threads, seed and quiet loading as ``config`` asks; the device to run on."""
    if config.train.torch_threads:
        torch.set_num_threads(config.train.torch_threads)
    torch.manual_seed(config.train.seed)
    quiet_transformers(config)
    return resolve_device(config.train.device)


def quiet_transformers(config: RunConfig) -> None:
    """Without progress bars, transformers' own (loading and saving weights) go too."""
    if not config.train.progress:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()


def ensure_sft(config: RunConfig, out_dir: Path, *, announce: str | None = None) -> Path:
    """``out_dir/sft``: SFT with ``config`` once, reused while its fingerprint matches, so every
    RL run of a demo or study starts from the same checkpoint. ``announce``: a prefix such as
    ``[demo]`` to print a line before SFT runs."""
    if not sft_is_current(config, out_dir):
        if announce:
            print(
                f"{announce} loading the {config.model.name} model and running SFT ({config.sft.steps} steps)",
                flush=True,
            )
        quiet_transformers(config)
        train_tasks, _ = load_data(config.data)
        model, tokenizer = load_policy(config.model, train_tasks)
        logger = MetricsLogger(out_dir, name="sft_metrics", stdout=None)
        try:
            model = model.to(resolve_device(config.train.device))
            run_sft(config, model, tokenizer, train_tasks, out_dir, logger, echo=announce is not None)
        finally:
            logger.close()
    return out_dir / "sft"


def _rl_models(config: RunConfig, reference_spec: str, resume_from: Path | None, train_tasks: list[Task], device):
    """(policy, tokenizer, frozen reference or None) for RL. With LoRA the policy is the reference
    model plus adapters (fresh, or the checkpoint's) and the reference is the same model with its
    adapters switched off, so no second copy is held."""
    lora = config.model.lora
    if lora.enabled:
        from slca_grpo.models.lora import add_adapters, load_adapters

        base, tokenizer = load_policy(replace(config.model, name=reference_spec), train_tasks)
        model = load_adapters(base, resume_from / "model") if resume_from is not None else add_adapters(base, lora)
        return model.to(device), tokenizer, None
    start_spec = str(resume_from / "model") if resume_from is not None else reference_spec
    model, tokenizer = load_policy(replace(config.model, name=start_spec), train_tasks)
    model.to(device)
    ref_model = None
    if config.rl.kl_coef > 0 and config.rl.steps > 0:
        ref_model = (
            copy.deepcopy(model)
            if resume_from is None
            else load_policy(replace(config.model, name=reference_spec), train_tasks)[0]
        )
        ref_model.to(device).eval().requires_grad_(False)
    return model, tokenizer, ref_model


BUSY_NEXT_STEP = "give this run another train.out_dir"


def train(
    config: RunConfig,
    *,
    resume: bool = False,
    echo: bool = True,
    start_eval: dict[str, Any] | None = None,
    resume_may_differ: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Run SFT (when ``sft.steps > 0``) then RL; returns the final summary (also in ``summary.json``).

    ``start_eval``: the held-out evaluation of this very starting model on the same tasks (the
    step -1 record of a run from the same checkpoint, as the demo has): recorded instead of
    evaluating again, which on a real model costs minutes per run. ``resume_may_differ``: settings
    (dotted keys) a caller allows to differ from the resumed run's ``config.yaml``, beyond
    ``RESUME_MAY_DIFFER``. The run folder is locked while the run writes it.
    """
    from slca_grpo.plugins import load_plugins, loaded_plugins

    load_plugins(config.train.plugins)
    check_model_name(config.model.name)  # before anything is created
    out_dir = Path(config.train.out_dir)
    with ExitStack() as held:
        locked = resume and out_dir.is_dir()  # then it is held before what it holds is read
        if locked:
            held.enter_context(hold_run_folder(out_dir, "slca train", next_step=BUSY_NEXT_STEP))
            config = resume_config(config, out_dir, may_differ=resume_may_differ)
        check_estimators([config.rl.estimator], config.rl.log_rewards)
        if not locked:
            held.enter_context(hold_run_folder(out_dir, "slca train", next_step=BUSY_NEXT_STEP))
        # The record names every plugin loaded (the run's own and --plugin's), so a resume has them.
        config = replace(config, train=replace(config.train, plugins=loaded_plugins()))
        return _train_in(out_dir, config, resume=resume, echo=echo, start_eval=start_eval)


def _train_in(
    out_dir: Path, config: RunConfig, *, resume: bool, echo: bool, start_eval: dict[str, Any] | None
) -> dict[str, Any]:
    save_yaml_config(config, out_dir / "config.yaml")
    earlier = record_provenance(out_dir)
    if earlier is not None:
        print(
            f"warning: {out_dir} was started with {describe(earlier)}; it continues with {describe(provenance())}, "
            "so its steps mix the two (results of different code or machines are not comparable seed by seed)",
            file=sys.stderr,
        )
    device = start_process(config)
    train_tasks, test_tasks = load_data(config.data)
    eval_tasks = test_tasks[: config.train.eval_tasks]

    checkpoints = out_dir / "checkpoints"
    resumed = load_latest_checkpoint(checkpoints) if resume else None
    resume_from = resumed[0] if resumed is not None else None
    start_step = resumed[2]["step"] + 1 if resumed is not None else 0
    logger = MetricsLogger(
        out_dir,
        stdout=None if not echo else __import__("sys").stdout,
        tensorboard=config.train.tensorboard,
        wandb=config.train.wandb,
        wandb_project=config.train.wandb_project,
        run_name=out_dir.name,
        config=to_dict(config),
        resume=resumed is not None,
        resume_step=start_step - 1 if resumed is not None else None,
    )
    sft_logger = MetricsLogger(out_dir, name="sft_metrics", stdout=None)

    # The reference policy is the RL starting point: the SFT result, or the model as loaded.
    sft_dir = out_dir / "sft"
    # A checkpoint from SFT with another configuration is redone, never silently reused; a
    # resumed run keeps the SFT model its checkpoints started from.
    if (
        config.sft.steps > 0
        and not sft_is_current(config, out_dir)
        and not (resume_from and (sft_dir / "config.json").exists())
    ):
        model, tokenizer = load_policy(config.model, train_tasks)
        run_sft(config, model.to(device), tokenizer, train_tasks, out_dir, sft_logger, echo=echo)
    reference_spec = str(sft_dir) if config.sft.steps > 0 else config.model.name
    lora_base = None
    if config.model.lora.enabled:
        # Adapters need their base to be merged later (slca export): keep it as a folder.
        if not Path(reference_spec).is_dir():
            base_dir = out_dir / "lora_base"
            if not (base_dir / "config.json").is_file():
                base, base_tokenizer = load_policy(replace(config.model, name=reference_spec), train_tasks)
                save_pretrained_atomic(base, base_tokenizer, base_dir)
            reference_spec = str(base_dir)
        lora_base = str(Path(reference_spec).resolve())
    model, tokenizer, ref_model = _rl_models(config, reference_spec, resume_from, train_tasks, device)
    if config.rl.steps > start_step:
        estimate = estimate_memory(
            model,
            rollouts=config.rl.prompts_per_step * config.rollout.group_size,
            response_tokens=config.rollout.max_response_tokens,
            micro_batch_rollouts=config.rl.micro_batch_rollouts,
            reference_copy=ref_model is not None,
        )
        check_fits(estimate, device)

    formatter = make_formatter(config, tokenizer)
    environment = ToolEnvironment(make_simulator(config))
    loop = AgentLoop(model, formatter, environment, config.rollout)
    judge = make_judge(config=config.reward)
    trainer = RLTrainer(
        model,
        ref_model,
        loop,
        judge,
        config.reward,
        config.rl,
        seed=config.train.seed,
        checker=make_checker(config=config.reward),
    )
    history: dict[str, list] = {"grad_norms": [], "evals": []}
    if resumed is not None:
        _, state, info = resumed
        trainer.load_state_dict(state["trainer"])
        set_rng_state(state["rng"])
        history = info.get("history", history)

    def evaluate(step: int) -> dict[str, Any]:
        if echo:  # an evaluation prints nothing until it ends
            when = "before RL" if step < 0 else f"after step {step}"
            print(f"evaluating {len(eval_tasks)} held-out tasks ({when}) ...", flush=True)
        with bf16_autocast(device, trainer.bf16):  # evaluated in the precision it trains in
            items, summary = evaluate_loop(
                loop,
                eval_tasks,
                judge,
                config.reward,
                batch_size=config.train.eval_batch_size,
                session_prefix=f"eval-step{step}",  # fresh simulator sessions for every evaluation
            )
        record = {"step": step, **{k: v for k, v in summary.items() if k not in ("by_kind", "slots")}}
        history["evals"].append(record)
        logger.log(step, {f"eval/{k}": v for k, v in record.items() if k != "step"}, echo=echo)
        (out_dir / "eval_items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
        (out_dir / "eval_summary.json").write_text(json.dumps(summary, indent=1))
        return summary

    if start_step == 0 and eval_tasks:
        if start_eval is not None and start_eval.get("step") == -1 and start_eval.get("n") == len(eval_tasks):
            history["evals"].append(dict(start_eval))
            logger.log(-1, {f"eval/{k}": v for k, v in start_eval.items() if k != "step"}, echo=echo)
        else:
            evaluate(-1)  # the starting point, before any RL update
    tasks_for_step = _task_sampler(train_tasks, config.train.seed, config.rl.prompts_per_step)
    from tqdm.auto import tqdm

    steps = range(start_step, config.rl.steps)
    loop_started = time.perf_counter()
    for step in tqdm(
        steps,
        desc=f"RL {config.rl.estimator}",
        disable=not config.train.progress,
        initial=start_step,
        total=config.rl.steps,
    ):
        try:
            metrics, _ = trainer.step(tasks_for_step(step), step)
        except TrainingDiverged as exc:
            kept = latest_checkpoint(checkpoints)
            where = f"the newest checkpoint, {kept}, is intact" if kept else "no RL checkpoint was written yet"
            raise TrainingDiverged(f"training stopped: {exc}; {where} (lower rl.lr, then --resume)") from None
        if "train/grad_norm" in metrics:  # a step skipped for void rollouts took none
            history["grad_norms"].append(metrics["train/grad_norm"])
            metrics["train/grad_norm_std"] = std(history["grad_norms"])
        done = step + 1
        note = progress_note(done, config.rl.steps, time.perf_counter() - loop_started, done_here=done - start_step)
        logger.log(step, metrics, echo=echo, progress=note)
        last = step == config.rl.steps - 1
        if eval_tasks and (last or (config.train.eval_every and (step + 1) % config.train.eval_every == 0)):
            evaluate(step)
        if last or (config.train.save_every and (step + 1) % config.train.save_every == 0):
            save_checkpoint(
                checkpoints,
                step,
                model=model,
                tokenizer=tokenizer,
                state={"trainer": trainer.state_dict()},
                info={"history": history, "lora_base": lora_base},
                keep_last=config.train.keep_last,
            )
    final = history["evals"][-1] if history["evals"] else {}
    summary = {
        "estimator": config.rl.estimator,
        "steps": config.rl.steps,
        "final_eval": final,
        "evals": history["evals"],
        "grad_norm_std": std(history["grad_norms"]),
        "grad_norm_mean": sum(history["grad_norms"]) / max(1, len(history["grad_norms"])),
        "provenance": provenance(),
    }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    logger.close()
    sft_logger.close()
    return summary
