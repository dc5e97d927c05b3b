"""Token log-probs of a batch under a model: the quantity the loss is built from.

Logits only where they are needed; rows sharing a prompt compute it once (packed passes on a CPU,
a shared-prefix cache elsewhere); equal to one plain forward pass to rounding (tested).
"""

from __future__ import annotations

import inspect

import torch
from transformers import DynamicCache

from slca_grpo.engine.attention import plain_head, training_attention
from slca_grpo.engine.packed_attention import PackedLayout, packed_pass, packs
from slca_grpo.engine.sampling import cache_keyword, distinct_rows, prefill_shared


def rows_at(tensor: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``tensor[index]`` along the first dimension, an index that may repeat. Written with
    ``index_select``: the backward of ``tensor[index]`` adds a repeated row's gradients with atomic
    adds in whatever order the CPU's threads reach them, so a run's last digits depended on the
    machine's load; ``index_select``'s backward adds them in index order, the same every time."""
    return tensor.index_select(0, index)


def _at(tensor: torch.Tensor, rows: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
    """``tensor[rows, columns]`` for a [rows, columns, ...] tensor, through :func:`rows_at`."""
    return rows_at(tensor.flatten(0, 1), rows * tensor.shape[1] + columns)


def _accepts_logits_to_keep(model: torch.nn.Module) -> bool:
    return "logits_to_keep" in inspect.signature(model.forward).parameters


# cross_entropy computes log-softmax and the gather in one fused kernel each way, where
# logits[token] - logsumexp(logits) makes several passes over the [N, V] logits: at SmolLM2's 49,152
# tokens, 700 rows forward + backward with the head, 0.86-1.0 s -> 0.61-0.62 s (2-core EPYC, Zen 5).
# The two round differently; below this vocabulary (the tiny models' 4,104: 23-26 ms -> 21-22 ms)
# the gain is small and the logsumexp form keeps the rounding their published quick-demo numbers
# came from.
FUSED_LOGPROB_MIN_VOCAB = 16_384


def _selected_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
    logits = logits.float()
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    if logits.shape[-1] >= FUSED_LOGPROB_MIN_VOCAB:
        flat = logits.reshape(-1, logits.shape[-1])
        return -torch.nn.functional.cross_entropy(flat, targets.reshape(-1), reduction="none").view(targets.shape)
    # logits[token] - logsumexp, which avoids materialising a second [N, V] log-softmax tensor.
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def _shared_prefix_logprobs(
    decoder: torch.nn.Module,
    head: torch.nn.Linear,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    positions: torch.Tensor,
    temperature: float,
) -> torch.Tensor | None:
    """Log-probs at ``positions`` computing each distinct prefix only once, or None when rows
    share too few prefixes for that to pay.

    Rows are right-padded. A row's prefix is everything before its first selected token; the G
    rollouts of a prompt share it. Distinct prefixes run once (left-padded, with a KV cache), the
    cache rows are copied to the rows that share them, and only the rest of each row runs on top.
    Gradients flow through the copies back into the one prefix pass. Values and gradients equal
    the full pass (tested).
    """
    rows = input_ids.shape[0]
    if not bool(positions.any(dim=1).all()):
        return None
    lengths = attention_mask.sum(dim=1).tolist()
    cuts = positions.int().argmax(dim=1).tolist()  # each row's first selected position
    distinct, source = distinct_rows(input_ids[r, : cuts[r]].tolist() for r in range(rows))
    if len(distinct) * 2 > rows:
        return None
    device = input_ids.device
    prefill = prefill_shared(decoder, distinct, source, pad_id=0, device=device)
    if prefill.cache is None:
        return None

    width = max(lengths[r] - cuts[r] for r in range(rows))
    rest_ids = torch.zeros((rows, width), dtype=input_ids.dtype, device=device)
    rest_mask = torch.zeros((rows, width), dtype=attention_mask.dtype, device=device)
    for r in range(rows):
        count = lengths[r] - cuts[r]
        rest_ids[r, :count] = input_ids[r, cuts[r] : lengths[r]]
        rest_mask[r, :count] = 1
    cut_tensor = torch.tensor(cuts, dtype=torch.long, device=device)
    rest_positions = cut_tensor[:, None] + torch.arange(width, device=device)
    rest = decoder(
        input_ids=rest_ids,
        attention_mask=torch.cat([prefill.attention, rest_mask], dim=1),
        position_ids=rest_positions,
        use_cache=True,
        **{cache_keyword(decoder): prefill.cache},
    ).last_hidden_state
    # The token at a row's cut is predicted by the prefix's last hidden state; later ones by the rest.
    last_prefix = rows_at(prefill.output.last_hidden_state[:, -1:], prefill.index)
    predictors = torch.cat([last_prefix, rest[:, :-1]], dim=1)
    selected_rows, columns = positions.nonzero(as_tuple=True)
    offsets = columns - cut_tensor[selected_rows]
    selected = _selected_logprobs(
        head(_at(predictors, selected_rows, offsets)), input_ids[selected_rows, columns], temperature
    )
    out = torch.zeros(input_ids.shape, dtype=selected.dtype, device=device)
    return out.index_put((selected_rows, columns), selected)


def _packed_logprobs(
    model: torch.nn.Module,
    decoder: torch.nn.Module,
    head: torch.nn.Linear,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    positions: torch.Tensor,
    temperature: float,
) -> torch.Tensor:
    """Log-probs at ``positions`` from two packed passes (:mod:`slca_grpo.engine.packed_attention`):
    each distinct prefix once — a row's prefix is everything before its first selected token, and
    the G rollouts of a prompt share it — then every row's rest on top of its prefix's cached keys.
    No padding reaches a product or the attention. Rows without a selected position are skipped."""
    device = input_ids.device
    lengths = attention_mask.sum(dim=1).tolist()
    has_any = positions.any(dim=1).tolist()
    cuts = positions.int().argmax(dim=1).tolist()  # each row's first selected position
    kept = [r for r in range(input_ids.shape[0]) if has_any[r]]
    distinct, source = distinct_rows(input_ids[r, : cuts[r]].tolist() for r in kept)

    prefix_spans, start = [], 0
    for sequence in distinct:
        prefix_spans.append((start, start + len(sequence)))
        start += len(sequence)
    prefix_ids = torch.tensor([token for sequence in distinct for token in sequence], device=device)
    prefix_positions = torch.cat([torch.arange(len(sequence), device=device) for sequence in distinct])
    cache = DynamicCache()
    with packed_pass(model, PackedLayout(prefix_spans, [()] * len(prefix_spans))):
        prefix_hidden = decoder(
            input_ids=prefix_ids[None], position_ids=prefix_positions[None], use_cache=True,
            **{cache_keyword(decoder): cache},
        ).last_hidden_state[0]  # fmt: skip

    rest_spans, start = [], 0
    for r in kept:
        rest_spans.append((start, start + lengths[r] - cuts[r]))
        start += lengths[r] - cuts[r]
    rest_ids = torch.cat([input_ids[r, cuts[r] : lengths[r]] for r in kept])
    rest_positions = torch.cat([torch.arange(cuts[r], lengths[r], device=device) for r in kept])
    layout = PackedLayout(rest_spans, [(prefix_spans[s],) for s in source])
    with packed_pass(model, layout):
        rest_hidden = decoder(
            input_ids=rest_ids[None], position_ids=rest_positions[None], use_cache=True,
            **{cache_keyword(decoder): cache},
        ).last_hidden_state[0]  # fmt: skip

    # The token at a row's cut is predicted by its prefix's last hidden state; a later one by the
    # rest's hidden state just before it.
    slot_of_row = torch.full((input_ids.shape[0],), -1, dtype=torch.long, device=device)
    slot_of_row[kept] = torch.arange(len(kept), device=device)
    selected_rows, columns = positions.nonzero(as_tuple=True)
    slot = slot_of_row[selected_rows]
    offsets = columns - torch.tensor(cuts, device=device)[selected_rows]
    prefix_last = torch.tensor([prefix_spans[s][1] - 1 for s in source], dtype=torch.long, device=device)
    rest_start = torch.tensor([span[0] for span in rest_spans], dtype=torch.long, device=device)
    index = torch.where(offsets == 0, prefix_last[slot], len(prefix_ids) + rest_start[slot] + offsets - 1)
    hidden = rows_at(torch.cat([prefix_hidden, rest_hidden]), index)
    selected = _selected_logprobs(head(hidden), input_ids[selected_rows, columns], temperature)
    out = torch.zeros(input_ids.shape, dtype=selected.dtype, device=device)
    return out.index_put((selected_rows, columns), selected)


def token_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    temperature: float = 1.0,
    start: int = 1,
    positions: torch.Tensor | None = None,
) -> torch.Tensor:
    """log p(token_t | tokens_<t) for positions t >= ``start`` (and, when ``positions`` — a [B, S]
    bool mask — is given, only where it is true); other positions are 0.

    Prompts are long and the vocabulary projection is a large share of a small model's cost, so
    logits are computed only where they are needed: at the selected positions for architectures
    with a plain output head, else from position ``start - 1`` on. On a CPU, attention runs in
    float32 under bf16 autocast and a right-padded batch without its padding mask
    (:func:`~slca_grpo.engine.attention.training_attention`: faster there).
    """
    with training_attention(model):
        return _token_logprobs(model, input_ids, attention_mask, temperature, start, positions)


def _token_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    temperature: float,
    start: int,
    positions: torch.Tensor | None,
) -> torch.Tensor:
    width = input_ids.shape[1]
    start = min(max(1, start), width)
    if positions is not None:
        positions = positions.bool().clone()
        positions[:, :start] = False
        parts = plain_head(model)
        if parts is not None:
            decoder, head = parts
            if input_ids.device.type == "cpu" and packs(model) and bool(positions.any()):
                return _packed_logprobs(model, decoder, head, input_ids, attention_mask, positions, temperature)
            shared = _shared_prefix_logprobs(decoder, head, input_ids, attention_mask, positions, temperature)
            if shared is not None:
                return shared
            hidden = decoder(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
            # The token at t is predicted from the hidden state at t - 1.
            rows, cols = positions.nonzero(as_tuple=True)
            selected = _selected_logprobs(head(_at(hidden, rows, cols - 1)), input_ids[rows, cols], temperature)
            out = torch.zeros(input_ids.shape, dtype=selected.dtype, device=selected.device)
            return out.index_put((rows, cols), selected)
    keep = width - start + 1
    if _accepts_logits_to_keep(model):
        logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, logits_to_keep=keep).logits
    else:
        logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits[:, -keep:, :]
    logprobs = _selected_logprobs(logits[:, :-1, :], input_ids[:, start:], temperature)
    logprobs = torch.nn.functional.pad(logprobs, (start, 0), value=0.0)
    return logprobs if positions is None else logprobs * positions
