"""The C decode attention (engine/native.py): values against float64 and PyTorch's path; and the C
library's build cache and the fallback where it cannot be built."""

from __future__ import annotations

import math
import os
import warnings

import pytest
import torch
from attention_helpers import decode_plan, problems, reference
from hypothesis import given, settings

from slca_grpo.engine import kv_cache, native


@pytest.fixture
def rebuilt(monkeypatch):
    """A fresh start for the once-per-process build (restored afterwards)."""
    monkeypatch.setattr(native, "_tried", False)
    monkeypatch.setattr(native, "_library", None)


@settings(max_examples=60, deadline=None)
@given(problems())
def test_the_kernel_computes_the_attention_in_float64_to_float32_rounding(problem):
    out = native.prefix_decode_attention(*problem)
    assert out is not None and out.dtype == torch.float32
    expected = reference(*problem)
    assert torch.allclose(out.double(), expected, atol=2e-5, rtol=1e-5)


def test_by_hand_masked_keys_are_left_out_and_the_weights_follow_the_scores():
    """One query (x = e0) over a prompt of three keys, the first masked (a huge score it must not
    get), and one own key: scores 0, ln 3, 0 -> weights 1/5, 3/5, 1/5 of values 5e0, 5e1, 5e2."""
    dim = 8
    query = torch.zeros(1, 1, 1, dim)
    query[..., 0] = 1.0
    prefix_keys = torch.zeros(1, 1, 3, dim)
    prefix_keys[0, 0, 0, 0] = 100.0
    prefix_keys[0, 0, 2, 0] = math.log(3)
    prefix_values = torch.zeros(1, 1, 3, dim)
    prefix_values[0, 0, 0, 7] = 1000.0
    prefix_values[0, 0, 1, 0] = prefix_values[0, 0, 2, 1] = 5.0
    keys, values = torch.zeros(1, 1, 1, dim), torch.zeros(1, 1, 1, dim)
    values[0, 0, 0, 2] = 5.0
    mask = torch.tensor([False, True, True, True]).view(1, 1, 1, 4)
    out = native.prefix_decode_attention(query, prefix_keys, prefix_values, torch.tensor([0]), keys, values, mask, 1.0)
    assert torch.allclose(out.view(dim), torch.tensor([1.0, 3.0, 1.0, 0, 0, 0, 0, 0]), atol=1e-6)


@pytest.mark.parametrize("in_order", [False, True])
def test_the_shared_prefix_attention_gives_pytorchs_values_through_the_kernel(monkeypatch, in_order):
    """kv_cache.prefix_decode_attention with the kernel and without it (PyTorch's products); a
    bfloat16 cache takes the kernel's bfloat16 entry (its values: tests/test_native_attention_bf16.py)."""
    generator = torch.Generator().manual_seed(1)
    prompts, width, kv_heads, group, dim, prefix, own = 3, 2, 3, 3, 64, 50, 9
    rows = prompts * width
    row_prompt = torch.arange(prompts).repeat_interleave(width)
    order = torch.arange(rows) if in_order else torch.randperm(rows, generator=generator)
    row_prompt = row_prompt[order]
    prefix_keys, prefix_values = (torch.randn(prompts, kv_heads, prefix, dim, generator=generator) for _ in range(2))
    plan = decode_plan(row_prompt, width, prefix_keys, prefix_values, in_order)
    query = torch.randn(rows, kv_heads, group, dim, generator=generator)
    keys, values = (torch.randn(rows, kv_heads, own + 4, dim, generator=generator)[:, :, :own] for _ in "kv")
    mask = torch.ones(rows, 1, 1, prefix + own, dtype=torch.bool)
    mask[row_prompt == 1, :, :, :20] = False
    computed = []
    real = native.prefix_decode_attention
    monkeypatch.setattr(native, "prefix_decode_attention", lambda *a: computed.append(real(*a)) or computed[-1])
    fast = kv_cache.prefix_decode_attention(plan, query, keys, values, mask, dim**-0.5)
    bf16_plan = decode_plan(row_prompt, width, prefix_keys.bfloat16(), prefix_values.bfloat16(), in_order)
    kv_cache.prefix_decode_attention(bf16_plan, query, keys.bfloat16(), values.bfloat16(), mask, dim**-0.5)
    assert [getattr(out, "dtype", None) for out in computed] == [torch.float32, torch.bfloat16]  # both in C
    monkeypatch.setattr(native, "prefix_decode_attention", lambda *a: None)
    products = kv_cache.prefix_decode_attention(plan, query, keys, values, mask, dim**-0.5)
    assert fast.dtype == products.dtype == torch.float32
    assert torch.allclose(fast, products, atol=1e-5)


