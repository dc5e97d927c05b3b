"""Each rollout's KV cache kept from one turn to the next.

A rollout's later turn samples on top of everything before it: its prompt, its own earlier
responses and the tool responses injected between them. Without a kept cache each turn prefills
that whole text again (in a three-turn rollout, two thirds of the rollouts' time on a CPU). A
:class:`TurnCache` holds, for each row of the last :func:`~slca_grpo.engine.sample` call, the keys
and values its forward passes produced (its group's prompt once, shared by the group's rows, then
the row's own tokens, with a mask over the slots that hold real tokens); the next call prefills
only what was appended since — the last sampled token and the injected text.

Rows are matched by the caller's keys, and a kept row is used only if its cached tokens are a
prefix of the row's new sequence; otherwise the call prefills as if nothing were kept.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from slca_grpo.engine.kv_cache import GrowingLayer, SharedPrefixLayer


@dataclass
class _KeptRow:
    token_ids: tuple[int, ...]  # the tokens whose keys and values are cached, the prompt included
    prompt: int | None  # the row's prompt in the kept prefix (None: the row's slots hold its prompt too)
    prompt_mask: torch.Tensor | None  # [P]: the prefix slots that are the prompt's real tokens
    keys: list[torch.Tensor]  # per layer [kv heads, L, D]: the row's own real tokens (the slots
    values: list[torch.Tensor]  # between them, padding, are dropped)
    mask: torch.Tensor  # [L] long: ones (the attention mask of those slots)


@dataclass
class _KeptPrefix:
    keys: list[torch.Tensor]  # per layer [prompts, kv heads, P, D]
    values: list[torch.Tensor]


class TurnCache:
    """What :func:`~slca_grpo.engine.sample` keeps of each row's cache for the row's next call.

    Pass one to every turn of a batch of rollouts, with ``row_keys`` naming each row the same way
    in every call. ``reused_tokens`` / ``prefilled_tokens`` count the tokens whose keys and values
    were taken from it / computed again by later calls."""

    def __init__(self) -> None:
        self.rows: dict[Hashable, _KeptRow] = {}
        self.prefix: _KeptPrefix | None = None
        self.reused_tokens = 0
        self.prefilled_tokens = 0
        self._pending: dict[Hashable, _KeptRow] = {}
        self._pending_prefix: _KeptPrefix | None = None

    # -- keeping -----------------------------------------------------------------------------

    def keep(
        self,
        cache: Any,
        attention: torch.Tensor,
        decode_start: int,
        batch_rows: Sequence[int],
        row_keys: Sequence[Hashable],
        sequences: Sequence[Sequence[int]],
        generated: Sequence[Sequence[int]],
    ) -> None:
        """Keep the rows ``batch_rows`` (indices into ``cache``'s current batch) of the running
        call. ``attention``: the batch's [rows, width] mask; ``decode_start``: its width when
        decoding began (later slots are one per decode step); ``row_keys`` / ``sequences`` /
        ``generated``: per batch row, the caller's key, the call's input and the tokens sampled
        (all but the last were fed back, so they are cached)."""
        layers = list(getattr(cache, "layers", []))
        if not layers or not all(isinstance(layer, GrowingLayer) and layer.is_initialized for layer in layers):
            return
        shared = isinstance(layers[0], SharedPrefixLayer) and layers[0].prefix is not None
        index = torch.tensor(list(batch_rows), dtype=torch.long, device=attention.device)
        keys = [layer.keys.index_select(0, index) for layer in layers]  # a copy: the cache goes on
        values = [layer.values.index_select(0, index) for layer in layers]
        width = keys[0].shape[-2]
        masks = attention.index_select(0, index)
        prompt_width = masks.shape[1] - width
        if shared:
            prefix = layers[0].prefix
            if self._pending_prefix is None or self._pending_prefix.keys[0] is not prefix.keys:
                self._pending_prefix = _KeptPrefix(
                    [lay.prefix.keys for lay in layers], [lay.prefix.values for lay in layers]
                )
            groups = prefix.group.index_select(0, index).tolist()
        for position, row in enumerate(batch_rows):
            own_mask = masks[position, prompt_width:].clone()
            fed = max(len(generated[row]) - 1, 0)  # decode slots after the fed tokens hold pads
            own_mask[decode_start - prompt_width + fed :] = 0
            # Only the real slots are kept: positions are given explicitly, so the padding between
            # them (of prefills and of finished rows' decode steps) need not be carried along.
            real = own_mask.nonzero().squeeze(1)
            self._pending[row_keys[row]] = _KeptRow(
                token_ids=(*sequences[row], *generated[row][:fed]),
                prompt=groups[position] if shared else None,
                prompt_mask=masks[position, :prompt_width] if shared else None,
                keys=[k[position].index_select(1, real) for k in keys],
                values=[v[position].index_select(1, real) for v in values],
                mask=own_mask.index_select(0, real),
            )

    def finish_call(self) -> None:
        """The call's kept rows replace the previous call's (rows that stopped are not needed again)."""
        self.rows, self.prefix = self._pending, self._pending_prefix
        self._pending, self._pending_prefix = {}, None

    # -- restoring ---------------------------------------------------------------------------

    def restore(
        self,
        cache: Any,
        row_keys: Sequence[Hashable],
        sequences: Sequence[Sequence[int]],
        *,
        device: torch.device,
    ) -> tuple[torch.Tensor, torch.Tensor, list[list[int]]] | None:
        """Fill the empty ``cache`` with the kept rows for ``row_keys``. Returns (attention mask of
        the cached slots, each row's count of cached real tokens, each row's tokens still to
        prefill), or None (the cache untouched) unless every row is kept and its cached tokens
        begin its sequence."""
        kept = [self.rows.get(key) for key in row_keys]
        if not kept or any(k is None for k in kept) or getattr(cache, "layers", None) != []:
            return None
        if any(
            tuple(seq[: len(k.token_ids)]) != k.token_ids or len(seq) <= len(k.token_ids)
            for k, seq in zip(kept, sequences)
        ):
            return None
        shared = kept[0].prompt is not None
        if any((k.prompt is not None) != shared for k in kept) or (shared and self.prefix is None):
            return None
        rows, width = len(kept), max(k.mask.shape[0] for k in kept)
        own_mask = torch.zeros((rows, width), dtype=kept[0].mask.dtype, device=device)
        layer_class = cache.layer_class_to_replicate
        for layer_index in range(len(kept[0].keys)):
            sample_keys, sample_values = kept[0].keys[layer_index], kept[0].values[layer_index]
            keys = sample_keys.new_zeros((rows, sample_keys.shape[0], width, sample_keys.shape[-1]))
            values = sample_values.new_zeros((rows, sample_values.shape[0], width, sample_values.shape[-1]))
            for row, k in enumerate(kept):
                length = k.mask.shape[0]
                if length:  # right-aligned: the rows' newest slots line up, as left padding does
                    keys[row, :, width - length :] = k.keys[layer_index]
                    values[row, :, width - length :] = k.values[layer_index]
            layer = layer_class()
            if shared:
                group = torch.tensor([k.prompt for k in kept], dtype=torch.long, device=device)
                layer.restore_shared(
                    self.prefix.keys[layer_index], self.prefix.values[layer_index], group, cache, keys, values
                )
            else:
                layer.restore(keys, values)
            cache.layers.append(layer)
        for row, k in enumerate(kept):
            if k.mask.shape[0]:
                own_mask[row, width - k.mask.shape[0] :] = k.mask
        attention = torch.cat([torch.stack([k.prompt_mask for k in kept]), own_mask], dim=1) if shared else own_mask
        real = attention.sum(dim=1)
        rests = [list(seq[len(k.token_ids) :]) for k, seq in zip(kept, sequences)]
        self.reused_tokens += sum(len(k.token_ids) for k in kept)
        self.prefilled_tokens += sum(len(r) for r in rests)
        return attention, real, rests
