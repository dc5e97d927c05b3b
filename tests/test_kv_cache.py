"""The sampler's in-place KV cache, grouped one-token attention and dropping of finished rows."""

from __future__ import annotations

import pytest
import torch
from decode_helpers import assert_same_samples, sample_two_turns, small_tokenizer, tiny_gqa_model, uneven_prompts

from slca_grpo.engine import token_logprobs
from slca_grpo.engine.kv_cache import (
    ATTENTION_NAME,
    attention_with_lse,
    attention_with_lse_by_products,
    autocast_keys,
    decode_attention,
    growing_cache,
)
from slca_grpo.engine.sampling import SamplingConfig, cache_keyword, sample


@pytest.fixture(scope="module")
def tokenizer():
    return small_tokenizer()


@pytest.fixture(scope="module")
def model(tokenizer):
    return tiny_gqa_model(tokenizer)


def _decode_steps(model, past, attention, last, tokens, steps):
    """Logits of ``steps`` one-token decode steps on a prefilled cache, feeding ``tokens[step]``
    (a [steps, rows] tensor) or, given a [rows] tensor, each step's own argmax."""
    out = []
    for step in range(steps):
        attention = torch.cat([attention, attention.new_ones((len(attention), 1))], dim=1)
        last = last + 1
        feed = tokens[step] if tokens.dim() == 2 else tokens
        output = model(
            input_ids=feed[:, None], attention_mask=attention, position_ids=last, past_key_values=past, use_cache=True
        )
        past = output.past_key_values
        out.append(output.logits[:, -1])
        tokens = tokens if tokens.dim() == 2 else output.logits[:, -1].argmax(-1)
    return torch.stack(out), past


def _decode(model, ids, attention, steps, cache, grouped):
    """Logits of ``steps`` greedy one-token decode steps after a left-padded prefill."""
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    extra = {"past_key_values": cache} if cache is not None else {}
    context = decode_attention(model) if grouped else torch.no_grad()
    with torch.no_grad(), context:
        output = model(input_ids=ids, attention_mask=attention, position_ids=positions, use_cache=True, **extra)
        first = output.logits[:, -1].argmax(-1)
        return _decode_steps(model, output.past_key_values, attention, positions[:, -1:], first, steps)


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
    import slca_grpo.engine.kv_cache as kv_cache

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


def _decode_fixed(model, prompts, tokens, cache, pad_id, *, block=True):
    """Logits of decode steps feeding the given ``tokens`` [steps, rows] after a shared-prompt prefill."""
    from slca_grpo.engine.sampling import distinct_rows, prefill_shared

    context = decode_attention(model, cache) if block else torch.no_grad()
    with torch.no_grad(), context:
        prefill = prefill_shared(model, *distinct_rows(prompts), pad_id=pad_id, device="cpu", past_key_values=cache)
        return _decode_steps(model, prefill.cache, prefill.attention, prefill.positions[:, -1:], tokens, len(tokens))


@pytest.fixture
def shared_at_any_width(monkeypatch):
    """Prompt sharing for the test's tiny model (by default only models at least 512 wide share)."""
    import slca_grpo.engine.kv_cache as kv_cache

    monkeypatch.setattr(kv_cache, "SHARED_PREFIX_MIN_HIDDEN", 0)


def test_only_wide_models_share_prompts_by_default(model):
    from transformers import LlamaConfig, LlamaForCausalLM

    from slca_grpo.engine.kv_cache import GrowingLayer, SharedPrefixLayer

    wide = LlamaForCausalLM(
        LlamaConfig(vocab_size=50, hidden_size=512, intermediate_size=64, num_hidden_layers=1, num_attention_heads=8)
    )
    assert growing_cache(wide).layer_class_to_replicate is SharedPrefixLayer
    assert growing_cache(wide, share_prefixes=False).layer_class_to_replicate is GrowingLayer
    assert growing_cache(model).layer_class_to_replicate is GrowingLayer  # 32 wide


