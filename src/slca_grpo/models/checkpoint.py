"""Atomic checkpoints: a temporary folder renamed into place, the last K kept.

A checkpoint is ``step-NNNNNN/`` holding ``model/`` (Hugging Face ``save_pretrained`` format with
the tokenizer), ``state.pt`` (optimizer, scheduler, RNG states: tensors and plain values only, so
it loads with ``weights_only=True`` and a crafted file cannot run code) and ``trainer_state.json``.
The file ``latest`` names the newest complete one; a crash mid-write leaves only a ``.tmp-*``
folder that the next save removes. Loading checks every file; a damaged newest checkpoint falls
back to the newest intact one, and says so.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import sys
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from slca_grpo.models.smollm2 import to_serializable

PREFIX = "step-"
NAME = re.compile(r"step-\d{6,}")


class CheckpointError(OSError):
    """No intact checkpoint to resume from (one line saying which file is damaged, and how)."""


class ModelWeightsError(CheckpointError, ValueError):
    """A model folder whose weights cannot be used as they are: they do not match its ``config.json``
    (missing, unexpected or differently shaped tensors) or are not finite. One line naming the
    folder and what is wrong; a ``ValueError`` too, so every caller that reports a damaged model
    folder in one line reports this one the same way."""


# How many tensor names one error line shows at most.
_SHOWN = 3


def _names(keys: Iterable[str]) -> str:
    ordered = sorted(keys, key=_natural)
    shown = ", ".join(ordered[:_SHOWN])
    return shown + (f" and {len(ordered) - _SHOWN} more" if len(ordered) > _SHOWN else "")


def _natural(key: str) -> list[Any]:
    """``layers.2`` before ``layers.10``."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", key)]


def _shape(shape: Any) -> str:
    return "x".join(str(int(n)) for n in shape) or "scalar"


def check_loading_info(
    folder: str | os.PathLike[str], info: dict[str, Any], tied: dict[str, str] | None = None
) -> None:
    """Refuse a checkpoint whose weights do not match the model its ``config.json`` builds.

    ``info`` is what ``from_pretrained(..., output_loading_info=True)`` returns (missing, unexpected
    and mismatched keys, after transformers' own exceptions: a buffer it rebuilds, a tied weight it
    ties). ``tied`` maps a tied weight to its source (``model.all_tied_weights_keys``): a tied
    weight is never missing while its source is there, as ``lm_head.weight`` of a model with tied
    embeddings is absent from the file by design. ``ModelWeightsError`` in one line otherwise.
    """
    tied = tied or {}
    info = info if isinstance(info, dict) else {}
    missing = set(info.get("missing_keys") or ())
    missing = {key for key in missing if not (key in tied and tied[key] not in missing)}
    unexpected = set(info.get("unexpected_keys") or ())
    mismatched = sorted(info.get("mismatched_keys") or (), key=lambda item: _natural(item[0]))
    problems = []
    if missing:
        problems.append(f"{len(missing)} tensor(s) the config asks for are not in the weights ({_names(missing)})")
    if unexpected:
        problems.append(f"{len(unexpected)} tensor(s) in the weights are not in its model ({_names(unexpected)})")
    if mismatched:
        shown = ", ".join(
            f"{name}: {_shape(found)} in the weights, {_shape(expected)} by the config"
            for name, found, expected in mismatched[:_SHOWN]
        )
        more = f" and {len(mismatched) - _SHOWN} more" if len(mismatched) > _SHOWN else ""
        problems.append(f"{len(mismatched)} tensor(s) have another shape ({shown}{more})")
    if problems:
        raise ModelWeightsError(
            f"model folder {folder}: its weights do not match its config.json: {'; '.join(problems)} "
            "(a config.json edited or taken from another model?)"
        )


def check_finite_weights(folder: str | os.PathLike[str], model: torch.nn.Module) -> None:
    """Refuse a model with a NaN or infinite parameter, naming the first one.

    Each parameter is checked in place, one at a time (a shared parameter once): the only memory
    taken is one boolean per element of the tensor being checked, never a copy of the model.
    """
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if not parameter.is_floating_point() or parameter.device.type == "meta":
                continue
            if not bool(torch.isfinite(parameter).all()):
                what = "NaN" if bool(torch.isnan(parameter).any()) else "infinite values"
                raise ModelWeightsError(
                    f"model folder {folder}: its weights are not finite: {name} holds {what} "
                    "(a diverged training run? use an earlier checkpoint)"
                )


