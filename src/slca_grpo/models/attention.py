"""Float32 attention for the training passes that run under bf16 autocast on a CPU.

Under bf16 autocast, SDPA runs in bfloat16. PyTorch's CPU flash attention is no faster in
bfloat16 than in float32 at our shapes, and its backward is slower (one SmolLM2 layer, 4 rollouts
× 9 heads, 175 queries over 725 keys, 2-core EPYC with avx512_bf16: backward 45 ms in bfloat16,
32 ms in float32; forward 13 ms either way). :func:`float32_attention` runs it in float32 there:
the matrix products around it stay bfloat16, the attention's numbers become float32's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from slca_grpo.models.device import model_device

FLOAT32_ATTENTION = "slca_sdpa_float32"


def float32_sdpa(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    *args: Any,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``transformers``' SDPA attention, in float32 while CPU autocast is on."""
    if query.device.type != "cpu" or not torch.is_autocast_enabled("cpu"):
        return sdpa_attention_forward(module, query, key, value, attention_mask, *args, **kwargs)
    with torch.autocast("cpu", enabled=False):
        return sdpa_attention_forward(
            module, query.float(), key.float(), value.float(), attention_mask, *args, **kwargs
        )


AttentionInterface.register(FLOAT32_ATTENTION, float32_sdpa)
AttentionMaskInterface.register(FLOAT32_ATTENTION, sdpa_mask)


@contextmanager
def attention_implementation(model: torch.nn.Module, name: str, *, when: bool = True) -> Iterator[bool]:
    """Within the block, a model on ``transformers``' SDPA attention uses the registered attention
    ``name`` instead (if ``when``); SDPA again after it, also on error. Yields whether it switched."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = getattr(base, "config", None)
    switch = (
        when and getattr(config, "_attn_implementation", None) == "sdpa" and hasattr(base, "set_attn_implementation")
    )
    if switch:
        base.set_attn_implementation(name)
    try:
        yield switch
    finally:
        if switch:
            base.set_attn_implementation("sdpa")


def float32_attention(model: torch.nn.Module) -> AbstractContextManager[bool]:
    """Within the block, a model on ``transformers``' SDPA attention computes attention in float32
    if bf16 autocast is on for the CPU and the model is there (and is left alone otherwise)."""
    bf16_on_cpu = (
        torch.is_autocast_enabled("cpu")
        and torch.get_autocast_dtype("cpu") == torch.bfloat16
        and model_device(model).type == "cpu"
    )
    return attention_implementation(model, FLOAT32_ATTENTION, when=bf16_on_cpu)
