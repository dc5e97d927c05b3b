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

:class:`SharedPrefixLayer` goes further for the rollouts of a group, which decode on top of one
prompt: the prompt's keys and values are kept once per group instead of once per row, and a
one-token query multiplies them once for all the group's rows (:func:`prefix_decode_attention`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

import torch
from transformers import AttentionInterface
from transformers.cache_utils import DynamicCache, DynamicLayer
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from slca_grpo.engine import native
from slca_grpo.engine.attention import attends_to_every_token, attention_implementation, masked_sdpa

ATTENTION_NAME = "slca_sdpa"
# Rows share a prompt's cache in models at least this wide. At SmolLM2's width (576) a decode step
# ran 1.18x faster for it; at the reader's (128) 1.05x at 32 rows, and with the fused decode step
# over hundreds of rows it is what lets the C kernel's prompt-sharing attention run.
SHARED_PREFIX_MIN_HIDDEN = 128


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

    def restore(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Start from given keys and values [rows, kv heads, length, D] (a kept turn's cache)."""
        self.lazy_initialization(keys, values)
        self._length = keys.shape[-2]
        self._key_buffer, self._value_buffer = keys, values
        self.keys, self.values = keys, values

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

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        self.batch_select_indices(beam_idx)


@dataclass
class _Prefix:
    keys: torch.Tensor  # [prompts, kv heads, prefix length, head dim], contiguous
    values: torch.Tensor
    group: torch.Tensor  # [rows]: row -> prompt
    owner: Any  # the cache holding the layer, whose decode_attention block joins the prefix
    plan: _DecodePlan | None = None


@dataclass(frozen=True)
class _DecodePlan:
    """How a one-token step lays the rows' queries out by prompt: ``slots[p, j]`` is the j-th row
    of the p-th prompt that still has rows (``rows``, a zero query, where a prompt has fewer), and
    ``row_slot[r]`` is row r's place ``p * width + j``."""

    keys: torch.Tensor  # the prefix of the prompts that still have rows
    values: torch.Tensor
    slots: torch.Tensor
    row_slot: torch.Tensor
    width: int
    row_prompt: torch.Tensor  # [rows]: row -> its prompt's index in ``keys``
    # Rows already lie prompt by prompt, ``width`` each (a group's rollouts before any stop): the
    # layout by prompt is a view of the rows', with no gather or scatter.
    in_order: bool = False


class SharedPrefixLayer(GrowingLayer):
    """A :class:`GrowingLayer` whose rows can share a prompt. Selecting rows with repeats (a
    distinct prompt's cache handed to each of its rollouts) keeps the cached tokens once per
    prompt as a prefix; each row's own tokens grow after it. A one-token update returns the rows'
    own keys and values, which :func:`grouped_decode_attention` joins to the prefix (one new token, or
    several: :func:`prefix_prefill_attention`); outside such a block an update returns whole rows
    (prefix and own), for any attention."""

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self.prefix: _Prefix | None = None

    def restore_shared(
        self,
        prefix_keys: torch.Tensor,
        prefix_values: torch.Tensor,
        group: torch.Tensor,
        owner: Any,
        keys: torch.Tensor,
        values: torch.Tensor,
    ) -> None:
        """Start from a kept turn's cache: the prompts' keys and values [prompts, kv heads, P, D]
        shared by the rows (``group``: row -> prompt) of ``owner``, and each row's own after them."""
        self.restore(keys, values)
        self.prefix = _Prefix(prefix_keys, prefix_values, group, owner)

    def prefix_length(self) -> int:
        return self.prefix.keys.shape[-2] if self.is_initialized and self.prefix is not None else 0

    def get_seq_length(self) -> int:
        return super().get_seq_length() + self.prefix_length()

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any):
        keys, values = super().update(key_states, value_states)
        if self.prefix is None or self._joined():
            return keys, values  # attention joins the prefix itself (grouped_decode_attention)
        return self.whole_rows()

    def _joined(self) -> bool:
        """Whether attention in this block joins this layer's prefix itself (within
        :func:`decode_attention` for the cache that holds the layer)."""
        state = _decode_state.get()
        return state is not None and state.cache is not None and state.cache is self.prefix.owner

    def whole_rows(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Every row's keys and values, prefix included (a copy)."""
        group = self.prefix.group
        keys = torch.cat([self.prefix.keys[group], self.keys], dim=-2)
        return keys, torch.cat([self.prefix.values[group], self.values], dim=-2)

    def _unshare(self) -> None:
        keys, values = self.whole_rows()
        self.prefix = None
        self._key_buffer, self._value_buffer, self._length = keys, values, keys.shape[-2]
        self.keys, self.values = keys, values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.prefix is not None:
            if self._length:
                super().batch_select_indices(indices)
            else:
                self.keys, self.values = self.keys[indices], self.values[indices]
            self.prefix = replace(self.prefix, group=self.prefix.group[indices], plan=None)
        elif self._length and len(set(indices.tolist())) < len(indices) and (owner := self._cache_in_block()):
            # Rows repeat: they share what is cached so far as their prefix.
            keys = self._key_buffer[..., : self._length, :].contiguous()
            values = self._value_buffer[..., : self._length, :].contiguous()
            self.prefix = _Prefix(keys, values, indices.clone(), owner)
            self._key_buffer = self._value_buffer = None
            self._length = 0
            self.keys, self.values = keys[indices, :, :0], values[indices, :, :0]
        else:
            super().batch_select_indices(indices)

    def _cache_in_block(self) -> Any:
        """The cache of the enclosing :func:`decode_attention` block if it holds this layer, else
        None (outside such a block rows are copied: no attention there would join a prefix)."""
        state = _decode_state.get()
        layers = getattr(state.cache, "layers", None) if state is not None else None
        return state.cache if layers is not None and any(layer is self for layer in layers) else None

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.prefix is None:
            return super().batch_repeat_interleave(repeats)
        self.batch_select_indices(torch.arange(len(self.prefix.group)).repeat_interleave(repeats))

    def crop(self, max_length: int) -> None:
        if self.prefix is None:
            return super().crop(max_length)
        if max_length < 0:
            max_length = self.get_seq_length() - abs(max_length)
        if max_length >= self.prefix_length():
            return super().crop(max_length - self.prefix_length())
        self._unshare()
        super().crop(max_length)

    def decode_plan(self) -> _DecodePlan:
        prefix = self.prefix
        if prefix.plan is None:
            group = prefix.group.tolist()
            used = sorted(set(group))
            members: dict[int, list[int]] = {g: [] for g in used}
            for row, g in enumerate(group):
                members[g].append(row)
            width = max(len(rows) for rows in members.values())
            slots = torch.full((len(used), width), len(group), dtype=torch.long)
            row_slot = torch.empty(len(group), dtype=torch.long)
            for p, g in enumerate(used):
                for j, row in enumerate(members[g]):
                    slots[p, j], row_slot[row] = row, p * width + j
            keys, values = prefix.keys, prefix.values
            if len(used) < keys.shape[0]:
                kept = torch.tensor(used, device=keys.device)
                keys, values = keys[kept], values[kept]
            device = keys.device
            in_order = row_slot.tolist() == list(range(len(used) * width))
            prefix.plan = _DecodePlan(
                keys, values, slots.to(device), row_slot.to(device), width, row_slot // width, in_order
            )
        return prefix.plan


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


def growing_cache(model: torch.nn.Module, *, share_prefixes: bool = True) -> DynamicCache | None:
    """An empty cache for a model whose layers all attend to everything: of
    :class:`SharedPrefixLayer` for a model at least ``SHARED_PREFIX_MIN_HIDDEN`` wide (unless
    ``share_prefixes`` is off), else of :class:`GrowingLayer`; None otherwise (sliding-window or
    shared-KV models keep ``transformers``' own cache)."""
    config = getattr(model, "config", None)
    if not attends_to_every_token(config):
        return None
    cache = DynamicCache()
    wide = getattr(config.get_text_config(decoder=True), "hidden_size", 0) >= SHARED_PREFIX_MIN_HIDDEN
    cache.layer_class_to_replicate = SharedPrefixLayer if share_prefixes and wide else GrowingLayer
    return cache


@dataclass
class _DecodeState:
    cache: Any  # the cache of the forward passes in the block (None: not known)
    mask: torch.Tensor | None = None  # the last boolean mask seen, and its additive form
    bias: torch.Tensor | None = None


_decode_state: ContextVar[_DecodeState | None] = ContextVar("slca_decode_state", default=None)


def _additive(mask: torch.Tensor) -> torch.Tensor:
    """A boolean mask as 0 / -inf to add to scores (one conversion per forward, not per layer:
    every layer of a step gets the same mask object)."""
    if mask.dtype != torch.bool:
        return mask
    state = _decode_state.get()
    if state is not None and state.mask is mask:
        return state.bias
    bias = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device).masked_fill_(~mask, float("-inf"))
    if state is not None:
        state.mask, state.bias = mask, bias
    return bias


def _shared_layer(module: torch.nn.Module, key: torch.Tensor) -> SharedPrefixLayer | None:
    """The cache layer whose rows' own keys ``key`` are, if they share a prefix."""
    state = _decode_state.get()
    layers = getattr(state.cache, "layers", None) if state is not None else None
    if not layers:
        return None
    index = getattr(module, "layer_idx", None)
    # By the module's layer index; a module without one is found by its keys.
    candidates = [layers[index]] if isinstance(index, int) and 0 <= index < len(layers) else layers
    for layer in candidates:
        if isinstance(layer, SharedPrefixLayer) and layer.prefix is not None and key is layer.keys:
            return layer
    return None


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
    cache ~1.4x slower on a 2-core EPYC. Rows that share a prompt (:class:`SharedPrefixLayer`)
    attend to it through :func:`prefix_decode_attention`."""
    batch, heads, length, dim = query.shape
    groups = heads // key.shape[1]
    shared = _shared_layer(module, key)
    if length != 1 or dropout or kwargs.get("output_attentions"):
        if shared is not None and attention_mask is not None and not dropout and not kwargs.get("output_attentions"):
            # Several new tokens per row on a shared prompt (a later turn's prefill): by prompt.
            scale = dim**-0.5 if scaling is None else scaling
            return prefix_prefill_attention(shared.decode_plan(), query, key, value, attention_mask, scale), None
        if shared is not None:
            key, value = shared.whole_rows()
        return masked_sdpa(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    folded = query.view(batch, heads // groups, groups, dim)  # [B, kv heads, group, D]
    scale = dim**-0.5 if scaling is None else scaling
    total = key.shape[-2] + (shared.prefix_length() if shared is not None else 0)
    mask = attention_mask
    if mask is not None and mask.shape[-1] != total:
        # [B, 1, 1, L]: the same for every query of a group. Sliced only where it is longer, so
        # every layer of a step gets the same mask object and _additive converts it once.
        mask = mask[:, :, :, :total]
    if shared is not None:
        out = prefix_decode_attention(shared.decode_plan(), folded, key, value, mask, scale)
    elif value.dtype == torch.float32:
        out = torch.nn.functional.scaled_dot_product_attention(folded, key, value, attn_mask=mask, scale=scaling)
    else:
        # keys @ queryᵀ, not query @ keysᵀ: the cache is a strided view of a larger buffer, which a
        # reduced-precision batched product reads fast only untransposed.
        keys, folded = key.to(value.dtype), folded.to(value.dtype)
        scores = torch.matmul(keys, folded.transpose(-1, -2)).transpose(-1, -2).float() * scale
        if mask is not None:
            scores = scores + _additive(mask)
        out = torch.matmul(torch.softmax(scores, dim=-1).to(value.dtype), value)
    # [B, kv heads, group, D] -> [B, 1, heads, D], the layout transformers' attention returns.
    return out.reshape(batch, heads, dim)[:, None], None


def prefix_decode_attention(
    plan: _DecodePlan,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    scale: float,
) -> torch.Tensor:
    """One-token attention of rows over their prompt's shared prefix and their own tokens.

    ``query``: [rows, kv heads, group, D] (a key/value group's query heads folded together);
    ``key``/``value``: the rows' own tokens; ``mask``: [rows, 1, 1, prefix + own]. On a CPU with
    float32 or bfloat16 caches the C kernel computes it (:func:`native.prefix_decode_attention`);
    elsewhere, or where it is not built or switched off, the prefix is multiplied once per prompt
    by the queries of all its rows (one product with rows x group columns instead of one per row)
    and the scores are joined for one float32 softmax, as in :func:`grouped_decode_attention`.
    Returns [rows, kv heads, group, D] in the values' dtype."""
    dtype = value.dtype
    out = native.prefix_decode_attention(query, plan.keys, plan.values, plan.row_prompt, key, value, mask, scale)
    if out is not None:
        return out.to(dtype)
    rows, kv_heads, group, dim = query.shape
    prompts, _, prefix, _ = plan.keys.shape
    query = query.to(dtype)
    if plan.in_order:
        by_prompt = query.view(prompts, plan.width, kv_heads, group, dim)
    else:
        padded = torch.cat([query, query.new_zeros((1, kv_heads, group, dim))])
        by_prompt = padded[plan.slots]
    by_prompt = by_prompt.transpose(1, 2).reshape(prompts, kv_heads, plan.width * group, dim)

    def per_row(by_prompt_out: torch.Tensor) -> torch.Tensor:  # [prompts, kv, width*group, X] -> [rows, kv, group, X]
        spread = by_prompt_out.view(prompts, kv_heads, plan.width, group, -1).transpose(1, 2)
        spread = spread.reshape(prompts * plan.width, kv_heads, group, -1)
        return spread if plan.in_order else spread[plan.row_slot]

    prefix_scores = per_row(torch.matmul(by_prompt, plan.keys.transpose(-1, -2)))
    own_scores = torch.matmul(key.to(dtype), query.transpose(-1, -2)).transpose(-1, -2)
    scores = torch.cat([prefix_scores, own_scores], dim=-1).float() * scale
    if mask is not None:
        scores = scores + _additive(mask)
    probs = torch.softmax(scores, dim=-1).to(dtype)
    if plan.in_order:
        slots = probs[..., :prefix].reshape(prompts, plan.width, kv_heads, group, prefix).transpose(1, 2)
    else:
        slots = probs.new_zeros((prompts * plan.width, kv_heads, group, prefix))
        slots[plan.row_slot] = probs[..., :prefix]
        slots = slots.view(prompts, plan.width, kv_heads, group, prefix).transpose(1, 2)
    prefix_out = per_row(torch.matmul(slots.reshape(prompts, kv_heads, plan.width * group, prefix), plan.values))
    return (prefix_out.float() + torch.matmul(probs[..., prefix:], value).float()).to(dtype)


def _bias(mask: torch.Tensor) -> torch.Tensor:
    """A boolean mask (True: attend) as 0 / -inf float32, or a float mask as float32."""
    if mask.dtype != torch.bool:
        return mask.float()
    return torch.zeros(mask.shape, dtype=torch.float32, device=mask.device).masked_fill_(~mask, float("-inf"))


def attention_with_lse(
    query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, bias: torch.Tensor, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention output [B, H, L, D] and its log-sum-exp [B, H, L], float32: PyTorch's CPU flash
    kernel on a CPU, the same math in three products elsewhere (that kernel is CPU-only). What a
    query that may attend to nothing (padding) gets differs between the two."""
    if query.device.type == "cpu":
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            query, keys, values, 0.0, False, attn_mask=bias, scale=scale
        )
    return attention_with_lse_by_products(query, keys, values, bias, scale)


def attention_with_lse_by_products(
    query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, bias: torch.Tensor, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`attention_with_lse` on any device: scores, their log-sum-exp, weighted values."""
    scores = torch.matmul(query, keys.transpose(-1, -2)) * scale + bias
    lse = torch.logsumexp(scores, dim=-1)
    return torch.matmul(torch.exp(scores - lse.unsqueeze(-1)), values), lse


def prefix_prefill_attention(
    plan: _DecodePlan,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Attention of several new tokens per row over the row's shared prompt prefix and its own
    tokens: a later turn's prefill, where each rollout's response so far runs on its group's prompt.

    ``query``: [rows, heads, length, D]; ``key``/``value``: the rows' own tokens [rows, kv heads,
    own, D]; ``mask``: [rows, 1, length, prefix + own], True where a query may attend. Two passes
    of :func:`attention_with_lse` (PyTorch's CPU flash kernel on a CPU), joined by their
    log-sum-exps: every row's queries over its own tokens (masked), and, prompt by prompt, the
    queries of all the prompt's rows over its prefix (masked by the prefix's padding only) — so
    the prefix is never copied per row, as whole rows for SDPA would be. Float32 [rows, length,
    heads, D], the layout ``transformers``' attention returns, in ``value``'s dtype."""
    rows, heads, length, dim = query.shape
    per_kv = heads // key.shape[1]
    prefix = plan.keys.shape[-2]
    query = query.float()
    own_keys = key.float().repeat_interleave(per_kv, dim=1)
    own_values = value.float().repeat_interleave(per_kv, dim=1)
    own_out, own_lse = attention_with_lse(query, own_keys, own_values, _bias(mask[..., prefix:]), scale)
    prefix_out = torch.zeros_like(own_out)
    prefix_lse = torch.full_like(own_lse, float("-inf"))
    prefix_keys = plan.keys.float().repeat_interleave(per_kv, dim=1)  # [prompts, heads, prefix, D]
    prefix_values = plan.values.float().repeat_interleave(per_kv, dim=1)
    # A query is a real token where it may attend to itself (left padding may not): only those
    # attend to the prefix (rows' new tokens differ in number; the padding would cost as much).
    steps = torch.arange(length, device=mask.device)
    real = mask[:, 0, steps, prefix + key.shape[-2] - length + steps]  # [rows, length]
    for prompt, slots in enumerate(plan.slots.tolist()):
        members = [row for row in slots if row < rows]
        index = torch.tensor(members, device=query.device)
        picked = real[index].reshape(-1).nonzero().squeeze(1)  # the members' real queries, in order
        if not len(picked):
            continue
        # The prompt's rows' real queries side by side: [1, heads, picked, D].
        queries = query[index].transpose(0, 1).reshape(heads, len(members) * length, dim)[:, picked]
        allowed = mask[index, :, :, :prefix].any(dim=0).any(dim=1)  # [1, prefix]: the prefix's real tokens
        out, lse = attention_with_lse(
            queries[None],
            prefix_keys[prompt : prompt + 1],
            prefix_values[prompt : prompt + 1],
            _bias(allowed).view(1, 1, 1, prefix),
            scale,
        )
        member_out = out.new_zeros((heads, len(members) * length, dim))
        member_lse = lse.new_full((heads, len(members) * length), float("-inf"))
        member_out[:, picked], member_lse[:, picked] = out[0], lse[0]
        prefix_out[index] = member_out.view(heads, len(members), length, dim).transpose(0, 1)
        prefix_lse[index] = member_lse.view(heads, len(members), length).transpose(0, 1)
    total = torch.logaddexp(prefix_lse, own_lse)
    total = torch.where(torch.isinf(total), torch.zeros_like(total), total)  # a query that sees nothing: 0
    own_weight = torch.exp(own_lse - total).unsqueeze(-1)
    prefix_weight = torch.exp(prefix_lse - total).unsqueeze(-1)
    out = prefix_out.nan_to_num_(0.0) * prefix_weight + own_out.nan_to_num_(0.0) * own_weight
    return out.transpose(1, 2).contiguous().to(value.dtype)


AttentionInterface.register(ATTENTION_NAME, grouped_decode_attention)
AttentionMaskInterface.register(ATTENTION_NAME, sdpa_mask)  # the masks SDPA takes


@contextmanager
def decode_attention(model: torch.nn.Module, cache: Any = None) -> Iterator[None]:
    """Within the block, a model on ``transformers``' SDPA attention uses :func:`grouped_decode_attention`
    (the same numbers for a query of several tokens; one-token queries skip the key copies).
    ``cache``: the cache the block's forward passes use, whose shared prefixes attention joins."""
    with attention_implementation(model, ATTENTION_NAME):
        token = _decode_state.set(_DecodeState(cache))
        try:
            yield
        finally:
            _decode_state.reset(token)
