"""A KV cache that appends in place, and attention for one decoded token that needs no copy of it.

``transformers``' ``DynamicCache`` concatenates every layer's keys and values with each new token,
so a decode step copies the whole cache; with grouped-query attention and a padding mask, SDPA is
then given keys repeated once per query head, a second copy. On a CPU both copies cost more than
the step's arithmetic (a 4-layer model, 48 rollouts, 1,000 cached tokens: ~200 MB per token).
:class:`GrowingLayer` keeps each layer's keys and values in a buffer with room to spare and hands
attention a view (under bf16 autocast, keys are stored in bfloat16, as attention would cast them
every step); :func:`grouped_decode_attention` folds the query heads of a group into the query
length for a one-token query, so the keys are read once, never expanded, and in bfloat16 computes
it as two products around a float32 softmax, as ``transformers``' eager attention does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from transformers import AttentionInterface
from transformers.cache_utils import DynamicCache, DynamicLayer
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

ATTENTION_NAME = "slca_sdpa"


class GrowingLayer(DynamicLayer):
    """A cache layer whose keys and values live in a buffer that grows by half when full."""

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self._key_buffer = self._value_buffer = None
        self._length = 0

    def _reserve(self, needed: int, like_keys: torch.Tensor, like_values: torch.Tensor) -> None:
        buffer = self._key_buffer
        if buffer is not None and needed <= buffer.shape[-2] and buffer.shape[0] == like_keys.shape[0]:
            return
        capacity = needed + max(64, needed // 2)
        keys = like_keys.new_empty((*like_keys.shape[:-2], capacity, like_keys.shape[-1]))
        values = like_values.new_empty((*like_values.shape[:-2], capacity, like_values.shape[-1]))
        if self._length:
            keys[..., : self._length, :] = self._key_buffer[..., : self._length, :]
            values[..., : self._length, :] = self._value_buffer[..., : self._length, :]
        self._key_buffer, self._value_buffer = keys, values

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any):
        key_states = autocast_keys(key_states, value_states)
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self._length + key_states.shape[-2]
        self._reserve(end, key_states, value_states)
        self._key_buffer[..., self._length : end, :] = key_states
        self._value_buffer[..., self._length : end, :] = value_states
        self._length = end
        self.keys = self._key_buffer[..., :end, :]
        self.values = self._value_buffer[..., :end, :]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self._length if self.is_initialized else 0

    def crop(self, max_length: int) -> None:
        if max_length < 0:
            max_length = self._length - abs(max_length)
        if self.is_initialized and max_length < self._length:
            self._length = max_length
            self.keys = self._key_buffer[..., :max_length, :]
            self.values = self._value_buffer[..., :max_length, :]

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.get_seq_length() > 0:
            self._key_buffer = self._key_buffer[indices]
            self._value_buffer = self._value_buffer[indices]
            self.keys = self._key_buffer[..., : self._length, :]
            self.values = self._value_buffer[..., : self._length, :]

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.get_seq_length() > 0:
            self._key_buffer = self._key_buffer.repeat_interleave(repeats, dim=0)
            self._value_buffer = self._value_buffer.repeat_interleave(repeats, dim=0)
            self.keys = self._key_buffer[..., : self._length, :]
            self.values = self._value_buffer[..., : self._length, :]


def autocast_keys(keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Keys in the autocast dtype their attention will cast them to anyway.

    Under bf16 autocast, rotary embeddings hand back float32 keys beside bfloat16 values, and
    SDPA (a lower-precision op under autocast) casts the whole cached key tensor to bfloat16 at
    every layer of every decode step. Storing the keys cast once gives SDPA the same bfloat16
    values (the same rounding), so the same outputs, without re-reading float32 keys each step."""
    device = keys.device.type
    if (
        keys.dtype == torch.float32
        and values.dtype != torch.float32
        and torch.is_autocast_enabled(device)
        and torch.get_autocast_dtype(device) == values.dtype
    ):
        return keys.to(values.dtype)
    return keys


def growing_cache(model: torch.nn.Module) -> DynamicCache | None:
    """An empty cache of :class:`GrowingLayer` for a model whose layers all attend to everything;
    None otherwise (sliding-window or shared-KV models keep ``transformers``' own cache)."""
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "get_text_config"):
        return None
    text = config.get_text_config(decoder=True)
    layer_types = getattr(text, "layer_types", None) or ["full_attention"]
    if getattr(text, "sliding_window", None) and getattr(text, "use_sliding_window", True):
        return None
    if any(kind != "full_attention" for kind in layer_types) or hasattr(text, "num_kv_shared_layers"):
        return None
    cache = DynamicCache()
    cache.layer_class_to_replicate = GrowingLayer
    return cache


def grouped_decode_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """SDPA, except for a one-token query: there the query heads of a key/value group become the
    query length, so each key/value head is read once instead of copied per query head; in bfloat16
    the attention is then two matrix products around a float32 softmax (the numerics of
    ``transformers``' eager attention), as SDPA's CPU kernel runs a query of a few rows over a long
    cache ~1.4x slower on a 2-core EPYC."""
    batch, heads, length, dim = query.shape
    groups = heads // key.shape[1]
    if length != 1 or dropout or kwargs.get("output_attentions"):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    folded = query.view(batch, heads // groups, groups, dim)  # [B, kv heads, group, D]
    mask = attention_mask
    if mask is not None:
        mask = mask[:, :, :, : key.shape[-2]]  # [B, 1, 1, L]: the same for every query of a group
    if value.dtype == torch.float32:
        out = torch.nn.functional.scaled_dot_product_attention(folded, key, value, attn_mask=mask, scale=scaling)
    else:
        scale = dim**-0.5 if scaling is None else scaling
        # keys @ queryᵀ, not query @ keysᵀ: the cache is a strided view of a larger buffer, which a
        # reduced-precision batched product reads fast only untransposed.
        keys, folded = key.to(value.dtype), folded.to(value.dtype)
        scores = torch.matmul(keys, folded.transpose(-1, -2)).transpose(-1, -2).float() * scale
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
        out = torch.matmul(torch.softmax(scores, dim=-1).to(value.dtype), value)
    # [B, kv heads, group, D] -> [B, 1, heads, D], the layout transformers' attention returns.
    return out.reshape(batch, heads, dim)[:, None], None


AttentionInterface.register(ATTENTION_NAME, grouped_decode_attention)
AttentionMaskInterface.register(ATTENTION_NAME, sdpa_mask)  # the masks SDPA takes


@contextmanager
def decode_attention(model: torch.nn.Module) -> Iterator[None]:
    """Within the block, a model on ``transformers``' SDPA attention uses :func:`grouped_decode_attention`
    (the same numbers for a query of several tokens; one-token queries skip the key copies)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = getattr(base, "config", None)
    switch = getattr(config, "_attn_implementation", None) == "sdpa" and hasattr(base, "set_attn_implementation")
    if switch:
        base.set_attn_implementation(ATTENTION_NAME)
    try:
        yield
    finally:
        if switch:
            base.set_attn_implementation("sdpa")
