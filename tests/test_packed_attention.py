"""Packed training passes: the padded pass's log-probs and gradients without its padding, and
gradients that are the same bits whatever the load."""

import pytest
import torch
from decode_helpers import tiny_gqa_model

import slca_grpo.engine.logprobs as batch_module
from slca_grpo.engine import token_logprobs
from slca_grpo.engine.logprobs import rows_at
from slca_grpo.engine.packed_attention import PackedLayout, packed_attention, packed_pass, packs
from slca_grpo.models.tokenizer import train_tokenizer
from slca_grpo.trainer.batch import pad_sequences


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(["what is the weather in Paris today", "book a table for two at eight"], vocab_size=300)


def _batch(tokenizer, *, groups=3, per_group=4, seed=0, empty_row=False):
    """Prompts of different lengths × rollouts with tool-response gaps (unlearned tokens)."""
    generator = torch.Generator().manual_seed(seed)
    vocab = len(tokenizer) - 1
    sequences, masks = [], []
    for group in range(groups):
        prompt = torch.randint(1, vocab, (9 + 7 * group,), generator=generator).tolist()
        for rollout in range(per_group):
            response = torch.randint(1, vocab, (6 + 5 * rollout + group,), generator=generator).tolist()
            sequences.append(prompt + response)
            masks.append([0] * len(prompt) + [1, 1, 0, 0, 0] + [1] * (len(response) - 5))
    if empty_row:  # a rollout that learns nothing (all of it void, say)
        masks[1] = [0] * len(masks[1])
    return pad_sequences(sequences, masks, pad_id=tokenizer.pad_token_id)


