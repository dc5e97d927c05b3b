"""Attention for training passes on a CPU: float32 under bf16 autocast, and no mask for a
right-padded batch.

Under bf16 autocast, SDPA runs in bfloat16. PyTorch's CPU flash attention is no faster in
bfloat16 than in float32 at our shapes, and its backward is slower (one SmolLM2 layer, 4 rollouts
× 9 heads, 175 queries over 725 keys, 2-core EPYC with avx512_bf16: backward 45 ms in bfloat16,
32 ms in float32; forward 13 ms either way). :func:`training_attention` runs it in float32 there:
the matrix products around it stay bfloat16, the attention's numbers become float32's.

A padded batch hands SDPA a mask, and with a mask the CPU flash kernel computes every query-key
block, where a causal pass without one skips the upper triangle: four SmolLM2 rows of 850 tokens,
one layer, forward + backward 210 ms with the mask, 149 ms causal (the 2-core EPYC above). Four
SFT examples spent 39 % of a step in attention with masks. :func:`unmasked_padding_attention`
recognises the masks of right-padded causal batches (SFT examples, rollouts trained without a
shared prompt) and runs them causal without one.

Where a mask stays, :func:`masked_sdpa` takes two more shortcuts on a CPU. A left-padded causal
batch (the distinct prompts of a prefill, rollouts' or training's) runs row by row, each causal
without its padding, so the kernel skips the blocks above the diagonal and the padding: one SmolLM2
layer, prompts of 650/560/470/380 tokens, forward 34 → 19.5 ms in bfloat16. And ``transformers``
copies a grouped model's keys and values once per query head before a masked SDPA (its kernels on
CUDA need that); PyTorch's CPU flash kernel reads the groups as they are (``enable_gqa``): one
SmolLM2 layer (4 rows × 9 heads over 3 key/value heads, 175 queries over 725 keys, masked), forward
+ backward 34.5 → 27.9 ms, the output bit-identical and the key/value gradients equal to rounding
(2-core EPYC, Zen 5).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from slca_grpo.models.device import model_device

TRAINING_ATTENTION = "slca_sdpa_training"
# Dropping the mask, or the copies of grouped keys and values, changes the rounding of attention
# (not its math): models narrower than this keep transformers' way, so the reader's quick-demo
# table (a 64-wide model) stays as documented.
UNMASKED_PADDING_MIN_HIDDEN = 512

_last_checked: dict[Callable, tuple[torch.Tensor, Any]] = {}


def right_padded_causal(mask: torch.Tensor) -> bool:
    """Whether ``mask`` ([B, 1, Q, Q] bool, True = attend) is a right-padded causal batch's: in
    row b, each of the first n_b queries attends to keys [0, i]; the queries after them do not
    see their own key (padding: nothing reads them, whatever they attend to)."""
    if mask.dtype != torch.bool or mask.dim() != 4 or mask.shape[1] != 1 or mask.shape[-1] != mask.shape[-2]:
        return False
    rows = mask[:, 0]
    index = torch.arange(rows.shape[-1], device=mask.device)
    valid = rows[:, index, index]  # [B, Q]: a query sees its own key
    if not torch.equal(valid, index < valid.sum(dim=1, keepdim=True)):
        return False  # some row's valid queries are not its first ones
    causal = index[None, :] <= index[:, None]  # [Q, K]
    return bool(((rows == causal) | ~valid[:, :, None]).all())


def left_padded_causal(mask: torch.Tensor) -> list[int] | None:
    """Each row's padding when ``mask`` ([B, 1, Q, Q] bool, True = attend) is a left-padded causal
    batch's, else None: in row b, each query i >= p_b attends to keys [p_b, i]; the queries before
    p_b do not see their own key (padding: nothing reads them, whatever they attend to)."""
    if mask.dtype != torch.bool or mask.dim() != 4 or mask.shape[1] != 1 or mask.shape[-1] != mask.shape[-2]:
        return None
    rows = mask[:, 0]
    index = torch.arange(rows.shape[-1], device=mask.device)
    valid = rows[:, index, index]  # [B, Q]: a query sees its own key
    pads = rows.shape[-1] - valid.sum(dim=1, keepdim=True)
    if not torch.equal(valid, index >= pads):
        return None  # some row's valid queries are not its last ones
    expected = (index[None, :] <= index[:, None]) & (index[None, None, :] >= pads[:, :, None])  # [B, Q, K]
    if not bool(((rows == expected) | ~valid[:, :, None]).all()):
        return None
    return pads[:, 0].tolist()


def _once(check: Callable[[torch.Tensor], Any], mask: torch.Tensor) -> Any:
    """``check(mask)``, once per mask: every layer of a forward pass gets the same one."""
    checked = _last_checked.get(check)
    if checked is not None and checked[0] is mask:
        return checked[1]
    found = check(mask)
    _last_checked[check] = (mask, found)
    return found


def unmasked_padding_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    *args: Any,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """``transformers``' SDPA attention; on a CPU, a right-padded causal batch
    (:func:`right_padded_causal`) runs causal without its mask: a row's valid query i sees keys
    [0, i] either way, and the kernel skips the blocks above the diagonal."""
    if _cpu_shortcuts(module, query, attention_mask) and _once(right_padded_causal, attention_mask):
        attention_mask = None
    return masked_sdpa(module, query, key, value, attention_mask, *args, **kwargs)


def masked_sdpa(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """``transformers``' SDPA attention, except for a masked pass on a CPU: a left-padded causal
    batch (:func:`left_padded_causal`) runs row by row, causal without padding or mask, and a
    grouped-query model's keys and values go to the kernel uncopied (``enable_gqa``)."""
    # A pass without a mask stays transformers' (it passes enable_gqa itself then).
    if _cpu_shortcuts(module, query, attention_mask) and not kwargs.get("output_attentions"):
        grouped = getattr(module, "num_key_value_groups", 1) > 1
        pads = _once(left_padded_causal, attention_mask) if query.shape[-2] == key.shape[-2] > 1 else None
        if pads is not None:
            return _causal_rows(query, key, value, pads, dropout, scaling, grouped), None
        if grouped:  # with a mask transformers runs SDPA non-causal (the mask says it all), as here
            out = torch.nn.functional.scaled_dot_product_attention(
                query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, enable_gqa=True
            )
            return out.transpose(1, 2).contiguous(), None
    return sdpa_attention_forward(
        module, query, key, value, attention_mask, dropout, scaling, is_causal=is_causal, **kwargs
    )


