"""Linear layers with packed weights while a rollout decodes: the same products, used only where
they apply, repacked when a weight changes, and the model left as it was."""

from __future__ import annotations

import weakref

import pytest
import torch
from decode_helpers import small_tokenizer

from slca_grpo.engine import native, packed_linear
from slca_grpo.engine.packed_linear import packed_linears, packing_available
from slca_grpo.engine.sampling import SamplingConfig, sample
from slca_grpo.models.tiny import TinyModelConfig, build_tiny_model

pytestmark = pytest.mark.skipif(not packing_available(), reason="this torch build has no oneDNN linear ops")


@pytest.fixture(scope="module")
def tokenizer():
    return small_tokenizer()


@pytest.fixture(scope="module")
def wide_model(tokenizer):
    """One layer as wide as SmolLM2's (576 ≥ 512), so its linear layers are packed; Qwen2's
    query/key/value projections carry a bias, which the packed product must add too."""
    config = TinyModelConfig(num_layers=1, hidden_size=576, num_heads=9, num_kv_heads=3, intermediate_size=1024, seed=2)
    return build_tiny_model(tokenizer, config).eval()


def _sample(model, tokenizer, *, bf16: bool):
    prompts = [tokenizer.encode("what is the weather"), tokenizer.encode("book a table for two please")] * 2
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        return sample(
            model,
            prompts,
            max_new_tokens=12,
            config=SamplingConfig(temperature=1.0),
            stop_token_ids=[],
            pad_id=tokenizer.pad_token_id,
            generator=torch.Generator().manual_seed(4),
        )


@pytest.mark.parametrize("bf16", [False, True])
def test_sampling_with_packed_weights_gives_the_plain_products_log_probs(wide_model, tokenizer, monkeypatch, bf16):
    with packed_linears(wide_model) as wrapped:  # the sampler's own block reuses this one
        packed = _sample(wide_model, tokenizer, bf16=bf16)
    assert len(wrapped) == 8  # q, k, v, o, gate, up, down and the head
    if bf16 and not packed_linear.onednn_packs(torch.bfloat16):
        assert all(w.calls == 0 for w in wrapped)  # an AVX2-only CPU: oneDNN cannot pack bf16
    else:
        assert all(w.calls > 0 for w in wrapped)
    monkeypatch.setattr(packed_linear, "packing_available", lambda: False)
    plain = _sample(wide_model, tokenizer, bf16=bf16)
    tolerance = 2e-2 if bf16 else 1e-4  # the same product up to the order of its sums
    for ours, theirs in zip(packed, plain):
        assert torch.allclose(torch.tensor(ours.logprobs), torch.tensor(theirs.logprobs), atol=tolerance)
    if not bf16:
        assert [g.token_ids for g in packed] == [g.token_ids for g in plain]


def test_prefill_sized_inputs_keep_the_plain_product_in_bf16_and_autograd_everywhere(wide_model):
    x = torch.randn(1, 100, 576)  # 100 rows > MAX_ROWS
    with packed_linears(wide_model, max_rows=64) as wrapped:
        layer = wrapped[0].module
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            layer(x)
        rows = torch.randn(4, 1, 576, requires_grad=True)
        out = layer(rows)  # autograd on: the packed ops have no backward
        assert out.grad_fn is not None
        assert wrapped[0].calls == 0
        with torch.no_grad():
            layer(rows)
        assert wrapped[0].calls == 1


@pytest.mark.skipif(native.library() is None, reason="the C kernels could not be built here")
def test_float32_prefill_sized_inputs_go_to_the_c_kernel(wide_model, monkeypatch):
    x = torch.randn(1, 100, 576)
    layer = wide_model.model.layers[0].self_attn.q_proj  # with a bias
    expected = torch.nn.functional.linear(x, layer.weight, layer.bias)
    with torch.no_grad(), packed_linears(wide_model, max_rows=64) as wrapped:
        wrapper = next(w for w in wrapped if w.module is layer)
        out = layer(x)
        assert wrapper.calls == 1 and out.shape == (1, 100, layer.out_features)
        assert torch.allclose(out, expected, atol=1e-4)
    monkeypatch.setattr(native, "library", lambda: None)  # not built: oneDNN's packing, the plain product
    monkeypatch.setattr(packed_linear, "_float32_panels", weakref.WeakKeyDictionary())
    with torch.no_grad(), packed_linears(wide_model, max_rows=64) as wrapped:
        wrapper = next(w for w in wrapped if w.module is layer)
        assert torch.equal(layer(x), expected)
        assert wrapper.calls == 0


def test_a_bias_changed_in_place_or_a_weight_replaced_is_packed_again(wide_model):
    """Under bf16 autocast the packed bias is a copy, and two fresh weights share version 0: the
    cache must notice both."""
    layer = wide_model.model.layers[0].self_attn.q_proj  # Qwen2's query projection has a bias
    weight, bias = layer.weight, layer.bias
    x = torch.randn(3, 1, layer.in_features)

    def plain():
        return torch.nn.functional.linear(x, layer.weight, layer.bias)

    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16), packed_linears(wide_model):
            layer(x)
            layer.bias.add_(1.0)
            assert torch.allclose(layer(x).float(), plain().float(), atol=2e-2)
            layer.weight = torch.nn.Parameter(weight.detach().clone())
            layer(x)
            layer.weight = torch.nn.Parameter(2.0 * weight.detach())
            assert torch.allclose(layer(x).float(), plain().float(), atol=5e-2)
    finally:
        with torch.no_grad():
            bias.sub_(1.0)
        layer.weight = weight


def test_a_weight_changed_in_place_is_packed_again(wide_model):
    layer = wide_model.model.layers[0].mlp.down_proj
    original = layer.weight.detach().clone()
    x = torch.randn(3, 1, layer.in_features)
    try:
        with torch.no_grad(), packed_linears(wide_model):
            before = layer(x)
            layer.weight.mul_(2.0)
            after = layer(x)
        assert torch.allclose(before, torch.nn.functional.linear(x, original), atol=1e-4)
        assert torch.allclose(after, torch.nn.functional.linear(x, 2.0 * original), atol=1e-4)
    finally:
        with torch.no_grad():
            layer.weight.copy_(original)


def test_the_model_is_left_as_it_was_after_an_error_and_nested_blocks_pack_once(wide_model):
    with pytest.raises(RuntimeError), packed_linears(wide_model) as outer:
        assert outer
        with packed_linears(wide_model) as inner:
            assert inner == []
        raise RuntimeError("boom")
    assert not any("forward" in m.__dict__ for m in wide_model.modules())


def test_narrow_models_are_not_packed(tokenizer):
    narrow = build_tiny_model(tokenizer, TinyModelConfig(num_layers=1, hidden_size=32, intermediate_size=64))
    with packed_linears(narrow) as wrapped:
        assert wrapped == []


def test_where_onednn_cannot_pack_a_dtype_the_joined_weights_multiply_plainly(wide_model, monkeypatch):
    monkeypatch.setattr(packed_linear, "onednn_packs", lambda dtype: False)
    linears = [wide_model.model.layers[0].self_attn.q_proj, wide_model.model.layers[0].self_attn.k_proj]
    packed = packed_linear.pack_linears(linears, torch.bfloat16, rows=4)
    assert isinstance(packed, packed_linear.PlainWeight)
    x = torch.randn(4, linears[0].in_features).to(torch.bfloat16)
    expected = torch.cat([torch.nn.functional.linear(x, linear.weight.to(torch.bfloat16)) for linear in linears], -1)
    torch.testing.assert_close(packed_linear.packed_product(x, packed, None), expected)