@pytest.mark.parametrize("in_order", [False, True])
@pytest.mark.parametrize("bf16", [False, True])
def test_rows_of_a_prompt_share_its_cache_and_get_the_per_row_copies_logits(
    model, tokenizer, bf16, in_order, shared_at_any_width
):
    """Rows interleaved with 3, 2 and 1 per prompt (gathered by prompt at each step), or lying prompt
    by prompt, 2 each (as a group's rollouts do before any stops: the layout by prompt is a view)."""
    prompts = uneven_prompts(tokenizer)
    if in_order:
        prompts = [prompts[i] for i in (0, 2, 1, 5, 3, 3)]
    tokens = torch.randint(3, 200, (70, len(prompts)), generator=torch.Generator().manual_seed(0))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        copied, _ = _decode_fixed(model, prompts, tokens, growing_cache(model, share_prefixes=False), 0)
        shared, cache = _decode_fixed(model, prompts, tokens, growing_cache(model), 0)
    layer = cache.layers[0]
    assert layer.prefix is not None and layer.prefix.keys.shape[0] == 3  # one copy per prompt
    assert layer.prefix.group.tolist() == ([0, 0, 1, 1, 2, 2] if in_order else [0, 1, 0, 2, 0, 1])
    assert layer.prefix.plan.in_order == in_order
    assert layer.keys.shape[-2] == 70 and cache.get_seq_length() == layer.prefix_length() + 70
    # float32: rounding; bf16: one bfloat16 rounding of this model's logits (|logit| < 1) apart. The
    # tiny model's attention barely moves its logits, so SmolLM2's test below checks bf16 layouts.
    tolerance = 0.01 if bf16 else 1e-5
    assert torch.allclose(copied.float(), shared.float(), atol=tolerance)


def test_outside_its_block_a_shared_cache_copies_rows_and_hands_attention_whole_rows(
    model, tokenizer, shared_at_any_width
):
    prompts = uneven_prompts(tokenizer)
    tokens = torch.randint(3, 200, (5, len(prompts)), generator=torch.Generator().manual_seed(1))
    reference, _ = _decode_fixed(model, prompts, tokens, growing_cache(model, share_prefixes=False), 0)
    # No block at all: prefill copies rows, as GrowingLayer does.
    plain, cache = _decode_fixed(model, prompts, tokens, growing_cache(model), 0, block=False)
    assert cache.layers[0].prefix is None
    assert torch.allclose(plain, reference, atol=1e-5)
    # A prefix made in a block, decoded after it ended: every attention gets whole rows.
    _, cache = _decode_fixed(model, prompts, tokens[:1], growing_cache(model), 0)
    assert cache.layers[0].prefix is not None
    keys, _ = cache.layers[0].update(torch.zeros(6, 2, 1, 8), torch.zeros(6, 2, 1, 8))
    assert keys.shape[-2] == cache.get_seq_length()


def test_a_shared_layer_selects_repeats_and_crops_like_whole_rows(model, shared_at_any_width):
    from types import SimpleNamespace

    from slca_grpo.engine.kv_cache import SharedPrefixLayer, grouped_decode_attention

    cache = growing_cache(model)
    first = [torch.randn(2, 2, 5, 8) for _ in range(2)]
    with decode_attention(model, cache):
        cache.update(*first, 0)
        layer = cache.layers[0]
        assert isinstance(layer, SharedPrefixLayer)
        layer.batch_select_indices(torch.tensor([1, 0, 1]))
        step = [torch.randn(3, 2, 1, 8) for _ in range(2)]
        keys, values = layer.update(*step)
        assert keys.shape[-2] == 1  # the rows' own tokens: attention joins the prefix
        query = torch.randn(3, 4, 1, 8)
        whole = torch.nn.functional.scaled_dot_product_attention(
            query, *(t.repeat_interleave(2, dim=1) for t in layer.whole_rows())
        ).transpose(1, 2)
        for module in (SimpleNamespace(layer_idx=0), SimpleNamespace()):  # found by index, or by its keys
            out, _ = grouped_decode_attention(module, query, keys, values, None)
            assert torch.allclose(out, whole, atol=1e-6)
    expected = [torch.cat([t[[1, 0, 1]], s], dim=-2) for t, s in zip(first, step)]
    assert all(torch.equal(a, b) for a, b in zip(layer.whole_rows(), expected))
    layer.batch_select_indices(torch.tensor([2, 1]))  # rows dropped: the prefix stays, groups follow
    assert layer.prefix.group.tolist() == [1, 0]
    assert torch.equal(layer.whole_rows()[0], expected[0][[2, 1]])
    layer.batch_repeat_interleave(2)
    assert torch.equal(layer.whole_rows()[0], expected[0][[2, 2, 1, 1]])
    layer.crop(6)  # within the prefix's 5 + 1: still shared
    assert layer.prefix is not None and layer.get_seq_length() == 6
    layer.crop(3)  # into the prefix: rows become whole again
    assert layer.prefix is None and torch.equal(layer.keys, expected[0][[2, 2, 1, 1], :, :3])


