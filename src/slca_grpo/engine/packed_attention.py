"""Training passes over packed sequences: no padding, each sequence's attention on its own.

A padded batch of rollouts pays for its padding twice: in every matrix product (rows of padding
tokens) and in attention (padded queries against padded keys). On the reader at 16 prompts × G = 8
a micro-batch's attention computed 3.0 query-key pairs for each real one. Packed, the sequences
of a pass lie end to end in one row of ``N`` tokens, so the products see only real tokens; the
attention :func:`packed_attention` then runs sequence by sequence, each causal over its own keys
and, when the pass continues cached ones (the rest of rollouts on top of their shared prompt), over
its prompt's cached keys too. No ``N × N`` mask is built.

The layout of a pass (:class:`PackedLayout`) is set for the duration of the model call with
:func:`packed_pass`; the model must be on ``transformers``' SDPA attention, which is swapped for
this one inside the block. Values and gradients equal the padded pass's to float32 rounding
(``tests/test_packed_attention.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface

from slca_grpo.engine.attention import TRAINING_ATTENTION, attends_to_every_token

PACKED_ATTENTION = "slca_packed"


@dataclass(frozen=True)
class PackedLayout:
    """Where each sequence lies in a packed pass (a batch of one row).

    ``queries[i]``: the span of sequence i's tokens in this pass. ``cached[i]``: the spans of the
    keys it also attends to, all of them and in this order, in the cache the pass continues (its
    prompt's; in a later turn its prompt's and then its own earlier tokens'), or ``()``. The
    pass's own keys follow the cache's, in the order of its tokens."""

    queries: Sequence[tuple[int, int]]
    cached: Sequence[tuple[tuple[int, int], ...]]


_layout: ContextVar[PackedLayout | None] = ContextVar("packed_layout", default=None)


def packed_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention of a packed pass (query [1, heads, N, D]; key and value [1, kv heads, C + N, D]
    with C cached keys first): each sequence causal over its own keys, after its cached ones.
    Returns [1, N, heads, D]. In float32 under CPU autocast, as the padded training pass runs it."""
    layout = _layout.get()
    if layout is None:
        raise RuntimeError("packed_attention runs inside packed_pass(), which gives the sequences' layout")
    if torch.is_autocast_enabled(query.device.type):
        with torch.autocast(query.device.type, enabled=False):
            return _attend(module, query.float(), key.float(), value.float(), layout, dropout, scaling)
    return _attend(module, query, key, value, layout, dropout, scaling)


def _attend(module, query, key, value, layout: PackedLayout, dropout: float, scaling: float | None):
    own = key.shape[-2] - query.shape[-2]  # where the pass's own keys start
    grouped = getattr(module, "num_key_value_groups", 1) > 1
    outs = []
    for (start, end), cached in zip(layout.queries, layout.cached, strict=True):
        q = query[:, :, start:end]
        k, v = key[:, :, own + start : own + end], value[:, :, own + start : own + end]
        if not cached:
            mask, causal = None, True
        else:
            k = torch.cat([*(key[:, :, a:b] for a, b in cached), k], dim=2)
            v = torch.cat([*(value[:, :, a:b] for a, b in cached), v], dim=2)
            length, seen = end - start, sum(b - a for a, b in cached)
            mask = torch.ones((length, seen + length), dtype=torch.bool, device=q.device)
            mask[:, seen:].tril_()
            causal = False
        outs.append(
            torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=causal, scale=scaling, enable_gqa=grouped
            )
        )
    return torch.cat(outs, dim=2).transpose(1, 2).contiguous(), None


def _no_mask(*args: Any, **kwargs: Any) -> None:
    return None  # the layout says who attends to what; an N × N mask would not fit


AttentionInterface.register(PACKED_ATTENTION, packed_attention)
AttentionMaskInterface.register(PACKED_ATTENTION, _no_mask)


def packs(model: torch.nn.Module) -> bool:
    """Whether :func:`packed_pass` can run this model: on ``transformers``' SDPA attention (or our
    training SDPA, or already packed), without gradient checkpointing (a recomputed layer would run outside the
    block), every layer attending to every earlier token with its own keys and values."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = getattr(base, "config", None)
    if getattr(config, "_attn_implementation", None) not in ("sdpa", TRAINING_ATTENTION, PACKED_ATTENTION):
        return False
    if getattr(base, "is_gradient_checkpointing", False) or not hasattr(base, "set_attn_implementation"):
        return False
    return attends_to_every_token(config)


@contextmanager
def packed_pass(model: torch.nn.Module, layout: PackedLayout) -> Iterator[None]:
    """Within the block, ``model``'s forward passes are packed ones with ``layout`` (see
    :func:`packs` for the models it takes)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    before = base.config._attn_implementation
    token = _layout.set(layout)
    if before != PACKED_ATTENTION:
        base.set_attn_implementation(PACKED_ATTENTION)
    try:
        yield
    finally:
        if before != PACKED_ATTENTION:
            base.set_attn_implementation(before)
        _layout.reset(token)
