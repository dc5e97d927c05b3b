"""The C decode attention on bfloat16 caches (engine/native.py): the float64 attention to one
bfloat16 rounding; the float32 kernel's sums on the same numbers, rounded once; PyTorch's bfloat16
path on SmolLM2's shapes to bfloat16 tolerance; vdpbf16ps against the widening path; and the same
greedy tokens through the sampler with the kernel on and off."""

from __future__ import annotations

import pytest
import torch
from attention_helpers import decode_plan, problems, reference
from decode_helpers import sample_turns, small_tokenizer, tiny_gqa_model
from hypothesis import given, settings
from hypothesis import strategies as st

from slca_grpo.engine import kv_cache, native

ROUNDING = 2**-8  # bfloat16's unit roundoff: rounding moves a number by at most this share of it


@pytest.fixture(autouse=True)
def _kernels_built():
    if native.library() is None:
        pytest.skip("the C kernels could not be built here")


def _cache(dim, generator, *, rows=7, kv_heads=2, group=3, prompts=3, prefix=41, own=5):
    """A bfloat16 cache (own keys and values in a larger buffer, as the sampler's) and float32 queries."""
    query = torch.randn(rows, kv_heads, group, dim, generator=generator) * 3
    prefix_keys, prefix_values = (torch.randn(prompts, kv_heads, prefix, dim, generator=generator) for _ in "kv")
    keys, values = (torch.randn(rows, kv_heads, own + 2, dim, generator=generator) for _ in "kv")
    row_prompt = torch.randint(0, prompts, (rows,), generator=generator)
    mask = torch.ones(rows, 1, 1, prefix + own, dtype=torch.bool)
    mask[row_prompt == 0, :, :, :7] = False  # a prompt's left padding
    mask[1, :, :, prefix : prefix + 2] = False  # a gap in a row's own tokens
    bf16 = [t.bfloat16() for t in (prefix_keys, prefix_values, keys, values)]
    return query, *bf16[:2], row_prompt, bf16[2][:, :, :own], bf16[3][:, :, :own], mask, dim**-0.5


def _widened(query, prefix_keys, prefix_values, row_prompt, keys, values, mask, scale):
    """The float32 kernel's arguments holding the same numbers (the query rounded as the kernel rounds it)."""
    numbers = [t.float() for t in (query.bfloat16(), prefix_keys, prefix_values, keys, values)]
    return *numbers[:3], row_prompt, *numbers[3:], mask, scale


@settings(max_examples=40, deadline=None)
@given(problems(torch.bfloat16), st.booleans())
def test_the_kernel_computes_the_float64_attention_to_one_bfloat16_rounding(problem, bfloat16_query):
    query, *cache = problem
    out = native.prefix_decode_attention(query.bfloat16() if bfloat16_query else query, *cache)
    assert out is not None and out.dtype == torch.bfloat16
    expected = reference(query.bfloat16(), *cache)  # the query as the kernel rounds it
    assert torch.allclose(out.double(), expected, rtol=ROUNDING, atol=1e-5)


@pytest.mark.parametrize("dim", [8, 24, 64, 128])
def test_it_rounds_the_float32_kernels_sums_on_the_same_numbers_once(dim):
    """Widths that are not a multiple of 16 never take vdpbf16ps: there the output is the float32
    kernel's, rounded, bit for bit; vdpbf16ps sums in another order, so elsewhere it is within a
    rounding of it."""
    problem = _cache(dim, torch.Generator().manual_seed(dim))
    out = native.prefix_decode_attention(*problem)
    widened = native.prefix_decode_attention(*_widened(*problem))
    if dim % 16:
        assert torch.equal(out, widened.bfloat16())
    assert torch.allclose(out.float(), widened, rtol=ROUNDING, atol=1e-6)


@pytest.mark.skipif("avx512_bf16" not in native._cpu_features(), reason="this CPU has no vdpbf16ps")
def test_the_widening_path_is_the_float32_kernel_rounded_and_vdpbf16ps_agrees(monkeypatch):
    """The library built without AVX512_BF16 (as for a CPU that lacks it) widens at every width,
    SmolLM2's 64 included."""
    # Seed 0: on the AVX512_BF16 CPU this was written on, vdpbf16ps's order of sums moves one
    # number across a rounding, so the two builds are told apart.
    problem = _cache(64, torch.Generator().manual_seed(0))
    with_dpbf16, built = native.prefix_decode_attention(*problem), native.library()
    monkeypatch.setattr(native, "_tried", False)
    monkeypatch.setattr(native, "_library", None)
    monkeypatch.setenv("SLCA_NATIVE_CFLAGS", "-mno-avx512bf16")
    widening = native.prefix_decode_attention(*problem)
    assert widening is not None and native.library()._name != built._name
    assert torch.equal(widening, native.prefix_decode_attention(*_widened(*problem)).bfloat16())
    assert torch.allclose(with_dpbf16.float(), widening.float(), rtol=2 * ROUNDING, atol=1e-6)