def rng_state() -> dict[str, Any]:
    """The RNG states as tensors and plain values (numpy's array becomes a tensor)."""
    name, keys, position, has_gauss, cached = np.random.get_state()
    numpy_state = {"name": name, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(position)}
    numpy_state.update(has_gauss=int(has_gauss), cached_gaussian=float(cached))
    return {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": numpy_state}


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    keys = n["keys"].numpy().astype(np.uint32)
    np.random.set_state((n["name"], keys, n["pos"], n["has_gauss"], n["cached_gaussian"]))


def _write_atomic(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def _save_model(model: torch.nn.Module, folder: Path) -> None:
    # transformers refuses to save a GGUF-loaded model (SmolLM2) as is; its weights are already
    # de-quantised, so it is saved as the plain checkpoint it is.
    if getattr(getattr(model, "config", None), "quantization_config", None) is not None:
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
    remove_path(target)
    os.rename(temporary, target)
    return target


def remove_path(path: Path) -> None:
    """Remove ``path`` whatever it is: a file or link (never what a link points to), or a folder."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (a full disk, say): one line; nothing half-written is left."""


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
    try:
        _save_model(model, temporary / "model")
        if tokenizer is not None:
            tokenizer.save_pretrained(temporary / "model")
        torch.save({**state, "rng": rng_state()}, temporary / "state.pt")
        (temporary / "trainer_state.json").write_text(json.dumps({"step": step, **info}, indent=1), encoding="utf-8")
    except (OSError, RuntimeError) as exc:  # a full disk reaches torch.save as a RuntimeError
        shutil.rmtree(temporary, ignore_errors=True)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointWriteError(
            f"checkpoint {name} could not be written under {root} ({first}); the earlier checkpoints are kept"
        ) from None
    final = root / name
    if final.exists():
        shutil.rmtree(final)
    os.rename(temporary, final)
    _write_atomic(root / "latest", name + "\n")
    # The newest by step are kept, and always the one just written: a folder may hold later steps
    # of an earlier run, and pruning by name alone would delete this one.
    kept = sorted((p for p in root.glob(f"{PREFIX}*") if p.is_dir() and p != final), reverse=True)
    for old in kept[max(0, keep_last - 1) :] if keep_last > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def _candidates(root: Path) -> list[Path]:
    """Checkpoint folders, newest first: the one ``latest`` names (if it is a plain ``step-N``
    name inside ``root``), then every ``step-N`` folder by step."""
    found = sorted((p for p in root.glob(f"{PREFIX}*") if p.is_dir() and NAME.fullmatch(p.name)), reverse=True)
    pointer = root / "latest"
    try:
        named = pointer.read_text(encoding="utf-8").strip() if pointer.is_file() else ""
    except (OSError, UnicodeDecodeError):
        named = ""
    if NAME.fullmatch(named) and (root / named).is_dir():  # never a path: "../other" is ignored
        found = [root / named, *(p for p in found if p.name != named)]
    return found


def latest_checkpoint(root: str | Path) -> Path | None:
    """The newest checkpoint folder with a ``state.pt`` (not checked further: see ``load_latest_checkpoint``)."""
    return next((p for p in _candidates(Path(root)) if (p / "state.pt").is_file()), None)


def _check_model_files(folder: Path) -> None:
    weights = sorted(folder.glob("*.safetensors"))
    described = (folder / "config.json").is_file() or (folder / "adapter_config.json").is_file()  # LoRA
    if not described or not weights:
        raise CheckpointError(f"{folder} has no config.json or no *.safetensors weights")
    from safetensors import safe_open

    for path in weights:
        try:
            # Opening checks the header against the file's size, so a truncated file fails here
            # without reading the weights (the model is loaded right after).
            with safe_open(str(path), framework="pt") as handle:
                handle.keys()
        except Exception as exc:  # safetensors raises its own error types for damaged files
            raise CheckpointError(f"{path} is damaged ({type(exc).__name__}: {exc})") from None


def load_checkpoint_state(path: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(torch state incl. ``rng``, JSON info incl. ``step``) of one checkpoint folder, every file
    checked; ``CheckpointError`` names the damaged one. Never unpickles code (``weights_only``)."""
    path = Path(path)
    try:
        with warnings.catch_warnings():
            # A damaged file makes torch's weights-only unpickler warn before it fails; the error
            # below says it in one line, so the warning would only put a second line before it.
            warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\._weights_only_unpickler")
            state = torch.load(path / "state.pt", map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises UnpicklingError, RuntimeError, EOFError... for bad files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{path / 'state.pt'} cannot be loaded safely ({first})") from None
    try:
        info = json.loads((path / "trainer_state.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(f"{path / 'trainer_state.json'} is unreadable ({exc})") from None
    if not isinstance(state, dict) or "rng" not in state or not isinstance(info, dict):
        raise CheckpointError(f"{path} does not hold a training state (state.pt or trainer_state.json malformed)")
    if not isinstance(info.get("step"), int) or info["step"] < 0:
        raise CheckpointError(f"{path / 'trainer_state.json'} has no valid step")
    _check_model_files(path / "model")
    return state, info


def load_latest_checkpoint(root: str | Path) -> tuple[Path, dict[str, Any], dict[str, Any]] | None:
    """(folder, state, info) of the newest intact checkpoint under ``root``; None when there is
    none at all. A damaged newer one is skipped with a warning on stderr; ``CheckpointError`` when
    every one is damaged."""
    problems = []
    for folder in _candidates(Path(root)):
        try:
            state, info = load_checkpoint_state(folder)
        except CheckpointError as exc:
            problems.append(str(exc))
            continue
        for problem in problems:
            print(f"warning: skipping a damaged checkpoint: {problem}; resuming from {folder.name}", file=sys.stderr)
        return folder, state, info
    if problems:
        raise CheckpointError(f"no intact checkpoint under {root}: {problems[0]}")
    return None


def checkpoints_in(folder: str | Path) -> list[Path]:
    """The checkpoint folders a run folder, its ``checkpoints/`` or a checkpoint itself holds,
    newest first (the files are not checked)."""
    folder = Path(folder)
    if (folder / "state.pt").is_file() and NAME.fullmatch(folder.name):
        return [folder]
    root = folder / "checkpoints" if (folder / "checkpoints").is_dir() else folder
    return [p for p in _candidates(root) if (p / "state.pt").is_file()]


def checkpoint_hint(folder: str | Path) -> str:
    """What ``folder`` (not a model folder itself) holds and which folder to use instead, for
    one-line errors: its checkpoints newest first, or that it holds none."""
    folder = Path(folder)
    found = checkpoints_in(folder)
    sft = folder / "sft"
    if found:
        shown = ", ".join(p.name for p in found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
        model = found[0] / "model"
        lora = (model / "adapter_config.json").is_file() and not (model / "config.json").is_file()
        use = f"slca export {found[0]} --out DIR, then use DIR" if lora else f"use {model}"
        return f"its checkpoints are {shown} (newest first): {use}"
    if (folder / "adapter_config.json").is_file():
        return f"it holds LoRA adapters: merge them with slca export {folder} --out DIR, then use DIR"
    if (sft / "config.json").is_file():
        return f"it holds no RL checkpoint; its SFT model is {sft}"
    return "it holds no checkpoints (a run writes them under RUN/checkpoints/step-N/model)"


def find_checkpoint(source: str | Path) -> Path:
    """The checkpoint ``source`` names: a run folder or its ``checkpoints/`` give the newest one,
    a ``step-N`` folder or its ``model/`` themselves. ``CheckpointError`` when there is none."""
    source = Path(source)
    if not source.is_dir():
        raise CheckpointError(f"{source} is not a folder: give a run folder or one of its checkpoints")
    if source.name == "model" and NAME.fullmatch(source.parent.name):
        return source.parent
    if NAME.fullmatch(source.name) or (source / "adapter_config.json").is_file():
        return source
    found = checkpoints_in(source)
    if (source / "checkpoints").is_dir() or source.name == "checkpoints" or found:
        if not found:
            raise CheckpointError(f"{source} holds no checkpoints yet (its run has not saved one)")
        return found[0]
    return source