def test_sampling_with_shared_prompts_gives_the_per_row_copies_tokens(
    model, tokenizer, monkeypatch, shared_at_any_width
):
    """The sampler's draws with rows dropped as they finish and later turns prefilled on a shared
    prompt: the same tokens and (to rounding) log-probs as with every row's cache its own."""
    import slca_grpo.engine.sampling as sampling

    made = []

    def run(share):
        monkeypatch.setattr(
            sampling, "growing_cache", lambda m: made.append(growing_cache(m, share_prefixes=share)) or made[-1]
        )
        return sample_two_turns(model, tokenizer)

    shared, copied = run(True), run(False)
    assert [cache.layers[0].prefix is not None for cache in made[:2]] == [True, True]
    assert_same_samples(shared, copied)


@pytest.mark.parametrize("in_order", [False, True])
def test_smollm2_shares_prompts_by_default_with_the_per_row_copies_logits(smollm2, in_order):
    """SmolLM2's architecture (30 layers, 9 query / 3 key-value heads, 576 wide: sharing is on by
    default), rows interleaved or prompt by prompt. float32: the per-row copies' logits to rounding.
    bf16 autocast: 30 layers of bf16 rounding part the two by up to ~0.4 in logits of ~15, so both
    are held to the float32 logits, and sharing must be no farther from them than the copies are."""
    model, tokenizer = smollm2
    a, b = tokenizer.encode("What is the weather in Paris today? Answer briefly."), tokenizer.encode("Hello there!")
    prompts = [a, a, b, b] if in_order else [a, b, a, a, b]
    tokens = torch.randint(300, 40000, (4, len(prompts)), generator=torch.Generator().manual_seed(2))
    reference, _ = _decode_fixed(model, prompts, tokens, growing_cache(model, share_prefixes=False), 0)
    shared, cache = _decode_fixed(model, prompts, tokens, growing_cache(model), 0)
    assert cache.layers[-1].prefix.group.tolist() == ([0, 0, 1, 1] if in_order else [0, 1, 0, 0, 1])
    assert cache.layers[-1].prefix.plan.in_order == in_order
    assert (reference - shared).abs().max() < 1e-4
    with torch.autocast("cpu", dtype=torch.bfloat16):
        copied, _ = _decode_fixed(model, prompts, tokens, growing_cache(model, share_prefixes=False), 0)
        shared, _ = _decode_fixed(model, prompts, tokens, growing_cache(model), 0)
    copied_error, shared_error = ((x.float() - reference).abs() for x in (copied, shared))
    assert shared_error.mean() <= 1.25 * copied_error.mean() and shared_error.max() < 1.0