@pytest.mark.parametrize("own", [0, 9])
@pytest.mark.parametrize("in_order", [False, True])
@pytest.mark.parametrize("query_dtype", [torch.float32, torch.bfloat16])
def test_on_smollm2s_shapes_it_gives_pytorchs_bf16_values(monkeypatch, own, in_order, query_dtype):
    """kv_cache.prefix_decode_attention on a bfloat16 cache through the kernel and through PyTorch's
    bfloat16 products: 9 query heads over 3, width 64, an odd prompt length, left padding, rows in
    or out of prompt order, a row whose own tokens are all masked (or no own tokens at all). PyTorch
    rounds its scores and weights to bfloat16 as well, so the two agree to bfloat16 tolerance and
    the kernel is the nearer to the float64 attention."""
    generator = torch.Generator().manual_seed(4)
    prompts, width, kv_heads, group, dim, prefix = 3, 2, 3, 3, 64, 53
    rows = prompts * width
    row_prompt = torch.arange(prompts).repeat_interleave(width)
    if not in_order:
        row_prompt = row_prompt[torch.randperm(rows, generator=generator)]
    prefix_keys, prefix_values = (torch.randn(prompts, kv_heads, prefix, dim, generator=generator) for _ in "kv")
    plan = decode_plan(row_prompt, width, prefix_keys.bfloat16(), prefix_values.bfloat16(), in_order)
    query = torch.randn(rows, kv_heads, group, dim, generator=generator).to(query_dtype)
    keys, values = (torch.randn(rows, kv_heads, own + 4, dim, generator=generator).bfloat16() for _ in "kv")
    keys, values = keys[:, :, :own], values[:, :, :own]
    mask = torch.ones(rows, 1, 1, prefix + own, dtype=torch.bool)
    mask[row_prompt == 1, :, :, :20] = False
    mask[0, :, :, prefix:] = False
    calls = native.calls["decode_attention"]
    fast = kv_cache.prefix_decode_attention(plan, query, keys, values, mask, dim**-0.5)
    assert native.calls["decode_attention"] == calls + 1
    monkeypatch.setattr(native, "prefix_decode_attention", lambda *a: None)
    products = kv_cache.prefix_decode_attention(plan, query, keys, values, mask, dim**-0.5)
    assert fast.dtype == products.dtype == torch.bfloat16
    assert torch.allclose(fast.float(), products.float(), rtol=1e-2, atol=1e-2)
    expected = reference(query.bfloat16(), plan.keys, plan.values, row_prompt, keys, values, mask, dim**-0.5)
    assert torch.allclose(fast.double(), expected, rtol=ROUNDING, atol=1e-5)
    assert (fast.double() - expected).abs().mean() <= (products.double() - expected).abs().mean()


def _smollm2_heads_model(vocab: int):
    """A 2-layer Llama with SmolLM2's head layout at toy size: 6 query heads over 2, width 64."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=384, intermediate_size=128, num_hidden_layers=2, num_attention_heads=6,
        num_key_value_heads=2, tie_word_embeddings=True,
    )  # fmt: skip
    return LlamaForCausalLM(config).float().eval()


@pytest.mark.parametrize("architecture", ["tiny", "smollm2-heads"])
def test_greedy_decoding_under_bf16_autocast_draws_the_same_tokens_with_the_kernel_on_and_off(
    monkeypatch, architecture
):
    """Three turns of rows on shared prompts (rows dropped as they finish), decoded by the fused
    step under bf16 autocast: the kernel (on) against PyTorch's bfloat16 products (off)."""
    import slca_grpo.engine.fused_decode as fused_decode

    monkeypatch.setattr(fused_decode, "FUSED_MIN_HIDDEN", 0)
    monkeypatch.setattr(kv_cache, "SHARED_PREFIX_MIN_HIDDEN", 0)
    tokenizer = small_tokenizer()
    model = tiny_gqa_model(tokenizer) if architecture == "tiny" else _smollm2_heads_model(len(tokenizer))
    drawn, served = {}, {}
    for switch in ("1", "0"):
        monkeypatch.setenv("SLCA_NATIVE_KERNELS", switch)
        calls = native.calls["decode_attention"]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            drawn[switch], _ = sample_turns(model, tokenizer, temperature=0.0)
        served[switch] = native.calls["decode_attention"] - calls
    assert served["1"] > 0 and served["0"] == 0
    for on_turn, off_turn in zip(drawn["1"], drawn["0"], strict=True):
        assert [g.token_ids for g in on_turn] == [g.token_ids for g in off_turn]
        for on, off in zip(on_turn, off_turn):
            assert torch.allclose(torch.tensor(on.logprobs), torch.tensor(off.logprobs), atol=0.05)
