"""Batched KV-cached sampling from a Hugging Face causal LM, token-exact, with log-probs.

A lean loop instead of ``model.generate``: rollouts need per-row stop tokens and stop strings,
the sampled ids exactly as sampled, and the log-prob of each under the sampling temperature (the
same quantity the trainer recomputes). Rollouts that share a prompt prefill it once, which makes
it ~2.4x TRL's ``generate``-based rollouts on the tiny model (``benchmarks/throughput.py``).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer

from slca_grpo.datatypes import STOP_EOS, STOP_LENGTH, STOP_STRING, Generation
from slca_grpo.engine import kv_cache
from slca_grpo.engine.fused_decode import FusedDecoder
from slca_grpo.engine.kv_cache import GrowingLayer, decode_attention, growing_cache
from slca_grpo.engine.packed_linear import packed_linears
from slca_grpo.engine.packed_prefill import packed_rest_prefill, packs_rests
from slca_grpo.engine.turn_cache import TurnCache

MIN_TEMPERATURE = 0.01  # below it, sample greedily: temperature 0


class NonFiniteLogits(ValueError):
    """The model's logits were NaN or infinite: its weights or activations have overflowed, and
    whatever it generated would be scored as if it meant something."""


@dataclass(frozen=True)
class SamplingConfig:
    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0
    top_k: int = 0  # 0: every token

    def __post_init__(self) -> None:
        # Checked here, where every sampler starts: a tinier temperature overflows the logits to
        # inf (the softmax of inf is NaN), and NaN, a top_p outside (0, 1] or a negative top_k would
        # otherwise sample a fixed token or greedily without a word.
        if not (self.temperature == 0 or MIN_TEMPERATURE <= self.temperature < float("inf")):
            raise ValueError(f"temperature must be 0 (greedy) or at least {MIN_TEMPERATURE}, got {self.temperature!r}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise ValueError(f"top_k must be a whole number >= 0 (0: every token), got {self.top_k!r}")


def _filter_logits(logits: torch.Tensor, config: SamplingConfig) -> torch.Tensor:
    if config.top_k > 0 and config.top_k < logits.shape[-1]:
        kth = torch.topk(logits, config.top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if config.top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
        cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
        # Drop tokens once the mass *before* them exceeds top_p (the top token always stays).
        drop_sorted = (cumulative - torch.softmax(sorted_logits, dim=-1)) > config.top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def _forward_options(model: torch.nn.Module) -> tuple[str, bool]:
    """The KV-cache keyword of this model's forward (transformers renamed ``past_key_values`` to
    ``cache`` in 5.x) and whether it can skip computing logits for all but the last position."""
    return cache_keyword(model), "logits_to_keep" in inspect.signature(model.forward).parameters


def cache_keyword(module: torch.nn.Module) -> str:
    """The KV-cache keyword of ``module.forward`` (``cache`` from transformers 5.x on)."""
    return "cache" if "cache" in inspect.signature(module.forward).parameters else "past_key_values"


def output_cache(output: Any) -> Any:
    for name in ("cache", "past_key_values"):
        value = output.get(name) if hasattr(output, "get") else getattr(output, name, None)
        if value is not None:
            return value
    return None


def select_cache_rows(past: Any, index: torch.Tensor) -> Any:
    """The cache with its batch rows picked by ``index`` (a ``transformers`` Cache, a legacy
    tuple of per-layer tensors, or a plain tensor)."""
    layers = getattr(past, "layers", None)
    plain = DynamicLayer.batch_select_indices
    if layers is not None and all(type(layer).batch_select_indices is plain for layer in layers):
        # transformers' layers pick rows as keys[index], whose backward (a training pass's
        # gradients into a shared prompt) adds in thread order; index_select's adds in index order
        # (logprobs.rows_at).
        for layer in layers:
            if layer.get_seq_length() > 0:
                layer.keys, layer.values = layer.keys.index_select(0, index), layer.values.index_select(0, index)
        return past
    if hasattr(past, "batch_select_indices"):
        past.batch_select_indices(index)
        return past
    if isinstance(past, torch.Tensor):
        return past.index_select(0, index)
    if isinstance(past, (tuple, list)):
        return type(past)(select_cache_rows(item, index) for item in past)
    return past


def left_pad(sequences: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, sequence in enumerate(sequences):
        if sequence:
            ids[row, width - len(sequence) :] = torch.tensor(list(sequence), dtype=torch.long)
            mask[row, width - len(sequence) :] = 1
    return ids, mask


def distinct_rows(sequences: Iterable[Sequence[int]]) -> tuple[list[tuple[int, ...]], list[int]]:
    """The distinct sequences in first-seen order, and for each input row the index of its own."""
    distinct: dict[tuple[int, ...], int] = {}
    source = [distinct.setdefault(tuple(s), len(distinct)) for s in sequences]
    return list(distinct), source


@dataclass
class SharedPrefill:
    output: Any  # the forward output over the distinct prefixes, one row each
    cache: Any  # its KV cache with rows copied out to one per input row (None if the model gives none)
    attention: torch.Tensor  # [rows, width] left-padded prefix mask, one row per input row
    positions: torch.Tensor  # [rows, width] position ids, one row per input row
    index: torch.Tensor  # input row -> distinct-prefix row


def prefill_shared(
    module: torch.nn.Module,
    distinct: Sequence[Sequence[int]],
    source: Sequence[int],
    *,
    pad_id: int,
    device: torch.device,
    **forward_kwargs: Any,
) -> SharedPrefill:
    """Run each distinct prefix once (left-padded, with a KV cache) and copy the cache rows to
    the input rows that share it (``source`` from :func:`distinct_rows`)."""
    input_ids, attention = left_pad(distinct, pad_id)
    input_ids, attention = input_ids.to(device), attention.to(device)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    if _prefills_one_by_one(module, distinct, forward_kwargs):
        output = _prefill_one_by_one(module, distinct, attention.shape[1], forward_kwargs)
    else:
        output = module(
            input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True, **forward_kwargs
        )
    cache = output_cache(output)
    index = torch.tensor(list(source), dtype=torch.long, device=device)
    if cache is not None and len(distinct) < len(source):
        cache = select_cache_rows(cache, index)
    return SharedPrefill(output, cache, attention[index], positions[index], index)


def _prefills_one_by_one(module: torch.nn.Module, distinct: Sequence[Sequence[int]], forward_kwargs: dict) -> bool:
    """Whether prompts of different lengths prefill one by one: on a CPU, without gradients, into
    the sampler's empty cache, for a model at least ``SHARED_PREFIX_MIN_HIDDEN`` wide (the tiny
    models keep the padded batch and its float32 rounding), when only the last logits are kept."""
    cache = forward_kwargs.get(cache_keyword(module))
    config = getattr(module, "config", None)
    return (
        len({len(s) for s in distinct}) > 1
        and not torch.is_grad_enabled()
        and forward_kwargs.get("logits_to_keep") == 1
        and isinstance(cache, DynamicCache)
        and not cache.layers
        and isinstance(cache.layer_class_to_replicate, type)
        and issubclass(cache.layer_class_to_replicate, GrowingLayer)
        and getattr(config, "hidden_size", 0) >= kv_cache.SHARED_PREFIX_MIN_HIDDEN
        and next(module.parameters()).device.type == "cpu"
    )


def _prefill_one_by_one(
    module: torch.nn.Module, distinct: Sequence[Sequence[int]], width: int, forward_kwargs: dict
) -> SimpleNamespace:
    """The padded batch's prefill, one prompt at a time: on a CPU a left-padded batch pays for its
    padding in every product (a quarter of the SmolLM2 preset's first prefill). Each prompt's keys
    and values go into the caller's cache left-padded to ``width`` (zeros where the batch had
    padding, which the attention mask hides either way). Returns the last logits and the cache."""
    name = cache_keyword(module)
    cache, kwargs = forward_kwargs[name], {k: v for k, v in forward_kwargs.items() if k != name}
    logits, caches = [], []
    for sequence in distinct:
        ids = torch.tensor([list(sequence)], dtype=torch.long)
        output = module(
            input_ids=ids,
            position_ids=torch.arange(len(sequence))[None],
            use_cache=True,
            **{name: kv_cache.growing_cache(module, share_prefixes=False)},
            **kwargs,
        )
        logits.append(output.logits[:, -1:])
        caches.append(output_cache(output))
    for index in range(len(caches[0].layers)):
        layers = [c.layers[index] for c in caches]
        heads, dim = layers[0].keys.shape[1], layers[0].keys.shape[-1]
        keys = layers[0].keys.new_zeros((len(distinct), heads, width, dim))
        values = layers[0].values.new_zeros((len(distinct), heads, width, layers[0].values.shape[-1]))
        for row, layer in enumerate(layers):
            length = layer.keys.shape[-2]
            keys[row, :, width - length :] = layer.keys[0]
            values[row, :, width - length :] = layer.values[0]
        cache.update(keys, values, index)
    return SimpleNamespace(logits=torch.cat(logits), cache=cache)


def prefill_prefixes(
    module: torch.nn.Module,
    sequences: Sequence[Sequence[int]],
    prefix_lengths: Sequence[int],
    *,
    pad_id: int,
    device: torch.device,
    **forward_kwargs: Any,
) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Prefill rows whose first ``prefix_lengths[r]`` tokens are shared with other rows (a group's
    prompt, in later turns): each distinct prefix runs once, its cache rows are copied to the rows
    that share it, and each row's own rest runs on top. Returns (cache, attention, positions, last
    logits), one row per sequence; the attention has a padding gap between prefix and rest."""
    prefixes = [tuple(s[:n]) for s, n in zip(sequences, prefix_lengths)]
    first = prefill_shared(module, *distinct_rows(prefixes), pad_id=pad_id, device=device, **forward_kwargs)
    rests = [list(s[n:]) for s, n in zip(sequences, prefix_lengths)]
    cache, attention, positions, logits = _prefill_rests(
        module, first.cache, first.attention, first.attention.sum(-1), rests, pad_id=pad_id, **forward_kwargs
    )
    empty = torch.tensor([not r for r in rests], device=device)
    if empty.any():
        logits = torch.where(empty[:, None], first.output.logits[:, -1, :][first.index], logits)
    return cache, attention, positions, logits