def test_layouts_it_does_not_take_are_left_to_pytorch():
    query = torch.randn(2, 1, 2, 8)
    keys = torch.randn(1, 1, 4, 8)
    own = torch.randn(2, 1, 3, 8)
    rows = torch.tensor([0, 0])
    assert native.prefix_decode_attention(query, keys, keys, rows, own, own, None, 1.0) is not None
    half_keys, half_own = keys.half(), own.half()
    assert native.prefix_decode_attention(query, half_keys, half_keys, rows, half_own, half_own, None, 1.0) is None
    assert native.prefix_decode_attention(query, keys.bfloat16(), keys.bfloat16(), rows, own, own, None, 1.0) is None
    odd_query, odd_keys, odd_own = torch.randn(2, 1, 2, 12), torch.randn(1, 1, 4, 12), torch.randn(2, 1, 3, 12)
    assert native.prefix_decode_attention(odd_query, odd_keys, odd_keys, rows, odd_own, odd_own, None, 1.0) is None
    additive = torch.zeros(2, 1, 1, 7)
    assert native.prefix_decode_attention(query, keys, keys, rows, own, own, additive, 1.0) is None


def test_the_build_is_cached_by_source_compiler_and_cpu(rebuilt, monkeypatch, tmp_path):
    monkeypatch.setenv("SLCA_GRPO_CACHE", str(tmp_path))
    assert native.library() is not None
    built = list((tmp_path / "native").glob("kernels-*.so"))
    assert len(built) == 1
    stamp = built[0].stat().st_mtime_ns
    monkeypatch.setattr(native, "_tried", False)
    monkeypatch.setattr(native, "_library", None)
    assert native.library() is not None
    assert [p.stat().st_mtime_ns for p in (tmp_path / "native").glob("*.so")] == [stamp]  # reused, not rebuilt
    # No partial files left: the library and the record of its digest, nothing else.
    assert sorted(p.suffix for p in (tmp_path / "native").iterdir()) == [".sha256", ".so"]
    monkeypatch.setattr(native, "_tried", False)
    monkeypatch.setattr(native, "_cpu_features", lambda: "flags : another cpu")
    assert native.library() is not None
    assert len(list((tmp_path / "native").glob("*.so"))) == 2  # another CPU: its own build
    monkeypatch.setattr(native, "_tried", False)
    monkeypatch.setenv("SLCA_NATIVE_CFLAGS", "-march=x86-64-v3")  # for AVX2-only CPUs
    assert native.library() is not None
    assert len(list((tmp_path / "native").glob("*.so"))) == 3


def test_without_a_working_compiler_it_warns_once_and_pytorch_decodes(rebuilt, monkeypatch, tmp_path):
    monkeypatch.setenv("SLCA_GRPO_CACHE", str(tmp_path))
    failing = tmp_path / "cc"
    failing.write_text("#!/bin/sh\necho 'no such luck' >&2\nexit 1\n")
    failing.chmod(0o755)
    monkeypatch.setenv("CC", str(failing))
    query, keys, own = torch.randn(2, 1, 2, 8), torch.randn(1, 1, 4, 8), torch.randn(2, 1, 3, 8)
    with pytest.warns(RuntimeWarning, match="C decode kernels are unavailable.*no such luck"):
        assert native.prefix_decode_attention(query, keys, keys, torch.tensor([0, 0]), own, own, None, 1.0) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        assert native.library() is None
    assert not list(tmp_path.glob("native/*"))


def test_switched_off_it_is_not_built(rebuilt, monkeypatch, tmp_path):
    monkeypatch.setenv("SLCA_GRPO_CACHE", str(tmp_path))
    monkeypatch.setenv("SLCA_NATIVE_KERNELS", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert native.library() is None
    assert not os.path.exists(tmp_path / "native")