def _cpu_shortcuts(module: torch.nn.Module, query: torch.Tensor, attention_mask: torch.Tensor | None) -> bool:
    """Whether a masked pass may take this module's CPU shortcuts: on a CPU, in a model at least
    ``UNMASKED_PADDING_MIN_HIDDEN`` wide."""
    return (
        attention_mask is not None
        and query.device.type == "cpu"
        and getattr(getattr(module, "config", None), "hidden_size", 0) >= UNMASKED_PADDING_MIN_HIDDEN
    )


def _causal_rows(query, key, value, pads: list[int], dropout: float, scaling: float | None, grouped: bool):
    """Attention of each row's queries after its padding, causal over its keys after the padding;
    zeros at the padding queries (nothing reads them). [B, Q, heads, D]."""
    rows = []
    for row, pad in enumerate(pads):
        out = torch.nn.functional.scaled_dot_product_attention(
            query[row : row + 1, :, pad:],
            key[row : row + 1, :, pad:],
            value[row : row + 1, :, pad:],
            dropout_p=dropout,
            scale=scaling,
            is_causal=True,
            enable_gqa=grouped,
        )[0].transpose(0, 1)  # [Q - pad, heads, D]
        if pad:  # (a row of padding alone gets zeros throughout)
            out = torch.cat([out.new_zeros((pad, *out.shape[1:])), out])
        rows.append(out)
    return torch.stack(rows)


def training_sdpa(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    *args: Any,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`unmasked_padding_attention`, in float32 while CPU autocast is on."""
    if query.device.type != "cpu" or not torch.is_autocast_enabled("cpu"):
        return unmasked_padding_attention(module, query, key, value, attention_mask, *args, **kwargs)
    with torch.autocast("cpu", enabled=False):
        return unmasked_padding_attention(
            module, query.float(), key.float(), value.float(), attention_mask, *args, **kwargs
        )


AttentionInterface.register(TRAINING_ATTENTION, training_sdpa)
AttentionMaskInterface.register(TRAINING_ATTENTION, sdpa_mask)


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


def attends_to_every_token(config: Any) -> bool:
    """Whether every layer of a model with this config attends to all earlier tokens with its own
    keys and values: no sliding window, no other layer types, no keys and values shared between
    layers. Both the sampler's cache and packed training passes need that."""
    if config is None or not hasattr(config, "get_text_config"):
        return False
    text = config.get_text_config(decoder=True)
    if getattr(text, "sliding_window", None) and getattr(text, "use_sliding_window", True):
        return False
    layer_types = getattr(text, "layer_types", None) or ["full_attention"]
    return all(kind == "full_attention" for kind in layer_types) and not hasattr(text, "num_kv_shared_layers")


def training_attention(model: torch.nn.Module) -> AbstractContextManager[bool]:
    """Within the block, a model on ``transformers``' SDPA attention on a CPU uses
    :func:`training_sdpa` (float32 under bf16 autocast, right padding without a mask); a model
    elsewhere is left alone."""
    return attention_implementation(model, TRAINING_ATTENTION, when=model_device(model).type == "cpu")


# Architectures whose logits are exactly ``lm_head(final hidden state)`` (no soft-capping or
# scaling), so the head can be applied to selected positions only.
PLAIN_HEAD_MODEL_TYPES = frozenset({"llama", "qwen2", "qwen3", "mistral"})


def plain_head(model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module] | None:
    """(decoder, head) of a model whose logits are ``head(decoder(...).last_hidden_state)``, else None."""
    if hasattr(model, "get_base_model"):  # a peft (LoRA) model: its adapters live inside these modules
        model = model.get_base_model()
    config = getattr(model, "config", None)
    if getattr(config, "model_type", None) not in PLAIN_HEAD_MODEL_TYPES:
        return None
    if getattr(config, "final_logit_softcapping", None) or getattr(config, "logit_scale", None):
        return None
    decoder, head = getattr(model, "model", None), getattr(model, "lm_head", None)
    if not isinstance(decoder, torch.nn.Module) or not isinstance(head, torch.nn.Linear):
        return None
    return decoder, head