def _single_token_stop_strings(stop_strings: Sequence[str], encode) -> tuple[set[int], list[str]]:
    """(ids of stop strings that are one token, the other stop strings)."""
    ids, strings = set(), []
    for text in stop_strings:
        encoded = list(encode(text)) if encode is not None else []
        if len(encoded) == 1:
            ids.add(encoded[0])
        else:
            strings.append(text)
    return ids, strings


@torch.no_grad()
def sample(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: Sequence[int] | int,
    config: SamplingConfig,
    stop_token_ids: Sequence[int],
    pad_id: int,
    stop_strings: Sequence[str] = (),
    decode=None,
    encode=None,
    generator: torch.Generator | None = None,
    prefix_lengths: Sequence[int] | None = None,
    turn_cache: TurnCache | None = None,
    row_keys: Sequence[Hashable] | None = None,
) -> list[Generation]:
    """Sample a continuation for every prompt until a stop token, a stop string or its budget.

    The stop token or the token completing a stop string is kept in ``token_ids``. ``decode``
    (ids -> text) is needed for stop strings; with ``encode`` (text -> ids), a stop string that is
    a single token is matched as a stop id instead. ``prefix_lengths``: how many leading tokens of
    each prompt other rows may share (a rollout's prompt, after its first turn); shared prefixes
    are prefilled once. ``turn_cache`` with ``row_keys`` (one key per row, the same in every call
    of a batch of rollouts): each row starts from its cache of the last call where that holds the
    start of its prompt, and leaves its cache there for the next (:mod:`.turn_cache`).
    """
    batch = len(prompts)
    budgets = [max_new_tokens] * batch if isinstance(max_new_tokens, int) else list(max_new_tokens)
    results = [Generation([], [], STOP_LENGTH) for _ in range(batch)]
    active = [budget > 0 for budget in budgets]
    if not any(active):
        return results
    device = next(model.parameters()).device
    # A stop string that is one token of the vocabulary is a stop id: no per-row decoding.
    string_stop_ids, stop_strings = _single_token_stop_strings(stop_strings, encode)
    stop_ids = torch.tensor(sorted({*stop_token_ids, *string_stop_ids}), dtype=torch.long, device=device)
    tail_window = max((len(s) for s in stop_strings), default=0) + 16

    cache_name, can_keep_last = _forward_options(model)
    extra = {"logits_to_keep": 1} if can_keep_last else {}
    cache = growing_cache(model)
    if cache is not None:
        extra[cache_name] = cache
    # Asked before the block below swaps the model's attention.
    pack_rests = turn_cache is not None and packs_rests(model)
    with decode_attention(model, cache), packed_linears(model):
        # Rollouts of one group share their prompt: prefill each distinct prompt once, then copy
        # its cache rows (and last logits) to every rollout that starts from it. In later turns the
        # rows differ after the prompt: the prompt still runs once, each row's rest on top of it.
        # (Full-attention models only: a sliding-window cache keeps transformers' own layout.)
        keeping = turn_cache is not None and row_keys is not None and cache is not None
        restored = turn_cache.restore(cache, row_keys, prompts, device=device) if keeping else None
        distinct, source = distinct_rows(prompts)
        shared_prefixes = prefix_lengths is not None and cache is not None
        if restored is not None and pack_rests:
            past, attention, positions, logits = packed_rest_prefill(model, cache, *restored)
        elif restored is not None:
            past, attention, positions, logits = _prefill_rests(model, cache, *restored, pad_id=pad_id, **extra)
        elif shared_prefixes and len({tuple(p[:n]) for p, n in zip(prompts, prefix_lengths)}) < len(distinct):
            past, attention, positions, logits = prefill_prefixes(
                model, prompts, prefix_lengths, pad_id=pad_id, device=device, **extra
            )
        else:
            prefill = prefill_shared(model, distinct, source, pad_id=pad_id, device=device, **extra)
            past, attention, positions = prefill.cache, prefill.attention, prefill.positions
            logits = prefill.output.logits[:, -1, :][prefill.index]
        last_position = positions[:, -1:]
        decode_start = attention.shape[1]
        rows = list(range(batch))  # batch row -> result row; finished rows are dropped now and then
        # Decode steps by the fused step where it applies (Llama / Qwen2 on a CPU), else the layers.
        fused = FusedDecoder.for_sampler(model, past, batch) if max(budgets) > 1 else None
        for _ in range(max(budgets)):
            logits = logits.float()
            if config.temperature > 0:
                scaled = logits / config.temperature
                logprobs_all = torch.log_softmax(scaled, dim=-1)
                probs = torch.softmax(_filter_logits(scaled, config), dim=-1)
                # Inverse-CDF draw: one uniform per row and a binary search, far cheaper on CPU
                # than torch.multinomial or a noise tensor the size of the vocabulary. Drawn for
                # every result row (on the generator's device, the CPU by default), so a seed
                # gives the same tokens whichever rows are still decoding and wherever the model is.
                draw_device = generator.device if generator is not None else probs.device
                uniform = torch.rand((batch, 1), generator=generator, device=draw_device).to(probs.device)
                if len(rows) < batch:
                    uniform = uniform[rows]
                cumulative = probs.cumsum(dim=-1)
                uniform = uniform * cumulative[:, -1:]
                tokens = torch.searchsorted(cumulative, uniform, right=True).squeeze(1)
                tokens = tokens.clamp_(max=probs.shape[-1] - 1)
            else:
                logprobs_all = torch.log_softmax(logits, dim=-1)
                tokens = logits.argmax(dim=-1)
            token_logprobs = logprobs_all.gather(1, tokens[:, None]).squeeze(1).tolist()
            if not all(math.isfinite(value) for value in token_logprobs):  # NaN logits make NaN log-probs
                raise NonFiniteLogits(
                    "the model's logits are not finite (NaN or infinite) while sampling: its weights or "
                    "activations have overflowed, so nothing it generates can be scored"
                )
            is_stop = torch.isin(tokens, stop_ids).tolist()
            token_list = tokens.tolist()
            for index, row in enumerate(rows):
                if not active[row]:
                    continue
                result = results[row]
                result.token_ids.append(token_list[index])
                result.logprobs.append(token_logprobs[index])
                if is_stop[index]:
                    result.stop_reason = STOP_STRING if token_list[index] in string_stop_ids else STOP_EOS
                    active[row] = False
                elif stop_strings and decode is not None:
                    tail = decode(result.token_ids[-tail_window:])
                    # Checked every step, so a stop string in the tail was completed by this token.
                    if any(s in tail for s in stop_strings):
                        result.stop_reason, active[row] = STOP_STRING, False
                if active[row] and len(result.token_ids) >= budgets[row]:
                    active[row] = False
            still = [index for index, row in enumerate(rows) if active[row]]
            if not still:
                break
            if len(still) <= len(rows) // 2 and past is not None:
                # Half the rows are done: stop decoding them (their cache rows are dropped, or kept).
                if keeping:
                    done = [index for index, row in enumerate(rows) if not active[row]]
                    _keep(turn_cache, past, attention, decode_start, done, rows, row_keys, prompts, results)
                keep = torch.tensor(still, dtype=torch.long, device=device)
                past = select_cache_rows(past, keep)
                attention, last_position, tokens = attention[keep], last_position[keep], tokens[keep]
                rows = [rows[index] for index in still]
            # Finished rows still in the batch decode a pad (their tokens are discarded), so the
            # cache stays rectangular.
            live = torch.tensor([active[row] for row in rows], device=device)
            next_input = torch.where(live, tokens, torch.full_like(tokens, pad_id))
            attention = torch.cat([attention, attention.new_ones((len(rows), 1))], dim=1)
            last_position = last_position + 1
            if fused is not None:
                logits = fused.step(past, next_input, attention, last_position)
            else:
                output = model(
                    input_ids=next_input[:, None],
                    attention_mask=attention,
                    position_ids=last_position,
                    use_cache=True,
                    **{cache_name: past},
                )
                past = output_cache(output)
                logits = output.logits[:, -1, :]
        if keeping:
            _keep(turn_cache, past, attention, decode_start, range(len(rows)), rows, row_keys, prompts, results)
            turn_cache.finish_call()
    return results


