"""A run folder's SFT checkpoint, ``sft/``: made once, and reused while the settings it depends on
(kept in ``sft_summary.json``) match, so a resumed run, every RL run of a demo and every run of a
study start from the same model."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from slca_grpo.config import ConfigError, from_dict
from slca_grpo.datatypes import Task
from slca_grpo.models.checkpoint import save_pretrained_atomic
from slca_grpo.models.device import resolve_device
from slca_grpo.provenance import provenance
from slca_grpo.trainer.build import load_policy, make_formatter, make_simulator, quiet_transformers
from slca_grpo.trainer.logger import MetricsLogger, progress_note
from slca_grpo.trainer.run_config import RunConfig, run_settings
from slca_grpo.trainer.run_data import load_data
from slca_grpo.trainer.sft import build_example, gets_notice, train_sft

# The run config sections an SFT checkpoint depends on.
SFT_SECTIONS = ("model", "data", "sft", "simulator")


def _without_rl_only(section: str, data: dict[str, Any]) -> dict[str, Any]:
    # LoRA adapters are an RL setting: SFT trains the whole model, whatever model.lora says.
    return {k: v for k, v in data.items() if not (section == "model" and k == "lora")}


def sft_settings(config: RunConfig) -> dict[str, Any]:
    """Everything the SFT checkpoint depends on (model, data, SFT, simulator, seed)."""
    every = run_settings(config)
    settings = {
        **{name: _without_rl_only(name, every[name]) for name in SFT_SECTIONS},
        "seed": config.train.seed,
        "max_tool_response_tokens": config.rollout.max_tool_response_tokens,
    }
    if config.sft.notice_share > 0:  # only then the examples hold it (earlier summaries lack the key)
        settings["final_answer_notice"] = config.rollout.final_answer_notice
    return settings


def sft_fingerprint(config: RunConfig) -> str:
    """A short hash of :func:`sft_settings`, for logs and summaries."""
    return hashlib.sha256(json.dumps(sft_settings(config), sort_keys=True, default=str).encode()).hexdigest()[:16]


def _same_sft_settings(saved: dict[str, Any], config: RunConfig) -> bool:
    # Saved sections go through the loader, so a key they predate counts as its default.
    wanted = sft_settings(config)
    try:
        every = run_settings(from_dict(RunConfig, {name: saved[name] for name in SFT_SECTIONS}))
    except (KeyError, TypeError, ValueError):
        return False
    loaded = {name: _without_rl_only(name, every[name]) for name in SFT_SECTIONS}
    scalars = ("seed", "max_tool_response_tokens", "final_answer_notice")
    return loaded == {name: wanted[name] for name in SFT_SECTIONS} and all(
        saved.get(k) == wanted.get(k) for k in scalars
    )


def sft_is_current(config: RunConfig, out_dir: Path) -> bool:
    """True when ``out_dir/sft`` holds a checkpoint made by SFT with this same configuration."""
    summary = out_dir / "sft_summary.json"
    if not (out_dir / "sft" / "config.json").exists() or not summary.exists():
        return False
    try:
        saved = json.loads(summary.read_text())
    except (OSError, ValueError):
        return False
    if isinstance(saved.get("settings"), dict):
        return _same_sft_settings(saved["settings"], config)
    return saved.get("fingerprint") == sft_fingerprint(config)  # summaries written before settings were kept


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
    """SFT on the gold trajectories of ``train_tasks``; the result is ``out_dir/sft``, described by
    ``out_dir/sft_summary.json``."""
    formatter = make_formatter(config, tokenizer)
    simulator = make_simulator(config)

    def observe(call, task):
        return simulator.simulate(call, task.tools, f"sft-{task.id}").text

    share, notice = config.sft.notice_share, config.rollout.final_answer_notice
    examples = [
        e
        for e in (
            build_example(t, formatter, observe, notice=notice if gets_notice(t, share, config.train.seed) else None)
            for t in train_tasks
        )
        if e is not None
    ]
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
        train_tasks = load_data(config.data).train
        model, tokenizer = load_policy(config.model, train_tasks)
        logger = MetricsLogger(out_dir, name="sft_metrics", stdout=None)
        try:
            model = model.to(resolve_device(config.train.device))
            run_sft(config, model, tokenizer, train_tasks, out_dir, logger, echo=announce is not None)
        finally:
            logger.close()
    return out_dir / "sft"


def rl_starting_model(
    config: RunConfig,
    out_dir: Path,
    train_tasks: list[Task],
    device,
    *,
    resuming: bool,
    echo: bool,
) -> str:
    """The model RL starts from, which is also its reference policy: ``out_dir/sft`` when
    ``sft.steps > 0`` (SFT runs first unless that checkpoint is current), else ``model.name``. SFT
    with another configuration is redone, never silently reused; a resumed run keeps the SFT model
    its checkpoints started from."""
    if not config.sft.steps > 0:
        return config.model.name
    sft_dir = out_dir / "sft"
    if not sft_is_current(config, out_dir) and not (resuming and (sft_dir / "config.json").exists()):
        model, tokenizer = load_policy(config.model, train_tasks)
        # Opened only when SFT runs: a resumed run keeps the SFT metrics its checkpoints came from.
        logger = MetricsLogger(out_dir, name="sft_metrics", stdout=None)
        try:
            run_sft(config, model.to(device), tokenizer, train_tasks, out_dir, logger, echo=echo)
        finally:
            logger.close()
    return str(sft_dir)
