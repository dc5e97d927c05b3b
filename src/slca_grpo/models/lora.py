"""LoRA adapters through ``peft``: wrap a policy, save and load only the adapters, merge them into a
plain Hugging Face folder (``slca export``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

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
        from slca_grpo.config import ConfigError

        raise ConfigError(f"model.lora: {exc}") from None


def is_adapter_folder(folder: str | Path) -> bool:
    return (Path(folder) / ADAPTER_CONFIG).is_file()


def load_adapters(base: torch.nn.Module, folder: str | Path, *, trainable: bool = True) -> torch.nn.Module:
    """``base`` with the adapters saved in ``folder``."""
    return _peft().PeftModel.from_pretrained(base, str(folder), is_trainable=trainable)


def is_lora_model(model: torch.nn.Module) -> bool:
    try:
        from peft import PeftModel
    except ImportError:
        return False
    return isinstance(model, PeftModel)


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


def export_merged(source: str | Path, out: str | Path, *, base: str | None = None) -> Path:
    """Merge the adapters of ``source`` (a checkpoint ``step-N`` folder or its ``model/``) into
    their base and save a plain Hugging Face folder (with the tokenizer) at ``out``."""
    from slca_grpo.models import load_model, load_tokenizer
    from slca_grpo.trainer.checkpoint import save_pretrained_atomic

    source = Path(source)
    adapters = source / "model" if is_adapter_folder(source / "model") else source
    if not is_adapter_folder(adapters):
        raise ValueError(f"{source} holds no LoRA adapters ({ADAPTER_CONFIG} not found)")
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
