"""A later turn's prefill, packed: each row's new tokens on top of its kept cache, no padding.

In a later turn every row prefills only what was appended since its last call (the last sampled
token and the injected tool responses, :mod:`.turn_cache`), but those differ a lot in length: in
the reader's quick demo at 384 rollouts the new tokens averaged 84 a row and reached 285, so a
left-padded batch spent most of its products and attention on padding. Packed, the rows' new
tokens lie end to end in one row of ``N`` tokens (:mod:`.packed_attention`): the products see only
real tokens, and each row's tokens attend to its prompt's cached keys, its own earlier ones and
causally to each other. Their keys and values are then written into the sampler's cache in the
padded batch's layout (left-padded, zeros where it had padding, which the mask hides either way),
so decoding goes on exactly as after a padded prefill.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers.cache_utils import DynamicCache

from slca_grpo.engine.attention import plain_head
from slca_grpo.engine.kv_cache import GrowingLayer
from slca_grpo.engine.packed_attention import PackedLayout, packed_pass, packs


def packs_rests(model: torch.nn.Module) -> bool:
    """Whether a later turn's rows prefill packed: a CPU model that :func:`packs` and whose logits
    are a plain head over the last hidden state (checked before the sampler swaps its attention)."""
    return (
        packs(model)
        and plain_head(model) is not None
        and next(model.parameters()).device.type == "cpu"
        and not torch.is_grad_enabled()
    )


def _real_slots(tensor: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The slots of ``tensor`` [rows, heads, slots, D] where ``mask`` [rows, slots] is set, row by
    row and in order: [real slots, heads, D]."""
    return tensor.transpose(1, 2)[mask]


def packed_rest_prefill(
    model: torch.nn.Module,
    cache: Any,
    cached_attention: torch.Tensor,
    cached_tokens: torch.Tensor,
    rests: Sequence[Sequence[int]],
) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Prefill each row's ``rests`` on top of its restored cache (``cache``: kept rows, of
    :class:`~.kv_cache.GrowingLayer`, sharing their prompts as a prefix or not;
    ``cached_attention``: [rows, prefix + own] mask of its real slots; ``cached_tokens``: their
    count per row). Returns (cache, attention, positions, last logits) as the padded prefill does."""
    device = cached_attention.device
    decoder, head = plain_head(model)
    layers = cache.layers
    prefix = getattr(layers[0], "prefix", None)
    prefix_width = layers[0].prefix_length() if prefix is not None else 0
    real = cached_attention.bool()
    own_real = real[:, prefix_width:]
    lengths = [len(rest) for rest in rests]
    width = max(lengths)

    # Where each row's cached keys lie in the pass's cache: its prompt's real slots (once per
    # prompt), then its own real slots; the pass's new keys come after all of them.
    spans: list[tuple[tuple[int, int], ...]] = []
    start = 0
    if prefix is not None:
        group = prefix.group.tolist()
        prompts = sorted(set(group))
        first_row: dict[int, int] = {}
        for row, g in enumerate(group):
            first_row.setdefault(g, row)
        prompt_real = real[[first_row[g] for g in prompts], :prefix_width]
        prompt_spans = {}
        for g, count in zip(prompts, prompt_real.sum(dim=1).tolist()):
            prompt_spans[g] = (start, start + count)
            start += count
        prompt_index = torch.tensor(prompts, dtype=torch.long, device=device)
    own_spans = []
    for count in own_real.sum(dim=1).tolist():
        own_spans.append((start, start + count))
        start += count
    for row in range(len(rests)):
        spans.append((prompt_spans[group[row]], own_spans[row]) if prefix is not None else (own_spans[row],))

    packed_cache = DynamicCache()
    for index, layer in enumerate(layers):
        keys = [_real_slots(layer.keys, own_real)]
        values = [_real_slots(layer.values, own_real)]
        if prefix is not None:
            keys.insert(0, _real_slots(layer.prefix.keys.index_select(0, prompt_index), prompt_real))
            values.insert(0, _real_slots(layer.prefix.values.index_select(0, prompt_index), prompt_real))
        # [1, kv heads, cached slots, D], the layout of the pass's own cache
        packed_cache.update(torch.cat(keys).permute(1, 0, 2)[None], torch.cat(values).permute(1, 0, 2)[None], index)

    query_spans, position = [], 0
    for length in lengths:
        query_spans.append((position, position + length))
        position += length
    ids = torch.tensor([token for rest in rests for token in rest], dtype=torch.long, device=device)
    positions = torch.cat(
        [torch.arange(length, device=device) + int(n) for length, n in zip(lengths, cached_tokens.tolist())]
    )
    with packed_pass(model, PackedLayout(query_spans, spans)):
        hidden = decoder(
            input_ids=ids[None], position_ids=positions[None], use_cache=True, past_key_values=packed_cache
        ).last_hidden_state[0]
    last = torch.tensor([end - 1 for _, end in query_spans], dtype=torch.long, device=device)
    logits = head(hidden[last])

    # The new keys and values into the sampler's cache, left-padded as a padded prefill lays them.
    row_of = torch.repeat_interleave(torch.arange(len(rests), device=device), torch.tensor(lengths, device=device))
    column = torch.cat([torch.arange(width - length, width, device=device) for length in lengths])
    for layer, packed in zip(layers, packed_cache.layers):
        cached = packed.keys.shape[-2] - len(ids)
        new_keys, new_values = packed.keys[0, :, cached:], packed.values[0, :, cached:]  # [kv heads, N, D]
        heads, dim = new_keys.shape[0], new_keys.shape[-1]
        rest_keys = new_keys.new_zeros((len(rests), width, heads, dim))
        rest_values = new_values.new_zeros((len(rests), width, heads, new_values.shape[-1]))
        rest_keys[row_of, column] = new_keys.transpose(0, 1)
        rest_values[row_of, column] = new_values.transpose(0, 1)
        # The rows' own keys grow by the new ones (a shared layer's update outside its attention
        # block would hand back whole rows, a copy nobody reads).
        GrowingLayer.update(layer, rest_keys.transpose(1, 2), rest_values.transpose(1, 2))

    rest_mask = torch.zeros((len(rests), width), dtype=cached_attention.dtype, device=device)
    rest_mask[row_of, column] = 1
    attention = torch.cat([cached_attention, rest_mask], dim=1)
    row_positions = (cached_tokens[:, None] + rest_mask.cumsum(-1) - 1).clamp(min=0)
    return cache, attention, row_positions, logits
