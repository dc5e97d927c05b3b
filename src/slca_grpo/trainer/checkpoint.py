"""Atomic checkpoints: a temporary folder renamed into place, the last K kept.

A checkpoint is ``step-NNNNNN/`` holding ``model/`` (Hugging Face ``save_pretrained`` format with
the tokenizer), ``state.pt`` (optimizer, scheduler, RNG states) and ``trainer_state.json``. The
file ``latest`` names the newest complete one; a crash mid-write leaves only a ``.tmp-*`` folder
that the next save removes.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

PREFIX = "step-"


def rng_state() -> dict[str, Any]:
    return {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])


def _write_atomic(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def _save_model(model: torch.nn.Module, folder: Path) -> None:
    # transformers refuses to save a GGUF-loaded model (SmolLM2) as is; its weights are already
    # de-quantised, so it is saved as the plain checkpoint it is.
    if getattr(getattr(model, "config", None), "quantization_config", None) is not None:
        from slca_grpo.models import to_serializable

        model = to_serializable(model)
    model.save_pretrained(folder, safe_serialization=True)


def save_pretrained_atomic(model: torch.nn.Module, tokenizer: Any, target: Path) -> Path:
    """``save_pretrained`` of model and tokenizer into ``target`` via a temporary folder."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".tmp-{target.name}-{os.getpid()}")
    shutil.rmtree(temporary, ignore_errors=True)
    _save_model(model, temporary)
    if tokenizer is not None:
        tokenizer.save_pretrained(temporary)
    if target.exists():
        shutil.rmtree(target)
    os.rename(temporary, target)
    return target


def save_checkpoint(
    root: str | Path,
    step: int,
    *,
    model: torch.nn.Module,
    tokenizer: Any,
    state: dict[str, Any],
    info: dict[str, Any],
    keep_last: int = 2,
) -> Path:
    """Write checkpoint ``step`` under ``root``; ``state`` is torch-saved, ``info`` JSON."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(".tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    name = f"{PREFIX}{step:06d}"
    temporary = root / f".tmp-{name}-{os.getpid()}"
    _save_model(model, temporary / "model")
    if tokenizer is not None:
        tokenizer.save_pretrained(temporary / "model")
    torch.save({**state, "rng": rng_state()}, temporary / "state.pt")
    (temporary / "trainer_state.json").write_text(json.dumps({"step": step, **info}, indent=1), encoding="utf-8")
    final = root / name
    if final.exists():
        shutil.rmtree(final)
    os.rename(temporary, final)
    _write_atomic(root / "latest", name + "\n")
    for old in sorted(p for p in root.glob(f"{PREFIX}*") if p.is_dir())[:-keep_last] if keep_last > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(root: str | Path) -> Path | None:
    root = Path(root)
    pointer = root / "latest"
    if pointer.exists():
        candidate = root / pointer.read_text(encoding="utf-8").strip()
        if (candidate / "state.pt").exists():
            return candidate
    complete = sorted(p for p in root.glob(f"{PREFIX}*") if (p / "state.pt").exists())
    return complete[-1] if complete else None


def load_checkpoint_state(path: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(torch state incl. ``rng``, JSON info incl. ``step``) of a checkpoint folder."""
    path = Path(path)
    state = torch.load(path / "state.pt", map_location="cpu", weights_only=False)
    info = json.loads((path / "trainer_state.json").read_text(encoding="utf-8"))
    return state, info
