"""What a run folder must be before a process writes it: held by that process alone, named by a
usable ``model.name``, and — on resume — continued with the settings it was started with.

A process that writes a run (or study) folder holds an advisory lock on ``FOLDER/.lock``
(``fcntl.flock``): the operating system releases it when the process ends, however it ends, so a
lock file left behind by a dead process never blocks; a second writer gets one line naming the
holder instead of interleaving its writes with the first one's.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from slca_grpo.config import ConfigError, load_yaml_config
from slca_grpo.models import HUB_ID, PRESETS, READER, looks_like_path
from slca_grpo.models.checkpoint import checkpoint_hint, latest_checkpoint
from slca_grpo.plugins import load_plugins
from slca_grpo.trainer.run_config import RunConfig, run_settings

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks, folders are not guarded
    fcntl = None

LOCK_FILE = ".lock"

# Settings a resumed run may change: where it is, how progress is shown or mirrored, how often
# checkpoints are kept and whether freed host memory is kept for reuse. None of them changes what
# the run computes. ``train.plugins`` is the run's record of the plugins it loaded, which a resume
# loads again (``resume_config``).
RESUME_MAY_DIFFER = (
    "train.out_dir",
    "train.progress",
    "train.plugins",
    "train.tensorboard",
    "train.wandb",
    "train.wandb_project",
    "train.save_every",
    "train.keep_last",
    "train.keep_freed_memory",
)


class RunFolderTaken(ValueError):
    """An output folder that cannot be written: a file, a checkpoint, or another run (one line)."""


def run_work(folder: Path) -> list[str]:
    """What a run (training, pretraining, an evaluation) has done in ``folder``: its summary, a
    checkpoint, logged metrics, a model, a report. The settings files a run writes at its start (``config.yaml``,
    ``provenance.json``) are not work: a start that failed before any step (a bad data file, say)
    may be run again as it is."""
    done = []
    if (folder / "summary.json").exists():
        done.append("summary.json")
    if any((folder / "checkpoints").glob("step-*")):
        done.append("checkpoints")
    for log in ("metrics.jsonl", "sft_metrics.jsonl"):
        if (folder / log).is_file() and (folder / log).stat().st_size > 0:
            done.append(log)
    for made in ("model", "sft"):
        if (folder / made).is_dir():
            done.append(f"{made}/")
    for report in ("report.md", "report.json"):  # an evaluation's or a report's
        if (folder / report).is_file():
            done.append(report)
    return done


def check_out_folder(folder: str | Path, *, flag: str, resume: bool, force: bool, can_resume: bool = True) -> None:
    """Before any work: refuse ``folder`` when it is a file, lies inside a run's checkpoint, or
    holds a run's work and neither ``resume`` (continue it) nor ``force`` (replace it) was asked for.
    ``can_resume``: whether the command has a ``--resume`` to name (the demo has not)."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise RunFolderTaken(f"{flag} {folder} is a file, not a folder")
    for part in (folder, *folder.resolve().parents):
        if part.parent.name == "checkpoints" and part.name.startswith("step-"):
            raise RunFolderTaken(f"{flag} {folder} is inside the checkpoint {part}; write a run elsewhere")
    if folder.is_dir() and not resume and not force:
        done = run_work(folder)
        if done:
            choices = (
                "add --resume to continue it, --force to replace it" if can_resume else "add --force to replace it"
            )
            raise RunFolderTaken(
                f"{flag} {folder} already holds a run ({', '.join(done)}); {choices}, or use another folder"
            )


class RunFolderBusy(OSError):
    """Another process is writing this folder (one line naming it)."""