def _logprobs_and_grads(model, batch, *, packed, monkeypatch):
    monkeypatch.setattr(batch_module, "packs", lambda m: packed and packs(m))
    model.zero_grad()
    positions = batch.loss_mask > 0
    out = token_logprobs(model, batch.input_ids, batch.attention_mask, start=batch.first_learnable, positions=positions)
    (out * torch.linspace(0.5, 1.5, out.numel()).view(out.shape)).sum().backward()
    return out.detach(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("case", ["groups", "distinct prompts", "a row with nothing to learn"])
def test_packed_passes_give_the_padded_passes_logprobs_and_gradients(tokenizer, monkeypatch, case):
    model = tiny_gqa_model(tokenizer, seed=3)
    options = {
        "groups": {},
        "distinct prompts": {"groups": 5, "per_group": 1},
        "a row with nothing to learn": {"empty_row": True},
    }
    batch = _batch(tokenizer, **options[case])
    assert packs(model)
    packed, packed_grads = _logprobs_and_grads(model, batch, packed=True, monkeypatch=monkeypatch)
    padded, padded_grads = _logprobs_and_grads(model, batch, packed=False, monkeypatch=monkeypatch)
    assert torch.count_nonzero(packed) == int(batch.loss_mask.sum())
    assert torch.allclose(packed, padded, atol=1e-5)
    for ours, theirs in zip(packed_grads, padded_grads):
        assert torch.allclose(ours, theirs, atol=1e-5)


def test_packed_passes_under_bf16_autocast_keep_attention_in_float32(tokenizer, monkeypatch):
    model = tiny_gqa_model(tokenizer, seed=4)
    batch = _batch(tokenizer, seed=1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        packed, _ = _logprobs_and_grads(model, batch, packed=True, monkeypatch=monkeypatch)
        padded, _ = _logprobs_and_grads(model, batch, packed=False, monkeypatch=monkeypatch)
    assert packed.dtype == torch.float32 and torch.allclose(packed, padded, atol=0.05)


def test_the_packed_attention_of_a_sequence_sees_its_prompt_and_its_own_earlier_tokens_only(tokenizer):
    torch.manual_seed(0)
    query, key, value = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 3 + 5, 8), torch.randn(1, 2, 3 + 5, 8)
    layout = PackedLayout(queries=[(0, 2), (2, 5)], cached=[((0, 3),), ()])
    module = torch.nn.Module()
    with pytest.raises(RuntimeError, match="inside packed_pass"):
        packed_attention(module, query, key, value, None)
    with packed_pass(tiny_gqa_model(tokenizer), layout):
        out, _ = packed_attention(module, query, key, value, None, scaling=1.0)
    # Sequence 0: its 2 queries over the 3 cached keys and its own keys 3..4, causally.
    for i in range(2):
        keys = list(range(3)) + [3 + j for j in range(i + 1)]
        weights = torch.softmax(torch.einsum("hd,hkd->hk", query[0, :, i], key[0, :, keys]), dim=-1)
        assert torch.allclose(out[0, i], torch.einsum("hk,hkd->hd", weights, value[0, :, keys]), atol=1e-6)
    # Sequence 1: no cache, its own keys 5..7 causally.
    for i in range(3):
        keys = [5 + j for j in range(i + 1)]
        weights = torch.softmax(torch.einsum("hd,hkd->hk", query[0, :, 2 + i], key[0, :, keys]), dim=-1)
        assert torch.allclose(out[0, 2 + i], torch.einsum("hk,hkd->hd", weights, value[0, :, keys]), atol=1e-6)


def test_which_models_pack(tokenizer):
    model = tiny_gqa_model(tokenizer)
    assert packs(model)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    assert not packs(model)  # a recomputed layer would run outside the packed block
    eager = tiny_gqa_model(tokenizer)
    eager.set_attn_implementation("eager")
    assert not packs(eager)


def test_a_sequence_may_attend_to_several_cached_spans_in_order(tokenizer):
    """A later turn's row: its prompt's cached keys (shared with other rows) and its own earlier
    ones, two spans apart in the pass's cache, then its new tokens causally."""
    torch.manual_seed(1)
    query, key, value = torch.randn(1, 2, 3, 8), torch.randn(1, 2, 7 + 3, 8), torch.randn(1, 2, 7 + 3, 8)
    layout = PackedLayout(queries=[(0, 3)], cached=[((0, 2), (5, 7))])
    with packed_pass(tiny_gqa_model(tokenizer), layout):
        out, _ = packed_attention(torch.nn.Module(), query, key, value, None, scaling=1.0)
    for i in range(3):
        keys = [0, 1, 5, 6] + [7 + j for j in range(i + 1)]  # slots 2..4 belong to other rows
        weights = torch.softmax(torch.einsum("hd,hkd->hk", query[0, :, i], key[0, :, keys]), dim=-1)
        assert torch.allclose(out[0, i], torch.einsum("hk,hkd->hd", weights, value[0, :, keys]), atol=1e-6)


# Gradients added in one order: the rows of a shared prompt are picked with index_select, never
# tensor[index], whose backward on a CPU adds a repeated row's gradients with atomic adds in the
# order the threads reach them (a run then differed in its last digits with the machine's load).
PATHS = {  # how token_logprobs computes a batch: packed (CPU), a shared-prefix cache, one plain pass
    "packed": ({}, True),
    "shared prefix": ({}, False),
    "plain": ({"groups": 5, "per_group": 1}, False),
}


def backward_steps(tensor: torch.Tensor) -> set[str]:
    """The kinds of step in the autograd graph behind ``tensor``."""
    seen, stack = set(), [tensor.grad_fn]
    while stack:
        step = stack.pop()
        if step is None or step in seen:
            continue
        seen.add(step)
        stack.extend(following for following, _ in step.next_functions)
    return {type(step).__name__ for step in seen}


@pytest.mark.parametrize("path", list(PATHS))
def test_no_training_log_prob_is_picked_by_an_index_whose_backward_adds_in_thread_order(tokenizer, monkeypatch, path):
    options, packed = PATHS[path]
    model = tiny_gqa_model(tokenizer, seed=3)
    batch = _batch(tokenizer, **options)
    monkeypatch.setattr(batch_module, "packs", lambda m: packed and packs(m))
    positions = batch.loss_mask > 0
    out = token_logprobs(model, batch.input_ids, batch.attention_mask, start=batch.first_learnable, positions=positions)
    steps = backward_steps(out)
    assert "IndexSelectBackward0" in steps  # the rows were picked, and this is how
    assert "IndexBackward0" not in steps


def test_rows_at_is_advanced_indexing_with_gradients_summed_in_index_order():
    table = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    index = torch.tensor([2, 0, 2, 2])
    picked = rows_at(table, index)
    assert torch.equal(picked, table.detach()[index])
    (picked * torch.tensor([[1.0], [10.0], [100.0], [1000.0]])).sum().backward()
    assert table.grad.tolist() == [[10.0, 10.0], [0.0, 0.0], [1101.0, 1101.0]]


def test_the_gradients_of_shared_prompts_are_the_same_bits_every_time_on_two_threads(tokenizer, monkeypatch):
    model = tiny_gqa_model(tokenizer, seed=3)
    batch = _batch(tokenizer, groups=4, per_group=8)
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # the suite's workers run on one; atomic adds race on two
    try:
        runs = [_logprobs_and_grads(model, batch, packed=True, monkeypatch=monkeypatch) for _ in range(6)]
    finally:
        torch.set_num_threads(before)
    for out, grads in runs[1:]:
        assert torch.equal(out, runs[0][0])
        assert all(torch.equal(ours, first) for ours, first in zip(grads, runs[0][1]))
