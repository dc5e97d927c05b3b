"""The C product of a few rows by a packed float32 weight (engine/native.py, csrc/small_product.c):
values against float64 at any shape, packed_linear's choice of it, and oneDNN where it is not built."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from slca_grpo.engine import native, packed_linear

pytestmark = pytest.mark.skipif(native.library() is None, reason="the C kernels could not be built here")


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 64),
    out_features=st.integers(1, 100),
    in_features=st.integers(1, 80),
    with_bias=st.booleans(),
    leading=st.sampled_from([(), (1,)]),
    seed=st.integers(0, 2**16),
)
def test_the_product_equals_float64_at_any_shape(rows, out_features, in_features, with_bias, leading, seed):
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(out_features, in_features, generator=generator)
    x = torch.randn(rows, *leading, in_features, generator=generator)
    bias = torch.randn(out_features, generator=generator) if with_bias else None
    out = native.small_product(x, native.pack_panels(weight), bias)
    expected = x.double() @ weight.double().T + (0 if bias is None else bias.double())
    assert out.shape == (rows, *leading, out_features) and out.dtype == torch.float32
    # float32 sums of in_features products of unit normals: error grows like sqrt(in_features)
    assert torch.allclose(out.double(), expected, rtol=0, atol=1e-5 * (in_features**0.5 + 1) * 4)


def test_a_hand_computed_product_with_a_part_panel_and_bias():
    width = native.library().slca_panel_width()
    weight = torch.zeros(width + 2, 3)  # one full panel and two columns of a second
    weight[0] = torch.tensor([1.0, 2.0, 3.0])
    weight[width] = torch.tensor([-1.0, 0.0, 0.5])
    weight[width + 1] = torch.tensor([0.0, 4.0, 0.0])
    bias = torch.zeros(width + 2)
    bias[width + 1] = 10.0
    x = torch.tensor([[1.0, 1.0, 2.0], [0.0, -1.0, 4.0]])
    out = native.small_product(x, native.pack_panels(weight), bias)
    assert out[:, 0].tolist() == [9.0, 10.0]  # 1 + 2 + 6, 0 - 2 + 12
    assert out[:, width].tolist() == [0.0, 2.0]  # -1 + 0 + 1, 0 + 0 + 2
    assert out[:, width + 1].tolist() == [14.0, 6.0]  # 4 + 10, -4 + 10
    assert not out[:, 1:width].any()


def test_rows_or_a_bias_of_the_wrong_kind_are_an_error():
    panels = native.pack_panels(torch.randn(8, 4))
    with pytest.raises(ValueError, match="float32 CPU rows of 4"):
        native.small_product(torch.randn(2, 5), panels, None)
    with pytest.raises(ValueError, match="float32 CPU rows of 4"):
        native.small_product(torch.randn(2, 4).bfloat16(), panels, None)
    with pytest.raises(ValueError, match="bias must be 8 values"):
        native.small_product(torch.randn(2, 4), panels, torch.randn(7))  # would read past its end


def test_joined_weights_multiply_in_one_call_with_their_outputs_side_by_side():
    first, second, third = torch.nn.Linear(24, 40), torch.nn.Linear(24, 33), torch.nn.Linear(24, 8, bias=False)
    x = torch.randn(5, 24)
    joined = packed_linear.pack_linears([first, second, third], torch.float32, 5)
    bias = torch.cat([first.bias, second.bias, torch.zeros(8)]).detach()
    expected = torch.cat([first(x), second(x), third(x)], dim=-1).detach()
    assert torch.allclose(packed_linear.packed_product(x, joined, bias), expected, atol=1e-5)
    # one packed copy per layer, shared: packing again reuses it until the weight changes
    assert packed_linear.linear_panels(first) is packed_linear.linear_panels(first)
    assert joined.parts[0] is packed_linear.linear_panels(first).parts[0]
    with torch.no_grad():
        first.weight.mul_(2.0)
    assert packed_linear.linear_panels(first).parts[0] is not joined.parts[0]
    with pytest.raises(ValueError, match="one input width"):
        native.join_panels([native.pack_panels(torch.randn(4, 24)), native.pack_panels(torch.randn(4, 16))])


def test_only_float32_weights_are_packed_into_panels():
    linear = torch.nn.Linear(8, 16)
    assert isinstance(packed_linear.pack_linears([linear], torch.float32, 4), native.Panels)
    assert not isinstance(packed_linear.pack_linears([linear], torch.bfloat16, 4), native.Panels)
    assert native.pack_panels(linear.weight.bfloat16()) is None
    assert native.pack_panels(torch.randn(2, 3, 4)) is None


def test_without_the_kernels_float32_weights_go_to_onednn(monkeypatch):
    monkeypatch.setattr(native, "library", lambda: None)
    linear, x = torch.nn.Linear(24, 40, bias=False), torch.randn(5, 24)
    packed = packed_linear.pack_linears([linear], torch.float32, 5)
    assert not isinstance(packed, native.Panels)
    assert torch.allclose(packed_linear.packed_product(x, packed, None), x @ linear.weight.detach().T, atol=1e-5)
