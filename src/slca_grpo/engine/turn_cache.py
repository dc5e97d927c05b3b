"""Each rollout's KV cache kept from one turn to the next.

A rollout's later turn samples on top of everything before it: its prompt, its own earlier
responses and the tool responses injected between them. Without a kept cache each turn prefills
that whole text again (in a three-turn rollout, two thirds of the rollouts' time on a CPU). A
:class:`TurnCache` holds, for each row of the last :func:`~slca_grpo.engine.sample` call, the keys
and values its forward passes produced (its group's prompt once, shared by the group's rows, then
the row's own tokens, with a mask over the slots that hold real tokens); the next call prefills
only what was appended since — the last sampled token and the injected text.

Rows are matched by the caller's keys, and a kept row is used only if its cached tokens are a
prefix of the row's new sequence; otherwise the call prefills as if nothing were kept. Rows are
kept and restored a batch at a time — a few operations per layer, whatever the number of rows:
on a GPU, a kernel launch per row and layer cost more than the prefill saved at 48 rollouts.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from slca_grpo.engine.kv_cache import GrowingLayer, SharedPrefixLayer


@dataclass
class _KeptBlock:
    """The rows kept at one point of a call, as one batch: a few tensor operations per layer,
    whatever the number of rows (on a GPU, a kernel per row and layer would dominate a small step)."""

    keys: list[torch.Tensor]  # per layer [rows, kv heads, L, D]: each row's own real tokens,
    values: list[torch.Tensor]  # right-aligned (the padding between them dropped), zeros before
    mask: torch.Tensor  # [rows, L] long: ones over each row's real slots
    counts: list[int]  # each row's real slots
    groups: list[int] | None  # each row's prompt in the kept prefix (None: the rows hold their prompts)
    prompt_masks: torch.Tensor | None  # [rows, P]: the prefix slots that are each row's prompt


def _last_slots(tensor: torch.Tensor, width: int, dim: int) -> torch.Tensor:
    """The last ``width`` slots of ``tensor`` along ``dim`` (negative), left-padded with zeros
    where it has fewer: right-aligned rows keep their real slots."""
    length = tensor.shape[dim]
    if length >= width:
        return tensor.narrow(dim, length - width, width)
    return F.pad(tensor, [0, 0] * (-dim - 1) + [width - length, 0])


@dataclass
class _KeptRow:
    token_ids: tuple[int, ...]  # the tokens whose keys and values are cached, the prompt included
    block: _KeptBlock
    index: int  # the row's place in its block


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
        device = attention.device
        index = torch.tensor(list(batch_rows), dtype=torch.long, device=device)
        width = layers[0].keys.shape[-2]
        masks = attention.index_select(0, index)
        prompt_width = masks.shape[1] - width
        # A row's own slots: its prefill's real tokens, then one per fed decode token (the decode
        # slots after those hold pads: the last sampled token was never fed back).
        fed = [max(len(generated[row]) - 1, 0) for row in batch_rows]
        limit = torch.tensor([decode_start - prompt_width + f for f in fed], dtype=torch.long, device=device)
        own = masks[:, prompt_width:] * (torch.arange(width, device=device)[None, :] < limit[:, None])
        counts = own.sum(dim=1).tolist()
        length = max(counts, default=0)
        # Only the real slots are kept, right-aligned: a stable sort puts each row's padding first
        # and its real slots after, in order (positions are given explicitly, so the padding
        # between them, of prefills and of finished rows' decode steps, need not be carried along).
        order = torch.sort(own, dim=1, stable=True).indices[:, width - length :]
        gather = order[:, None, :, None]
        if shared:
            prefix = layers[0].prefix
            if self._pending_prefix is None or self._pending_prefix.keys[0] is not prefix.keys:
                self._pending_prefix = _KeptPrefix(
                    [lay.prefix.keys for lay in layers], [lay.prefix.values for lay in layers]
                )
        block = _KeptBlock(
            keys=[torch.take_along_dim(layer.keys.index_select(0, index), gather, dim=2) for layer in layers],
            values=[torch.take_along_dim(layer.values.index_select(0, index), gather, dim=2) for layer in layers],
            mask=own.gather(1, order),
            counts=counts,
            groups=layers[0].prefix.group.index_select(0, index).tolist() if shared else None,
            prompt_masks=masks[:, :prompt_width] if shared else None,
        )
        for position, row in enumerate(batch_rows):
            self._pending[row_keys[row]] = _KeptRow(
                (*sequences[row], *generated[row][: fed[position]]), block, position
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
        shared = kept[0].block.groups is not None
        if any((k.block.groups is not None) != shared for k in kept) or (shared and self.prefix is None):
            return None
        width = max(k.block.counts[k.index] for k in kept)
        # The rows come from a few blocks (the call's early finishers, then the rest): each
        # block's rows are taken at once, then put in the order asked for.
        by_block: dict[int, tuple[_KeptBlock, list[int], list[int]]] = {}
        for position, k in enumerate(kept):
            _, positions, indices = by_block.setdefault(id(k.block), (k.block, [], []))
            positions.append(position)
            indices.append(k.index)
        blocks = [block for block, _, _ in by_block.values()]
        indexes = [
            torch.tensor(indices, dtype=torch.long, device=block.mask.device) for block, _, indices in by_block.values()
        ]
        placed = [position for _, positions, _ in by_block.values() for position in positions]
        reorder = None
        if placed != list(range(len(kept))):
            reorder = torch.argsort(torch.tensor(placed, dtype=torch.long)).to(device)

        def gathered(tensors: list[torch.Tensor], slot_dim: int | None = None) -> torch.Tensor:
            """The kept rows of ``tensors`` (one per block of ``blocks``), in the order asked for;
            with ``slot_dim``, each block's last ``width`` slots (blocks differ in width)."""
            chosen = [tensor.index_select(0, index) for tensor, index in zip(tensors, indexes)]
            if slot_dim is not None:
                chosen = [_last_slots(tensor, width, slot_dim) for tensor in chosen]
            joined = torch.cat(chosen).to(device)
            return joined if reorder is None else joined.index_select(0, reorder)

        own_mask = gathered([block.mask for block in blocks], -1)
        layer_class = cache.layer_class_to_replicate
        if shared:
            group = torch.tensor([k.block.groups[k.index] for k in kept], dtype=torch.long, device=device)
        for layer_index in range(len(kept[0].block.keys)):
            keys = gathered([block.keys[layer_index] for block in blocks], -2)
            values = gathered([block.values[layer_index] for block in blocks], -2)
            layer = layer_class()
            if shared:
                layer.restore_shared(
                    self.prefix.keys[layer_index], self.prefix.values[layer_index], group, cache, keys, values
                )
            else:
                layer.restore(keys, values)
            cache.layers.append(layer)
        attention = (
            torch.cat([gathered([block.prompt_masks for block in blocks]), own_mask], dim=1) if shared else own_mask
        )
        real = attention.sum(dim=1)
        rests = [list(seq[len(k.token_ids) :]) for k, seq in zip(kept, sequences)]
        self.reused_tokens += sum(len(k.token_ids) for k in kept)
        self.prefilled_tokens += sum(len(r) for r in rests)
        return attention, real, rests
