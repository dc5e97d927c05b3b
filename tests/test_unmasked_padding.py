"""The CPU attention shortcuts of engine/attention.py: right-padded causal batches without their mask,
left-padded ones row by row, grouped keys and values uncopied."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from decode_helpers import small_tokenizer, tiny_gqa_model
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from slca_grpo.engine import attention, token_logprobs
from slca_grpo.engine.attention import (
    left_padded_causal,
    masked_sdpa,
    right_padded_causal,
    training_attention,
    unmasked_padding_attention,
)


def padded_mask(lengths, width: int) -> torch.Tensor:
    """[B, 1, W, W]: row b's first ``lengths[b]`` queries attend causally; padding queries attend
    to nothing (transformers' masks with torch >= 2.5)."""
    mask = torch.zeros((len(lengths), 1, width, width), dtype=torch.bool)
    for row, length in enumerate(lengths):
        mask[row, 0, :length, :length] = torch.ones((length, length), dtype=torch.bool).tril()
    return mask


def assert_describes(mask: torch.Tensor) -> None:
    """What :func:`right_padded_causal` promises of a mask it accepts: each row's queries that see
    their own key are its first ones, and each of them sees exactly keys [0, i]."""
    width = mask.shape[-1]
    for row in mask[:, 0]:
        own = row.diagonal()
        length = int(own.sum())
        assert own[:length].all()
        assert torch.equal(row[:length], torch.ones((length, width), dtype=torch.bool).tril()[:length])


lengths_and_width = st.integers(1, 10).flatmap(
    lambda width: st.tuples(st.lists(st.integers(0, width), min_size=1, max_size=4), st.just(width))
)


def flip_some(mask: torch.Tensor, data) -> torch.Tensor:
    """``mask`` with one to three entries drawn by hypothesis flipped."""
    rows, width = mask.shape[0], mask.shape[-1]
    for _ in range(data.draw(st.integers(1, 3))):
        row = data.draw(st.integers(0, rows - 1))
        i, k = data.draw(st.integers(0, width - 1)), data.draw(st.integers(0, width - 1))
        mask[row, 0, i, k] = ~mask[row, 0, i, k]
    return mask


@settings(max_examples=150, deadline=None)
@given(lengths_and_width)
def test_a_right_padded_causal_mask_is_recognised(batch):
    lengths, width = batch
    assert right_padded_causal(padded_mask(lengths, width))


@settings(max_examples=300, deadline=None)
@given(lengths_and_width, st.data())
def test_a_changed_mask_is_recognised_only_where_it_is_still_right_padded_causal(batch, data):
    lengths, width = batch
    mask = flip_some(padded_mask(lengths, width), data)
    if right_padded_causal(mask):
        assert_describes(mask)


def test_other_masks_are_not_right_padded_causal():
    left = padded_mask([6, 6], 6)
    left[1, 0] = False
    left[1, 0, 2:, 2:] = torch.ones((4, 4), dtype=torch.bool).tril()  # padding on the left
    window = padded_mask([6], 6)
    window[0, 0, 5, :2] = False  # a sliding window
    hole = padded_mask([6], 6)
    hole[0, 0, 3] = False  # a padding query before a valid one
    for mask in (
        left,
        window,
        hole,
        torch.ones((1, 1, 4, 4), dtype=torch.bool),  # bidirectional
        padded_mask([4, 2], 4).float(),  # an additive mask
        padded_mask([4], 4)[:, :, :3],  # queries after a cache
        padded_mask([4, 2], 4).expand(2, 2, 4, 4),  # one mask per head
    ):
        assert not right_padded_causal(mask)


def left_padded_mask(lengths, width: int) -> torch.Tensor:
    """[B, 1, W, W]: row b's last ``lengths[b]`` queries attend causally to the last ``lengths[b]``
    keys; padding queries attend to nothing."""
    mask = torch.zeros((len(lengths), 1, width, width), dtype=torch.bool)
    for row, length in enumerate(lengths):
        pad = width - length
        mask[row, 0, pad:, pad:] = torch.ones((length, length), dtype=torch.bool).tril()
    return mask


@settings(max_examples=150, deadline=None)
@given(lengths_and_width)
def test_a_left_padded_causal_mask_is_recognised_with_its_padding(batch):
    lengths, width = batch
    assert left_padded_causal(left_padded_mask(lengths, width)) == [width - n for n in lengths]


@settings(max_examples=300, deadline=None)
@given(lengths_and_width, st.data())
def test_a_changed_mask_is_recognised_only_where_it_is_still_left_padded_causal(batch, data):
    lengths, width = batch
    mask = flip_some(left_padded_mask(lengths, width), data)
    pads = left_padded_causal(mask)
    if pads is not None:  # each query after its row's padding sees exactly keys [pad, i]
        index = torch.arange(width)
        for row, pad in enumerate(pads):
            expected = (index[None, :] <= index[:, None]) & (index[None, :] >= pad)
            assert torch.equal(mask[row, 0, pad:], expected[pad:])
            assert not mask[row, 0, index[:pad], index[:pad]].any()


def test_other_masks_are_not_left_padded_causal():
    hole = left_padded_mask([6], 6)
    hole[0, 0, 4, 2] = False  # a valid query that skips a key
    for mask in (
        padded_mask([6, 4], 6),  # padding on the right
        hole,
        torch.ones((1, 1, 4, 4), dtype=torch.bool),  # bidirectional
        left_padded_mask([4, 2], 4).float(),  # an additive mask
        left_padded_mask([4], 4)[:, :, 1:],  # queries after a cache
    ):
        assert left_padded_causal(mask) is None


@pytest.mark.parametrize("width", [512, 64])
def test_a_left_padded_batch_runs_row_by_row_with_the_same_numbers(sdpa_calls, width):
    lengths, size = [7, 4, 1], 7
    mask = left_padded_mask(lengths, size)
    generator = torch.Generator().manual_seed(4)
    tensors = [torch.randn(3, heads, size, 8, generator=generator, requires_grad=True) for heads in (4, 2, 2)]
    valid = (torch.arange(size) >= torch.tensor([size - n for n in lengths])[:, None]).float()[:, :, None, None]
    weights = torch.randn(3, size, 4, 8, generator=generator) * valid  # what reads the outputs

    def run(function):
        out, _ = function(_module(width), *tensors, mask)
        assert torch.isfinite(out * valid).all()
        return out * valid, torch.autograd.grad((out * weights).sum(), tensors)

    ours, our_grads = run(masked_sdpa)
    if width >= 512:  # one causal call per row, without a mask, keys uncopied
        assert [(call.mask, call.key_heads) for call in sdpa_calls] == [(None, 2)] * 3
    else:  # narrower models keep transformers' way
        assert len(sdpa_calls) == 1 and sdpa_calls[0].mask is mask
    theirs, their_grads = run(sdpa_attention_forward)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
    for a, b in zip(our_grads, their_grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def _module(width: int = 512):
    return SimpleNamespace(config=SimpleNamespace(hidden_size=width), num_key_value_groups=2, is_causal=True)


def test_without_the_mask_every_valid_query_gets_the_masked_output_and_gradients(sdpa_calls):
    lengths, width = [9, 5, 7, 0], 9
    generator = torch.Generator().manual_seed(0)
    tensors = [
        torch.randn(len(lengths), heads, width, 8, generator=generator, requires_grad=True) for heads in (4, 2, 2)
    ]
    mask = padded_mask(lengths, width)
    valid = (torch.arange(width) < torch.tensor(lengths)[:, None]).float()[:, :, None, None]
    weights = torch.randn(len(lengths), width, 4, 8, generator=generator) * valid  # what reads the outputs

    def run(function):
        out, _ = function(_module(), *tensors, mask)
        assert torch.isfinite(out).all()
        return out * valid, torch.autograd.grad((out * weights).sum(), tensors)

    ours, our_grads = run(unmasked_padding_attention)
    assert sdpa_calls[-1].mask is None
    theirs, their_grads = run(sdpa_attention_forward)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
    for a, b in zip(our_grads, their_grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("lengths", "queries", "width", "why"),
    [
        ([6, 4], 6, 64, "a narrow model"),
        ([6, 4], 5, 512, "queries after a cache"),
    ],
)
def test_what_keeps_its_mask(sdpa_calls, lengths, queries, width, why):
    mask = padded_mask(lengths, 6)[:, :, 6 - queries :]
    q, k, v = torch.randn(2, 4, queries, 8), torch.randn(2, 2, 6, 8), torch.randn(2, 2, 6, 8)
    unmasked_padding_attention(_module(width), q, k, v, mask)
    assert len(sdpa_calls) == 1 and sdpa_calls[0].mask is mask, why


@pytest.mark.parametrize("width", [512, 64])
def test_a_kept_mask_gets_grouped_keys_uncopied_with_the_same_numbers(sdpa_calls, width):
    # Queries after a cache keep their mask; transformers would copy each key/value head per query head.
    mask = padded_mask([6, 4], 6)[:, :, 1:]
    generator = torch.Generator().manual_seed(3)
    tensors = [
        torch.randn(2, heads, length, 8, generator=generator, requires_grad=True)
        for heads, length in ((4, 5), (2, 6), (2, 6))
    ]
    weights = torch.randn(2, 5, 4, 8, generator=generator)

    def run(function):
        out, _ = function(_module(width), *tensors, mask)
        return out, torch.autograd.grad((out * weights).sum(), tensors)

    ours, our_grads = run(unmasked_padding_attention)
    theirs, their_grads = run(sdpa_attention_forward)
    assert [call.mask is mask for call in sdpa_calls] == [True, True]
    # Narrower models keep transformers' copies (and rounding), as for the dropped mask.
    assert [call.key_heads for call in sdpa_calls] == ([2, 4] if width >= 512 else [4, 4])
    torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-6)
    for a, b in zip(our_grads, their_grads):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_each_mask_is_checked_for_itself(sdpa_calls):
    q, k, v = torch.randn(2, 4, 6, 8), torch.randn(2, 2, 6, 8), torch.randn(2, 2, 6, 8)
    right = padded_mask([6, 4], 6)
    left = right.flip(-1).flip(-2)  # the same shape, padded on the left
    for mask, dropped in ((right, True), (right, True), (left, False), (right, True)):
        unmasked_padding_attention(_module(), q, k, v, mask)
        assert (sdpa_calls[-1].mask is None) == dropped


@pytest.fixture(scope="module")
def model():
    return tiny_gqa_model(small_tokenizer())


@pytest.fixture(autouse=True)
def padded_training_passes(monkeypatch):
    """The padded passes these shortcuts serve: where packed passes do not run (gradient
    checkpointing, a GPU, models off SDPA), as here with packing switched off."""
    import slca_grpo.engine.logprobs as batch_module

    monkeypatch.setattr(batch_module, "packs", lambda model: False)


def _training_pass(model, ids, mask, positions):
    model.zero_grad(set_to_none=True)
    logprobs = token_logprobs(model, ids, mask, positions=positions)
    logprobs.sum().backward()
    return logprobs.detach(), [p.grad.clone() for p in model.parameters()]


def test_a_right_padded_training_pass_attends_without_masks_to_the_same_numbers(model, monkeypatch, sdpa_calls):
    ids = torch.randint(3, 290, (4, 30), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    for row, length in enumerate((30, 22, 17, 26)):
        mask[row, length:] = 0
    positions = mask.bool() & (torch.arange(30) >= 12)
    masked, masked_grads = _training_pass(model, ids, mask, positions)
    assert sdpa_calls and all(call.mask is not None for call in sdpa_calls)
    sdpa_calls.clear()
    monkeypatch.setattr(attention, "UNMASKED_PADDING_MIN_HIDDEN", 0)  # the tiny model is 32 wide
    ours, our_grads = _training_pass(model, ids, mask, positions)
    assert sdpa_calls and all(call.mask is None for call in sdpa_calls)
    torch.testing.assert_close(ours, masked, atol=1e-5, rtol=1e-5)
    for a, b in zip(our_grads, masked_grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_the_training_switch_is_on_for_a_cpu_model_and_undone_after(model):
    with training_attention(model) as switched:
        assert switched and model.config._attn_implementation == attention.TRAINING_ATTENTION
    assert model.config._attn_implementation == "sdpa"


def test_a_training_pass_over_shared_prompts_runs_their_left_padded_prefill_row_by_row(model, monkeypatch, sdpa_calls):
    # Two prompts of different lengths, two rollouts each: the prompts run once, left-padded.
    generator = torch.Generator().manual_seed(2)
    prompts = [torch.randint(3, 290, (n,), generator=generator) for n in (14, 9)]
    rows = [
        torch.cat([prompts[r // 2], torch.randint(3, 290, (n,), generator=generator)])
        for r, n in enumerate((6, 3, 5, 8))
    ]
    width = max(len(r) for r in rows)
    ids = torch.zeros((4, width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for r, row in enumerate(rows):
        ids[r, : len(row)], mask[r, : len(row)] = row, 1
    positions = mask.bool() & (torch.arange(width) >= torch.tensor([14, 14, 9, 9])[:, None])
    plain, plain_grads = _training_pass(model, ids, mask, positions)
    assert not any(call.mask is None and call.key_heads == 2 for call in sdpa_calls)
    sdpa_calls.clear()
    monkeypatch.setattr(attention, "UNMASKED_PADDING_MIN_HIDDEN", 0)  # the tiny model is 32 wide
    ours, our_grads = _training_pass(model, ids, mask, positions)
    layers = model.config.num_hidden_layers
    assert sum(call.mask is None for call in sdpa_calls) == 2 * layers  # each prompt, each layer, once
    torch.testing.assert_close(ours, plain, atol=1e-5, rtol=1e-5)
    for a, b in zip(our_grads, plain_grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
