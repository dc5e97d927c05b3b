"""The sampler's in-place KV cache, grouped one-token attention and dropping of finished rows."""

from __future__ import annotations

import pytest
import torch

from slca_grpo.models.tiny import TinyModelConfig, build_tiny_model
from slca_grpo.models.tokenizer import train_tokenizer
from slca_grpo.rollout.kv_cache import ATTENTION_NAME, autocast_keys, decode_attention, growing_cache
from slca_grpo.rollout.sampling import SamplingConfig, sample
from slca_grpo.trainer.batch import token_logprobs


@pytest.fixture(scope="module")
def tokenizer():
    texts = ["what is the weather in Paris today", "book a table for two please at eight", "hello there"] * 5
    return train_tokenizer(texts, vocab_size=300)


@pytest.fixture(scope="module")
def model(tokenizer):
    # Grouped-query attention (4 query heads share 2 key/value heads), as the reader has.
    config = TinyModelConfig(num_layers=2, hidden_size=32, num_heads=4, num_kv_heads=2, intermediate_size=64, seed=5)
    return build_tiny_model(tokenizer, config)


def _decode(model, ids, attention, steps, cache, grouped):
    """Logits of ``steps`` one-token decode steps after a left-padded prefill."""
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    extra = {"past_key_values": cache} if cache is not None else {}
    context = decode_attention(model) if grouped else torch.no_grad()
    out = []
    with torch.no_grad(), context:
        output = model(input_ids=ids, attention_mask=attention, position_ids=positions, use_cache=True, **extra)
        past, last = output.past_key_values, positions[:, -1:]
        tokens = output.logits[:, -1].argmax(-1)
        for _ in range(steps):
            attention = torch.cat([attention, attention.new_ones((len(ids), 1))], dim=1)
            last = last + 1
            output = model(
                input_ids=tokens[:, None],
                attention_mask=attention,
                position_ids=last,
                past_key_values=past,
                use_cache=True,
            )
            past = output.past_key_values
            out.append(output.logits[:, -1])
            tokens = output.logits[:, -1].argmax(-1)
    return torch.stack(out), past


def _batch(tokenizer):
    rows = [tokenizer.encode("what is the weather in Paris"), tokenizer.encode("hello")]
    width = max(map(len, rows))
    ids = torch.full((2, width), tokenizer.pad_token_id)
    attention = torch.zeros((2, width), dtype=torch.long)
    for index, row in enumerate(rows):
        ids[index, width - len(row) :] = torch.tensor(row)
        attention[index, width - len(row) :] = 1
    return ids, attention


def test_the_in_place_cache_gives_the_dynamic_caches_logits_and_grows_past_its_room(model, tokenizer):
    ids, attention = _batch(tokenizer)
    reference, _ = _decode(model, ids, attention, 90, None, grouped=False)
    ours, cache = _decode(model, ids, attention, 90, growing_cache(model), grouped=False)
    assert torch.equal(reference, ours)
    assert cache.get_seq_length() == ids.shape[1] + 90 > 64  # the first buffer had 64 spare rows


def test_grouped_one_token_attention_matches_sdpa_with_padding(model, tokenizer):
    ids, attention = _batch(tokenizer)
    reference, _ = _decode(model, ids, attention, 12, None, grouped=False)
    grouped, _ = _decode(model, ids, attention, 12, None, grouped=True)
    assert torch.allclose(reference, grouped, atol=1e-5)
    assert model.config._attn_implementation == "sdpa"  # restored after the block


def test_the_attention_switch_is_restored_after_an_error(model):
    with pytest.raises(RuntimeError), decode_attention(model):
        assert model.config._attn_implementation == ATTENTION_NAME
        raise RuntimeError("boom")
    assert model.config._attn_implementation == "sdpa"


def test_rows_dropped_when_finished_leave_the_others_token_exact(model, tokenizer):
    """Rows stop at different steps (so the batch shrinks); every row's sampled log-probs are
    still those of a fresh forward over its own context, and the draws do not depend on the
    other rows: sampling a row with company gives what it gives alone with the same stream."""
    prompts = [tokenizer.encode("what is the weather"), tokenizer.encode("book a table for two please")] * 3
    budgets = [2, 3, 40, 4, 40, 1]
    generations = sample(
        model,
        prompts,
        max_new_tokens=budgets,
        config=SamplingConfig(temperature=1.0),
        stop_token_ids=[],
        pad_id=tokenizer.pad_token_id,
        generator=torch.Generator().manual_seed(7),
    )
    assert [len(g.token_ids) for g in generations] == budgets
    for prompt, generation in zip(prompts, generations):
        ids = torch.tensor([prompt + generation.token_ids])
        recomputed = token_logprobs(model, ids, torch.ones_like(ids), start=len(prompt))[0, len(prompt) :]
        assert torch.allclose(recomputed, torch.tensor(generation.logprobs), atol=1e-4)
    # The same draws with every row kept to the end: identical tokens for the rows both decode.
    full = sample(
        model,
        prompts,
        max_new_tokens=[40] * 6,
        config=SamplingConfig(temperature=1.0),
        stop_token_ids=[],
        pad_id=tokenizer.pad_token_id,
        generator=torch.Generator().manual_seed(7),
    )
    for short, long in zip(generations, full):
        assert long.token_ids[: len(short.token_ids)] == short.token_ids


def test_models_with_sliding_windows_keep_their_own_cache(model):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, use_sliding_window=True, sliding_window=8,
    )  # fmt: skip
    assert growing_cache(Qwen2ForCausalLM(config)) is None
    assert growing_cache(model) is not None


def test_under_bf16_autocast_keys_are_stored_in_bf16_and_sampling_is_bit_identical(model, tokenizer, monkeypatch):
    """Rotary embeddings give float32 keys beside bfloat16 values under autocast; attention casts
    the keys to bfloat16 anyway, so storing them cast gives the very same tokens and log-probs."""
    import slca_grpo.rollout.kv_cache as kv_cache

    prompts = [tokenizer.encode("what is the weather"), tokenizer.encode("book a table for two please")] * 2

    def run():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return sample(
                model,
                prompts,
                max_new_tokens=24,
                config=SamplingConfig(temperature=1.0),
                stop_token_ids=[],
                pad_id=tokenizer.pad_token_id,
                generator=torch.Generator().manual_seed(3),
            )

    stored = []
    real = kv_cache.autocast_keys
    monkeypatch.setattr(kv_cache, "autocast_keys", lambda k, v: stored.append(real(k, v).dtype) or real(k, v))
    cast = run()
    monkeypatch.setattr(kv_cache, "autocast_keys", lambda k, v: k)  # the float32 keys, as before
    kept = run()
    assert stored and set(stored) == {torch.bfloat16}
    assert [g.token_ids for g in cast] == [g.token_ids for g in kept]
    assert [g.logprobs for g in cast] == [g.logprobs for g in kept]


def test_keys_are_left_alone_outside_autocast():
    keys, values = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4).bfloat16()
    assert autocast_keys(keys, values) is keys
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert autocast_keys(keys, keys) is keys  # float32 values: nothing to match
        assert autocast_keys(keys, values).dtype == torch.bfloat16