def _keep(turn_cache, past, attention, decode_start, indices, rows, row_keys, prompts, results) -> None:
    """Keep the batch rows ``indices`` (``rows``: batch row -> result row) in ``turn_cache``."""
    turn_cache.keep(
        past,
        attention,
        decode_start,
        list(indices),
        [row_keys[rows[i]] for i in range(len(rows))],
        [prompts[rows[i]] for i in range(len(rows))],
        [results[rows[i]].token_ids for i in range(len(rows))],
    )


def _prefill_rests(
    module: torch.nn.Module,
    cache: Any,
    cached_attention: torch.Tensor,
    cached_tokens: torch.Tensor,
    rests: Sequence[Sequence[int]],
    *,
    pad_id: int,
    **forward_kwargs: Any,
) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Prefill each row's new tokens ``rests`` (left-padded) on top of its cache (``cached_tokens``:
    the real tokens in it): (cache, attention, positions, last logits)."""
    device = cached_attention.device
    rest_ids, rest_mask = left_pad(rests, pad_id)
    rest_ids, rest_mask = rest_ids.to(device), rest_mask.to(device)
    # A row without new tokens keeps its last position (its logits are the caller's).
    positions = (cached_tokens[:, None] + rest_mask.cumsum(-1) - 1).clamp(min=0)
    attention = torch.cat([cached_attention, rest_mask], dim=1)
    cache_name = cache_keyword(module)
    kwargs = {k: v for k, v in forward_kwargs.items() if k != cache_name}
    output = module(
        input_ids=rest_ids,
        attention_mask=attention,
        position_ids=positions,
        use_cache=True,
        **{cache_name: cache},
        **kwargs,
    )
    return output_cache(output), attention, positions, output.logits[:, -1, :]
