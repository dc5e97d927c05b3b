"""Everything a run is built from, each made one way for training, SFT, ``slca bench`` and the
benchmarks: the process settings, the policy (with the chat template it renders with), the chat
formatter, the simulator, the reference model, and the RL trainer with its agent loop and judge."""

from __future__ import annotations

import copy
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from transformers.utils import logging as transformers_logging

from slca_grpo.chat.chat_format import build_formatter, install_chat_template, read_chat_template
from slca_grpo.chat.formatter import ChatFormatter
from slca_grpo.chat.native_format import ChatTemplateError
from slca_grpo.config import ConfigError
from slca_grpo.datatypes import Task
from slca_grpo.engine import keep_freed_memory, use_native_kernels
from slca_grpo.models import PRESETS, load_model
from slca_grpo.models.checkpoint import save_pretrained_atomic
from slca_grpo.models.config import ModelConfig
from slca_grpo.models.device import resolve_device
from slca_grpo.models.lora import add_adapters, load_adapters
from slca_grpo.rewards.factory import make_checker, make_judge
from slca_grpo.rollout.environment import ToolEnvironment
from slca_grpo.rollout.loop import AgentLoop
from slca_grpo.simulator import SimulatorClient, SimulatorConfig, build_simulator
from slca_grpo.simulator.config import SimulatorServiceConfig
from slca_grpo.trainer.memory import check_fits, estimate_memory
from slca_grpo.trainer.rl import RLConfig, RLTrainer
from slca_grpo.trainer.run_config import RunConfig
from slca_grpo.trainer.run_data import tokenizer_corpus

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def start_process(config: RunConfig) -> torch.device:
    """This process's torch threads, memory reuse, seed and quiet loading as ``config`` asks; the
    device to run on. The thread count is fixed for the whole run (``train.torch_threads``, else
    torch's default) and recorded by :func:`thread_settings`."""
    if config.train.keep_freed_memory:
        keep_freed_memory()
    use_native_kernels(config.model.native_kernels)
    if config.train.torch_threads:
        torch.set_num_threads(config.train.torch_threads)
    torch.manual_seed(config.train.seed)
    quiet_transformers(config)
    return resolve_device(config.train.device)


def thread_settings() -> dict[str, Any]:
    """The threads this process computes with, as a run's provenance records them: a run's digits
    depend on them (how sums are split), and a study's report says when its runs' differ."""
    return {
        "torch_threads": torch.get_num_threads(),
        "mkl_dynamic": os.environ.get("MKL_DYNAMIC"),
        "mkl_cbwr": os.environ.get("MKL_CBWR"),
        "omp_dynamic": os.environ.get("OMP_DYNAMIC"),
    }


def quiet_transformers(config: RunConfig) -> None:
    """Without progress bars, transformers' own (loading and saving weights) go too."""
    if not config.train.progress:
        transformers_logging.disable_progress_bar()


def load_policy(config: ModelConfig, corpus_tasks: list[Task] | None = None):
    """(model, tokenizer); a fresh tiny model's tokenizer is trained on ``corpus_tasks``. The
    tokenizer gets the chat template the run renders with (``model.chat_template``, or the Hermes
    one under ``chat_format: hermes``), so checkpoints carry the format they were trained in."""
    kwargs = {}
    if config.name in PRESETS and corpus_tasks:
        kwargs["corpus_texts"] = tokenizer_corpus(corpus_tasks)
    # Read before the model loads, so a bad file fails in a moment, not after minutes of loading.
    template = read_chat_template(config.chat_template) if config.chat_template else None
    try:
        model, tokenizer = load_model(config.name, dtype=DTYPES[config.dtype], **kwargs)
    except ValueError as exc:  # a Hub id the Hub does not serve, a damaged folder
        raise ConfigError(f"model.name: {exc}") from None
    install_chat_template(tokenizer, chat_format=config.chat_format, chat_template=template)
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


def make_simulator(config: RunConfig):
    """The in-process simulator, or a client of the simulator service when one is configured."""
    return simulator_from(config.simulator, config.simulator_service)


def simulator_from(simulator: SimulatorConfig, service: SimulatorServiceConfig):
    """The simulator of a ``simulator`` section, or a client of ``service`` when it has a URL."""
    if not service.url:
        return build_simulator(simulator)
    try:  # checked again: a field may have been set since loading
        service.validate()
    except ConfigError as exc:
        raise ConfigError(f"simulator_service.{exc}") from None
    return SimulatorClient(service, max_observation_tokens=simulator.max_observation_tokens)


def keep_lora_base(
    config: RunConfig, out_dir: Path, reference_spec: str, train_tasks: list[Task]
) -> tuple[str, str | None]:
    """(the model RL starts from, the LoRA base folder or None). LoRA adapters need their base to
    be merged later (``slca export``), so a base that is no folder is saved as ``out_dir/lora_base``."""
    if not config.model.lora.enabled:
        return reference_spec, None
    if not Path(reference_spec).is_dir():
        base_dir = out_dir / "lora_base"
        if not (base_dir / "config.json").is_file():
            base, base_tokenizer = load_policy(replace(config.model, name=reference_spec), train_tasks)
            save_pretrained_atomic(base, base_tokenizer, base_dir)
        reference_spec = str(base_dir)
    return reference_spec, str(Path(reference_spec).resolve())


def rl_models(config: RunConfig, reference_spec: str, resume_from: Path | None, train_tasks: list[Task], device):
    """(policy, tokenizer, frozen reference or None) for RL. With LoRA the policy is the reference
    model plus adapters (fresh, or the checkpoint's) and the reference is the same model with its
    adapters switched off, so no second copy is held."""
    if config.model.lora.enabled:
        base, tokenizer = load_policy(replace(config.model, name=reference_spec), train_tasks)
        model = (
            load_adapters(base, resume_from / "model")
            if resume_from is not None
            else add_adapters(base, config.model.lora)
        )
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


def check_rl_fits(config: RunConfig, model, ref_model, device: torch.device) -> None:
    """Stop with the estimate when an RL step of ``config`` would not fit in ``device``'s memory."""
    estimate = estimate_memory(
        model,
        rollouts=config.rl.prompts_per_step * config.rollout.group_size,
        response_tokens=config.rollout.max_response_tokens,
        micro_batch_rollouts=config.rl.micro_batch_rollouts,
        reference_copy=ref_model is not None,
    )
    check_fits(estimate, device)


def build_rl_trainer(config: RunConfig, model, ref_model, tokenizer, rl: RLConfig | None = None) -> RLTrainer:
    """The RL trainer of ``config`` (``rl`` replaces its ``rl`` section): the policy's agent loop in
    the simulator's tool environment, and the judge and checker of its rewards."""
    formatter = make_formatter(config, tokenizer)
    environment = ToolEnvironment(make_simulator(config))
    loop = AgentLoop(model, formatter, environment, config.rollout)
    judge = make_judge(config=config.reward)
    return RLTrainer(
        model,
        ref_model,
        loop,
        judge,
        config.reward,
        rl if rl is not None else config.rl,
        seed=config.train.seed,
        checker=make_checker(config=config.reward),
    )
