"""LoRA adapters through ``peft``: wrap a policy, save and load only the adapters, merge them into a
plain Hugging Face folder (``slca export``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from slca_grpo.config import ConfigError
from slca_grpo.models import load_model, load_tokenizer
from slca_grpo.models.checkpoint import find_checkpoint, save_pretrained_atomic
from slca_grpo.models.config import LoraConfig

ADAPTER_CONFIG = "adapter_config.json"


def _peft() -> Any:
    try:
        import peft
    except ImportError as exc:  # pragma: no cover - installed by install.sh
        raise ImportError("LoRA needs the 'peft' package: pip install 'slca-grpo[lora]'") from exc
    return peft


def add_adapters(model: torch.nn.Module, config: LoraConfig) -> torch.nn.Module:
    """``model`` with fresh LoRA adapters; only their parameters require gradients."""
    peft = _peft()
    settings = peft.LoraConfig(
        r=config.r,
        lora_alpha=config.alpha,
        lora_dropout=config.dropout,
        target_modules=list(config.target_modules),
        task_type="CAUSAL_LM",
    )
    try:
        return peft.get_peft_model(model, settings)
    except ValueError as exc:  # e.g. target modules this architecture does not have
        raise ConfigError(f"model.lora: {exc}") from None


def is_adapter_folder(folder: str | Path) -> bool:
    return (Path(folder) / ADAPTER_CONFIG).is_file()


def load_adapters(base: torch.nn.Module, folder: str | Path, *, trainable: bool = True) -> torch.nn.Module:
    """``base`` with the adapters saved in ``folder``."""
    return _peft().PeftModel.from_pretrained(base, str(folder), is_trainable=trainable)


def adapter_base(folder: str | Path) -> str | None:
    """The base model an adapter folder was trained on, as recorded when it was saved."""
    try:
        data = json.loads((Path(folder) / ADAPTER_CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("base_model_name_or_path") or None


def merged(model: torch.nn.Module) -> torch.nn.Module:
    """A plain model with the adapters folded into its weights (the adapter model is consumed)."""
    return model.merge_and_unload()


def export_merged(source: str | Path, out: str | Path, *, base: str | None = None, force: bool = False) -> Path:
    """Merge the adapters of ``source`` (a run folder — its newest checkpoint —, a checkpoint
    ``step-N`` folder or its ``model/``) into their base and save a plain Hugging Face folder (with
    the tokenizer) at ``out``. ``out`` must be empty or new (``force``: replaced) and outside the
    run or checkpoint it exports from. ValueError/OSError in one line otherwise."""
    checkpoint = find_checkpoint(source)
    adapters = checkpoint / "model" if is_adapter_folder(checkpoint / "model") else checkpoint
    if not is_adapter_folder(adapters):
        plain = checkpoint / "model" if (checkpoint / "model" / "config.json").is_file() else None
        hint = f": {plain} is already a plain Hugging Face folder, use it as is" if plain else ""
        raise ValueError(f"{checkpoint} holds no LoRA adapters ({ADAPTER_CONFIG} not found){hint}")
    check_export_target(checkpoint, Path(out), force=force)
    if base is None:
        try:
            base = json.loads((adapters.parent / "trainer_state.json").read_text(encoding="utf-8")).get("lora_base")
        except (OSError, ValueError):
            base = None
        base = base or adapter_base(adapters)
    if not base:
        raise ValueError(f"the base model of {adapters} is not recorded: pass --base")
    model, _ = load_model(base)
    model = merged(load_adapters(model, adapters, trainable=False))
    return save_pretrained_atomic(model, load_tokenizer(adapters), Path(out))


def check_export_target(checkpoint: Path, out: Path, *, force: bool = False) -> None:
    """ValueError unless writing ``out`` leaves everything else as it was: ``out`` is neither in
    nor above the run (or lone checkpoint) ``checkpoint`` belongs to, and is new or empty unless
    ``force`` lets it be replaced."""
    in_run = checkpoint.parent.name == "checkpoints"
    protected = (checkpoint.parent.parent if in_run else checkpoint).resolve()
    target = out.expanduser().resolve()
    if target == protected or protected in target.parents or target in protected.parents:
        what = "run" if in_run else "checkpoint"
        raise ValueError(
            f"--out {out} is inside (or holds) the {what} {protected} it exports from, and writing it would replace "
            "its files; choose a folder outside it"
        )
    occupied = out.is_symlink() or out.is_file() or (out.is_dir() and any(out.iterdir()))
    if occupied and not force:
        raise ValueError(f"--out {out} is not an empty folder; choose a new one, or pass --force to replace it")
