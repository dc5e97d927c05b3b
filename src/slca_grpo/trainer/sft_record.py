"""Which SFT a run folder's ``sft/`` checkpoint came from: the settings it depends on, kept in
``sft_summary.json``, so a later run, demo or study reuses it only when they match."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slca_grpo.config import from_dict, to_dict
from slca_grpo.data.config import DataConfig
from slca_grpo.models.config import ModelConfig
from slca_grpo.simulator import SimulatorConfig
from slca_grpo.trainer.sft import SFTConfig

if TYPE_CHECKING:
    from slca_grpo.trainer.run import RunConfig

SFT_SECTIONS = {"model": ModelConfig, "data": DataConfig, "sft": SFTConfig, "simulator": SimulatorConfig}


def _without_rl_only(section: str, data: dict[str, Any]) -> dict[str, Any]:
    # LoRA adapters are an RL setting: SFT trains the whole model, whatever model.lora says.
    return {k: v for k, v in data.items() if not (section == "model" and k == "lora")}


def sft_settings(config: RunConfig) -> dict[str, Any]:
    """Everything the SFT checkpoint depends on (model, data, SFT, simulator, seed)."""
    return {
        **{name: _without_rl_only(name, to_dict(getattr(config, name))) for name in SFT_SECTIONS},
        "seed": config.train.seed,
        "max_tool_response_tokens": config.rollout.max_tool_response_tokens,
    }


def sft_fingerprint(config: RunConfig) -> str:
    """A short hash of :func:`sft_settings`, for logs and summaries."""
    import hashlib

    return hashlib.sha256(json.dumps(sft_settings(config), sort_keys=True, default=str).encode()).hexdigest()[:16]


def _same_sft_settings(saved: dict[str, Any], config: RunConfig) -> bool:
    # Saved sections go through the loader, so a key they predate counts as its default.
    wanted = sft_settings(config)
    try:
        loaded = {
            name: _without_rl_only(name, to_dict(from_dict(cls, saved[name]))) for name, cls in SFT_SECTIONS.items()
        }
    except (KeyError, TypeError, ValueError):
        return False
    scalars = ("seed", "max_tool_response_tokens")
    return loaded == {name: wanted[name] for name in SFT_SECTIONS} and all(saved.get(k) == wanted[k] for k in scalars)


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
