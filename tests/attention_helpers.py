"""Shared pieces of the C decode attention's tests: the attention written out in float64, and
random problems of every shape it takes."""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st


def reference(query, prefix_keys, prefix_values, row_prompt, keys, values, mask, scale):
    """The attention written out in float64, row by row and head by head."""
    rows, kv_heads, group, dim = query.shape
    out = torch.zeros(rows, kv_heads, group, dim, dtype=torch.float64)
    for row in range(rows):
        prompt = int(row_prompt[row])
        for head in range(kv_heads):
            all_keys = torch.cat([prefix_keys[prompt, head], keys[row, head]]).double()
            all_values = torch.cat([prefix_values[prompt, head], values[row, head]]).double()
            for q in range(group):
                scores = all_keys @ query[row, head, q].double() * scale
                if mask is not None:
                    scores = scores.masked_fill(~mask[row, 0, 0], -math.inf)
                out[row, head, q] = torch.softmax(scores, dim=0) @ all_values
    return out


@st.composite
def problems(draw, dtype=torch.float32):
    """The kernel's arguments: 1-3 prompts, 1-7 rows, grouped heads, widths 8-128, a mask or none;
    keys and values in ``dtype`` (the query float32)."""
    prompts = draw(st.integers(1, 3))
    rows = draw(st.integers(1, 7))
    kv_heads, group = draw(st.integers(1, 3)), draw(st.integers(1, 5))
    dim = draw(st.sampled_from([8, 16, 64, 128]))
    prefix, own = draw(st.integers(1, 40)), draw(st.integers(0, 20))
    row_prompt = torch.tensor([draw(st.integers(0, prompts - 1)) for _ in range(rows)])
    seed = draw(st.integers(0, 2**16))
    generator = torch.Generator().manual_seed(seed)

    def normal(*shape):
        return torch.randn(*shape, generator=generator).to(dtype)

    query = torch.randn(rows, kv_heads, group, dim, generator=generator)
    # Own keys and values in a larger buffer, as the sampler's growing cache holds them.
    room = own + draw(st.integers(0, 5))
    keys, values = normal(rows, kv_heads, room, dim), normal(rows, kv_heads, room, dim)
    mask = None
    if draw(st.booleans()):
        # Each prompt's left padding, shared by its rows; a row's own tokens may start with a gap.
        padding = [draw(st.integers(0, prefix - 1)) for _ in range(prompts)]
        mask = torch.ones(rows, 1, 1, prefix + own, dtype=torch.bool)
        for row in range(rows):
            mask[row, 0, 0, : padding[int(row_prompt[row])]] = False
            mask[row, 0, 0, prefix : prefix + draw(st.integers(0, own))] = False
    prefix_keys, prefix_values = (normal(prompts, kv_heads, prefix, dim) for _ in range(2))
    return query, prefix_keys, prefix_values, row_prompt, keys[:, :, :own], values[:, :, :own], mask, dim**-0.5


def decode_plan(row_prompt, width, prefix_keys, prefix_values, in_order):
    """The sampler's layout of rows by prompt (``kv_cache._DecodePlan``) for ``row_prompt``, each
    prompt ``width`` rows."""
    from slca_grpo.engine import kv_cache

    prompts, rows = prefix_keys.shape[0], len(row_prompt)
    row_slot = torch.empty(rows, dtype=torch.long)
    slots = torch.empty(prompts, width, dtype=torch.long)
    for p in range(prompts):
        members = (row_prompt == p).nonzero().flatten()
        slots[p] = members
        row_slot[members] = p * width + torch.arange(width)
    return kv_cache._DecodePlan(prefix_keys, prefix_values, slots, row_slot, width, row_slot // width, in_order)