def _wide_llama(seed: int = 0):
    """A 2-layer Llama 512 wide with grouped keys (8 query heads over 2), random weights."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=300, hidden_size=512, intermediate_size=256, num_hidden_layers=2, num_attention_heads=8,
        num_key_value_heads=2, attn_implementation="sdpa",
    )  # fmt: skip
    return LlamaForCausalLM(config).eval()


def test_prompts_of_different_lengths_prefill_one_by_one_with_the_padded_batchs_cache_and_logits(
    tokenizer, monkeypatch
):
    """On a CPU a wide model's distinct prompts prefill one at a time (no padding in the products);
    the cache holds each prompt's keys left-padded as the batch's did (zeros in the padding), and
    the last logits and the sampled tokens are the padded batch's to float32 rounding."""
    import slca_grpo.engine.sampling as sampling
    from slca_grpo.engine.sampling import distinct_rows, left_pad, prefill_shared

    model = _wide_llama()
    prompts = uneven_prompts(tokenizer)
    distinct, source = distinct_rows(prompts)
    width = max(len(p) for p in distinct)
    shapes = []
    model.register_forward_pre_hook(
        lambda _, args, kwargs: shapes.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )

    def prefill():
        cache = growing_cache(model)
        with torch.no_grad(), decode_attention(model, cache):
            options = {"logits_to_keep": 1, cache_keyword(model): cache}
            return prefill_shared(model, distinct, source, pad_id=0, device="cpu", **options)

    def greedy():
        return sample(
            model, prompts, max_new_tokens=6, config=SamplingConfig(temperature=0), stop_token_ids=[], pad_id=0
        )

    one_by_one, one_by_one_tokens = prefill(), greedy()
    assert shapes[:3] == [(1, len(p)) for p in distinct]
    monkeypatch.setattr(sampling, "_prefills_one_by_one", lambda *args: False)
    shapes.clear()
    batch, batch_tokens = prefill(), greedy()
    assert shapes[0] == (3, width)
    assert torch.allclose(one_by_one.output.logits, batch.output.logits, atol=1e-5)
    assert torch.equal(one_by_one.attention, batch.attention) and torch.equal(one_by_one.index, batch.index)
    kept = left_pad(distinct, 0)[1].bool()  # [3, width]
    for ours, theirs in zip(one_by_one.cache.layers, batch.cache.layers, strict=True):
        for part in ("keys", "values"):
            mine, batched = getattr(ours.prefix, part), getattr(theirs.prefix, part)  # [3, kv heads, width, dim]
            assert mine.shape == batched.shape
            assert torch.allclose(mine.transpose(1, 2)[kept], batched.transpose(1, 2)[kept], atol=1e-5)
            assert not mine.transpose(1, 2)[~kept].any()
    assert [g.token_ids for g in one_by_one_tokens] == [g.token_ids for g in batch_tokens]


def test_equal_lengths_gradients_and_narrow_models_keep_the_padded_batch(tokenizer, model):
    import slca_grpo.engine.sampling as sampling

    wide = _wide_llama()
    a, b = tokenizer.encode("hello there"), tokenizer.encode("what is the weather in Paris")

    def options(m, **extra):
        return {"logits_to_keep": 1, cache_keyword(m): growing_cache(m), **extra}

    with torch.no_grad():
        assert sampling._prefills_one_by_one(wide, [a, b], options(wide))
        assert not sampling._prefills_one_by_one(wide, [a, a[::-1]], options(wide))  # no padding to save
        assert not sampling._prefills_one_by_one(wide, [a, b], options(wide, logits_to_keep=0))  # every logit
        assert not sampling._prefills_one_by_one(wide, [a, b], {"logits_to_keep": 1})  # no cache
        assert not sampling._prefills_one_by_one(model, [a, b], options(model))  # 32 wide: its rounding kept
    assert not sampling._prefills_one_by_one(wide, [a, b], options(wide))  # gradients: one pass


def test_attention_by_products_is_the_cpu_flash_kernel_for_devices_without_it():
    """A later turn's prefill joins two attention passes by their log-sum-exps; off the CPU the
    passes run as three products (PyTorch's CPU flash kernel does not exist there): the same
    outputs and log-sum-exps wherever a query has something to attend to (a padding query, with
    nothing, is left undefined by both)."""
    generator = torch.Generator().manual_seed(0)
    query, keys, values = (torch.randn(3, 4, 5, 8, generator=generator) for _ in range(3))
    allowed = torch.rand(3, 1, 5, 5, generator=generator) > 0.3
    allowed[1, :, 2] = False  # query 2 of row 1 sees nothing
    allowed[0, :, :, 0] = True
    bias = torch.zeros(allowed.shape).masked_fill_(~allowed, float("-inf"))
    flash_out, flash_lse = attention_with_lse(query, keys, values, bias, 0.3)
    out, lse = attention_with_lse_by_products(query, keys, values, bias, 0.3)
    seen = allowed.any(dim=-1).expand(-1, 4, -1)  # [rows, heads, queries]
    assert not seen[1, :, 2].any() and seen.sum() > 50
    assert torch.allclose(lse[seen], flash_lse[seen], atol=1e-5)
    assert torch.allclose(out[seen], flash_out[seen], atol=1e-5)
