"""Shared pieces of the sampler's decode tests: a small tokenizer, prompts that share, sampling over turns."""

from __future__ import annotations

import torch

from slca_grpo.engine.sampling import SamplingConfig, sample
from slca_grpo.models.tiny import TinyModelConfig, build_tiny_model
from slca_grpo.models.tokenizer import train_tokenizer


def small_tokenizer():
    """A 300-token BPE tokenizer trained on a few phrases (the tiny test models' vocabulary)."""
    texts = ["what is the weather in Paris today", "book a table for two please at eight", "hello there"] * 5
    return train_tokenizer(texts, vocab_size=300)


def tiny_gqa_model(tokenizer, *, layers: int = 2, seed: int = 5):
    """A tiny Qwen2 (biased query/key/value projections) with grouped-query attention, 4 query heads
    over 2 key/value heads, as the reader has."""
    config = TinyModelConfig(
        num_layers=layers, hidden_size=32, num_heads=4, num_kv_heads=2, intermediate_size=64, seed=seed
    )
    return build_tiny_model(tokenizer, config)


def uneven_prompts(tokenizer) -> list[list[int]]:
    a, b, c = (tokenizer.encode(t) for t in ("what is the weather in Paris", "hello", "book a table for two"))
    return [a, b, a, c, a, b]  # three prompts with 3, 2 and 1 rows, interleaved


def sample_two_turns(model, tokenizer):
    """The sampler's draws for :func:`uneven_prompts` with rows stopping at different budgets (so
    finished rows are dropped), then a second turn prefilled on the shared prompts."""
    prompts = uneven_prompts(tokenizer)
    rests = [tokenizer.encode(t) for t in ("the answer", "", "is", "sunny today", "", "ok")]
    turns = [p + r for p, r in zip(prompts, rests)]
    return [
        sample(
            model,
            rows,
            max_new_tokens=[3, 30, 9, 30, 1, 30],
            config=SamplingConfig(temperature=1.0),
            stop_token_ids=[],
            pad_id=tokenizer.pad_token_id,
            generator=torch.Generator().manual_seed(11),
            prefix_lengths=lengths,
        )
        for rows, lengths in ((prompts, None), (turns, [len(p) for p in prompts]))
    ]


def sample_turns(model, tokenizer, turn_cache=None, *, temperature: float = 0.0):
    """Three turns of six rows on three prompts, each later turn from ``turn_cache`` (a
    ``TurnCache``) or, with None, a full prefill: rows stop at different budgets (so finished rows
    are dropped mid-call), each later turn injects text of a different length per row, and a row
    that answered leaves after turn one. Returns each turn's generations and every row's text."""
    prompts = uneven_prompts(tokenizer)
    sequences = {row: list(p) for row, p in enumerate(prompts)}
    injected = [tokenizer.encode(t) for t in ("the answer is", "ok", "sunny today in Paris", "two", "hello there")]
    budgets = {row: b for row, b in enumerate([3, 12, 7, 12, 1, 9])}
    generator = torch.Generator().manual_seed(3)
    calls, rows = [], list(range(6))
    for turn in range(3):
        generations = sample(
            model,
            [sequences[r] for r in rows],
            max_new_tokens=[budgets[r] for r in rows],
            config=SamplingConfig(temperature=temperature),
            stop_token_ids=[],
            pad_id=tokenizer.pad_token_id,
            generator=generator,
            prefix_lengths=[len(prompts[r]) for r in rows],
            turn_cache=turn_cache,
            row_keys=rows if turn_cache is not None else None,
        )
        calls.append(generations)
        for r, g in zip(rows, generations):
            sequences[r] += g.token_ids + injected[(r + turn) % len(injected)]
        rows = [r for r in rows if r != 1 or turn > 0]  # row 1 answered in turn one
    return calls, sequences


def assert_same_samples(ours, theirs, atol: float = 1e-5) -> None:
    """The same tokens in every turn and row, and their log-probs to ``atol``."""
    for our_turn, their_turn in zip(ours, theirs, strict=True):
        assert [g.token_ids for g in our_turn] == [g.token_ids for g in their_turn]
        for a, b in zip(our_turn, their_turn):
            assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=atol)