@contextmanager
def hold_run_folder(folder: str | Path, purpose: str, *, next_step: str = "use another folder") -> Iterator[Path]:
    """Create ``folder`` if needed and hold its lock while the block runs; ``RunFolderBusy``
    naming the holder (pid, what it is doing, since when) when another process holds it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if fcntl is None:  # pragma: no cover
        yield folder
        return
    with open(folder / LOCK_FILE, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = " ".join(handle.read().split()) or "another process"
            raise RunFolderBusy(f"{folder} is being written by {holder}; wait until it ends, or {next_step}") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} ({purpose}, started {time.strftime('%Y-%m-%d %H:%M:%S')})\n")
        handle.flush()
        yield folder  # closing the file releases the lock


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        return {prefix.rstrip("."): data}
    flat: dict[str, Any] = {}
    for key, value in data.items():
        flat.update(_flatten(value, f"{prefix}{key}."))
    return flat


def settings_difference(
    saved_yaml: Path, config: RunConfig, *, ignore: Iterable[str] = RESUME_MAY_DIFFER
) -> str | None:
    """The first setting (a dotted key) that differs between a run's saved ``config.yaml`` and
    ``config`` (None when they agree, the ``ignore`` keys aside). The saved file goes through the
    config loader, so a key it predates counts as its default."""
    ignored = set(ignore)
    saved = _flatten(run_settings(load_yaml_config(RunConfig, saved_yaml)))
    wanted = _flatten(run_settings(config))
    for key in sorted(set(saved) | set(wanted)):
        if key not in ignored and saved.get(key) != wanted.get(key):
            return f"{key}: {saved.get(key)!r} there, {wanted.get(key)!r} now"
    return None


def recorded_plugins(saved_yaml: Path) -> list[str]:
    """The ``train.plugins`` a run's ``config.yaml`` records ([] when it records none)."""
    try:
        data = yaml.safe_load(saved_yaml.read_text(encoding="utf-8"))
        plugins = data["train"]["plugins"]
    except (OSError, UnicodeDecodeError, yaml.YAMLError, KeyError, TypeError):
        return []
    return [p for p in plugins if isinstance(p, str)] if isinstance(plugins, list) else []


def checkpoint_step(folder: Path) -> int:
    """The RL step a checkpoint folder (``step-000009``) was written after."""
    return int(folder.name.rsplit("-", 1)[1])


def resume_config(config: RunConfig, out_dir: Path, *, may_differ: Iterable[str] = ()) -> RunConfig:
    """Check ``config`` can continue the run in ``out_dir``: load the plugins the run recorded, and
    refuse a setting that differs from its ``config.yaml`` (the optimizer state would keep the old
    one while ``config.yaml`` said the new), ``rl.steps`` aside where :func:`check_steps_change`
    allows it. Nothing to check while the run has no checkpoint."""
    saved = out_dir / "config.yaml"
    checkpoint = latest_checkpoint(out_dir / "checkpoints")
    if not saved.is_file() or checkpoint is None:
        return config
    load_plugins(recorded_plugins(saved))
    difference = settings_difference(saved, config, ignore=(*RESUME_MAY_DIFFER, *may_differ, "rl.steps"))
    if difference:
        raise ConfigError(
            f"{out_dir} was started with other settings ({difference}); --resume continues a run as it was "
            "started: drop the change, or start a new run in another train.out_dir"
        )
    started_with = load_yaml_config(RunConfig, saved).rl.steps
    check_steps_change(out_dir, started_with, checkpoint_step(checkpoint) + 1, config)
    return config


def check_steps_change(out_dir: Path, started_with: int, done: int, config: RunConfig) -> None:
    """A resumed run may stop later (or sooner) than it was started to, when that changes none of
    its steps: never below the steps it has done, and only on a constant learning rate without
    warm-up, since a decaying schedule or a warm-up spans ``rl.steps`` (the steps already taken
    followed the old one). Anything else is a ``ConfigError`` saying so."""
    wanted = config.rl.steps
    if wanted == started_with:
        return
    if wanted < done:
        raise ConfigError(
            f"rl.steps: {out_dir} has done {done} steps, so rl.steps={wanted} would undo some (ask for {done} or more)"
        )
    if config.rl.schedule != "constant" or config.rl.warmup_ratio > 0:
        raise ConfigError(
            f"rl.steps: {started_with} there, {wanted} now; a run's steps change only with rl.schedule: constant and "
            f"rl.warmup_ratio: 0 (its {config.rl.schedule} schedule spans rl.steps, so the steps it has taken followed "
            "another one): start a new run in another train.out_dir"
        )


def check_model_name(name: str) -> None:
    """ConfigError naming ``model.name`` when it is no model this run could load: not a preset,
    not a checkpoint folder here, nor a Hugging Face id. Checked before a run creates anything; a
    Hub id is looked up when the model loads."""
    known = ", ".join([*PRESETS, "smollm2", READER])
    if name in PRESETS or name in ("smollm2", READER):
        return
    folder = Path(name).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise ConfigError(
                f"model.name: {name} is not a checkpoint folder (no config.json); {checkpoint_hint(folder)}"
            )
        return
    if folder.exists():
        raise ConfigError(f"model.name: {name} is a file, not a checkpoint folder")
    if HUB_ID.fullmatch(name) and not looks_like_path(name):
        return
    what = f"the folder {name} does not exist" if looks_like_path(name) else f"unknown model {name!r}"
    raise ConfigError(
        f"model.name: {what}; give one of {known}, a checkpoint folder (a run's are RUN/checkpoints/step-N/model) "
        "or a Hugging Face id (org/name)"
    )
