import copy
import os
import sys
from pathlib import Path
from typing import NamedTuple

# Test helpers (fake servers, scripted models and rollouts, shared tool schemas) live beside the tests;
# test modules import them, never one another.
sys.path.insert(0, str(Path(__file__).parent))

# The suite runs on two worker processes (pyproject.toml: -n 2). Each gives PyTorch, the C kernels
# and the commands it starts one thread, unless the environment names a count: two processes of two
# threads on two cores would spin waiting for cores the other holds. Read when torch loads, so set
# here, before any test module imports it. (tests/test_native_threads.py runs the C kernels on
# several thread counts.)
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _kernels_built_in_a_session_folder(tmp_path_factory):
    """The C kernels (engine/native.py) build into this session's folder, not the user's cache;
    subprocesses (CLI runs) inherit it."""
    import os

    os.environ["SLCA_GRPO_CACHE"] = str(tmp_path_factory.getbasetemp() / "slca-cache")


@pytest.fixture(autouse=True)
def _float32_unless_asked(monkeypatch):
    """``bf16: auto`` (the default) is float32 in tests on every machine, so results do not depend on
    whether this CPU has native bfloat16; tests of ``auto`` itself patch the probe back."""
    from slca_grpo.models import device

    monkeypatch.setattr(device, "cpu_has_native_bf16", lambda: False)


@pytest.fixture(scope="session")
def _smollm2_once():
    """``load_model("smollm2")`` once per session: reading the GGUF file (tokenizer and de-quantised
    weights) takes ~25 s, and several tests need the same untouched model."""
    from slca_grpo.models import load_model

    return load_model("smollm2")


def _fingerprint(model, tokenizer) -> tuple:
    """What a test could change: the parameters (any in-place write bumps a tensor's version
    counter; a swapped or added one changes the names or storage), the mode, the tokenizer's settings."""
    weights = tuple(
        (name, p.data_ptr(), p._version, p.dtype, tuple(p.shape), p.requires_grad)
        for name, p in model.named_parameters()
    )
    settings = (model.training, tokenizer.chat_template, tokenizer.padding_side, tokenizer.pad_token_id, len(tokenizer))
    config = {k: v for k, v in model.config.to_dict().items() if k != "architectures"}  # save_pretrained sets it
    return weights, settings, config, model.generation_config.to_dict()


@pytest.fixture
def smollm2(_smollm2_once):
    """(model, tokenizer) of SmolLM2-135M-Instruct as ``load_model("smollm2")`` gives them, shared by
    every test that asks: a test may only read them (generate, score, save). Changing them (training,
    adapters, a new template) would make later tests depend on the order they run in, so this
    fixture fails the test that does; such a test takes ``smollm2_copy`` instead."""
    model, tokenizer = _smollm2_once
    before = _fingerprint(model, tokenizer)
    yield model, tokenizer
    assert _fingerprint(model, tokenizer) == before, "a test changed the shared SmolLM2; use smollm2_copy"


@pytest.fixture
def smollm2_copy(_smollm2_once):
    """A private deep copy of the shared SmolLM2 (model, tokenizer), for a test that trains or wraps it."""
    return copy.deepcopy(_smollm2_once)


class SdpaCall(NamedTuple):
    mask: object  # the mask it was handed (None: causal without one)
    dtype: object  # the dtype it computed in (autocast casts the inputs below this Python call)
    key_heads: int  # key/value heads handed over (fewer than the query's: grouped, not copied)


@pytest.fixture
def sdpa_calls(monkeypatch) -> list:
    """Every ``scaled_dot_product_attention`` call from here on, as an :class:`SdpaCall`."""
    import torch

    seen = []
    real = torch.nn.functional.scaled_dot_product_attention

    def spy(query, key, *args, **kwargs):
        out = real(query, key, *args, **kwargs)
        seen.append(SdpaCall(kwargs.get("attn_mask"), out.dtype, key.shape[-3]))
        return out

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    return seen
