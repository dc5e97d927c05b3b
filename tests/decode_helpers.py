"""Shared pieces of the sampler's decode tests: a small tokenizer, prompts that share, two-turn sampling."""

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


def assert_same_samples(ours, theirs, atol: float = 1e-5) -> None:
    """The same tokens in every turn and row, and their log-probs to ``atol``."""
    for our_turn, their_turn in zip(ours, theirs, strict=True):
        assert [g.token_ids for g in our_turn] == [g.token_ids for g in their_turn]
        for a, b in zip(our_turn, their_turn):
            assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=atol)
