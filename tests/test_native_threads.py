"""The C kernels give the same bits on any number of threads: each task (a prompt and key/value
head of the attention, a weight panel of the product) is computed whole by one thread and no sum
crosses tasks, so a thread team that shrinks under load, or a run on another thread count, cannot
change a run's numbers through them."""

from __future__ import annotations

import contextlib

import pytest
import torch
from attention_helpers import problems
from hypothesis import given, settings
from hypothesis import strategies as st

from slca_grpo.engine import native

pytestmark = pytest.mark.skipif(native.library() is None, reason="the C kernels could not be built here")

THREAD_COUNTS = (1, 2, 3, 5)  # more threads than tasks or cores as well


@contextlib.contextmanager
def threads(count: int):
    before = torch.get_num_threads()
    torch.set_num_threads(count)  # the OpenMP team the kernels' parallel loops get
    try:
        yield
    finally:
        torch.set_num_threads(before)


def on_each_thread_count(compute) -> list[torch.Tensor]:
    outs = []
    for count in THREAD_COUNTS:
        with threads(count):
            outs.append(compute())
    return outs


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([torch.float32, torch.bfloat16]).flatmap(problems))
def test_the_attention_is_bit_identical_on_any_thread_count(problem):
    outs = on_each_thread_count(lambda: native.prefix_decode_attention(*problem))
    if outs[0] is None:  # this build has no kernel for the precision
        assert all(out is None for out in outs)
        return
    assert all(torch.equal(out, outs[0]) for out in outs[1:])


@settings(max_examples=25, deadline=None)
@given(
    rows=st.integers(1, 40),
    out_features=st.integers(1, 300),
    in_features=st.integers(1, 200),
    seed=st.integers(0, 2**16),
)
def test_the_small_product_is_bit_identical_on_any_thread_count(rows, out_features, in_features, seed):
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(out_features, in_features, generator=generator)
    x = torch.randn(rows, in_features, generator=generator)
    bias = torch.randn(out_features, generator=generator)
    packed = on_each_thread_count(lambda: native.pack_panels(weight))
    assert all(torch.equal(p.parts[0], packed[0].parts[0]) for p in packed[1:])
    outs = on_each_thread_count(lambda: native.small_product(x, packed[0], bias))
    assert all(torch.equal(out, outs[0]) for out in outs[1:])
