"""A study's BFCL scores: the start and every final model on BFCL categories, scored by bfcl-eval's checkers.

Where a study's budget names categories (``StudyBudget.bfcl``), the SFT checkpoint is scored once
into ``OUT/start/bfcl/`` and every finished run's last checkpoint into ``<run>/bfcl/``, greedy, in
the precision the runs evaluate in. Each scoring is written whole or not at all (into a temporary
folder renamed into place), so a study stopped mid-way scores that model again when it resumes.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from slca_grpo.eval.bfcl.runner import run_bfcl
from slca_grpo.eval.policies import resolve_model_agent
from slca_grpo.models.checkpoint import latest_checkpoint
from slca_grpo.models.lora import export_merged
from slca_grpo.study.outcomes import BFCL_FOLDER, read_bfcl

MAX_NEW_TOKENS = 256  # per assistant step: a call with its arguments, or a short answer
BATCH_SIZE = 16


def bfcl_categories(text: str) -> list[str]:
    """``"simple_python,multiple"`` → the category names (empty: no BFCL scoring)."""
    return [name.strip() for name in text.split(",") if name.strip()]


def final_model(run: Path) -> Path:
    """The model folder of a finished run's last checkpoint (FileNotFoundError when it has none)."""
    checkpoint = latest_checkpoint(run / "checkpoints")
    if checkpoint is None or not (checkpoint / "model").is_dir():
        raise FileNotFoundError(f"{run} holds no checkpoint with a model to score on BFCL")
    return checkpoint / "model"


def score_on_bfcl(
    model: Path, folder: Path, categories: list[str], limit: int | None, *, scratch: Path, **agent_options: Any
) -> float:
    """Score the model in ``model`` on BFCL into ``folder/bfcl`` unless a summary is there (a damaged
    one is replaced); seconds spent.

    ``scratch``: a folder outside every run, emptied first, where the report is written before it
    is moved into place and LoRA adapters are merged (BFCL's agent loads a whole model).
    ``agent_options``: the local model agent's (``bf16``, ``chat_format``, ``chat_template``)."""
    if read_bfcl(folder) is not None:
        return 0.0
    target = folder / BFCL_FOLDER
    started = time.perf_counter()
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        source = model
        if (model / "adapter_config.json").is_file() and not (model / "config.json").is_file():
            source = export_merged(model, scratch / "merged")
        agent = resolve_model_agent(
            f"hf:{source}", max_new_tokens=MAX_NEW_TOKENS, batch_size=BATCH_SIZE, **agent_options
        )
        run_bfcl(agent, categories, limit, out_dir=scratch / "report", batch_size=BATCH_SIZE, progress=False)
        shutil.rmtree(target, ignore_errors=True)
        folder.mkdir(parents=True, exist_ok=True)
        (scratch / "report").rename(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return time.perf_counter() - started
