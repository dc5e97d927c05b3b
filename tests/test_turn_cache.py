"""Each rollout's cache kept between turns (engine/turn_cache.py): a later turn sampled from the
kept cache draws what a full prefill of the whole text draws, and a kept row that no longer
begins its sequence is prefilled again."""

from __future__ import annotations

import pytest
import torch
from decode_helpers import sample_turns, small_tokenizer, tiny_gqa_model, uneven_prompts
from test_rollout import smollm2_shaped_model

from slca_grpo.engine import SamplingConfig, TurnCache, sample, token_logprobs


@pytest.fixture(scope="module")
def tokenizer():
    return small_tokenizer()


@pytest.fixture
def shared_and_fused(monkeypatch):
    """Prompt sharing and the fused decode step (the reader's path) for the tests' narrow models."""
    import slca_grpo.engine.fused_decode as fused_decode
    import slca_grpo.engine.kv_cache as kv_cache

    monkeypatch.setattr(fused_decode, "FUSED_MIN_HIDDEN", 0)
    monkeypatch.setattr(kv_cache, "SHARED_PREFIX_MIN_HIDDEN", 0)


def _model(tokenizer, architecture: str):
    torch.manual_seed(0)
    return tiny_gqa_model(tokenizer) if architecture.startswith("tiny") else smollm2_shaped_model(len(tokenizer))


@pytest.mark.parametrize("architecture", ["tiny", "smollm2-shaped", "tiny shared", "smollm2-shaped shared"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("rests", ["packed", "padded"])
def test_later_turns_from_the_kept_cache_sample_what_a_full_prefill_samples(
    tokenizer, architecture, temperature, rests, request, monkeypatch
):
    import slca_grpo.engine.sampling as sampling

    if architecture.endswith("shared"):
        request.getfixturevalue("shared_and_fused")
    model = _model(tokenizer, architecture)
    # A later turn's new tokens prefill packed (engine/packed_prefill.py) or as a left-padded batch.
    packed_calls = []
    packed = sampling.packed_rest_prefill
    monkeypatch.setattr(sampling, "packed_rest_prefill", lambda *a: packed_calls.append(1) or packed(*a))
    if rests == "padded":
        monkeypatch.setattr(sampling, "packs_rests", lambda model: False)
    kept = TurnCache()
    ours, sequences = sample_turns(model, tokenizer, kept, temperature=temperature)
    assert len(packed_calls) == (2 if rests == "packed" else 0)
    theirs, same_sequences = sample_turns(model, tokenizer, None, temperature=temperature)
    assert sequences == same_sequences
    for our_turn, their_turn in zip(ours, theirs):
        assert [g.token_ids for g in our_turn] == [g.token_ids for g in their_turn]
        for a, b in zip(our_turn, their_turn):
            assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)
    # Turns two and three took each row's earlier text from the cache and prefilled only what was
    # appended: the last sampled token and the injected text.
    assert kept.reused_tokens > 0 and kept.prefilled_tokens > 0
    assert kept.prefilled_tokens < kept.reused_tokens
    # What the sampler says it drew is what a full forward of the whole text gives.
    ids = torch.tensor([sequences[0]])
    full = token_logprobs(model, ids, torch.ones_like(ids), start=1)[0]
    start = len(sequences[0]) - len(ours[2][0].token_ids) - len(tokenizer.encode("sunny today in Paris"))
    last_turn = full[start : start + len(ours[2][0].token_ids)]
    assert torch.allclose(last_turn, torch.tensor(ours[2][0].logprobs), atol=1e-4)


def test_rows_share_their_prompt_in_the_kept_cache(tokenizer, shared_and_fused):
    model = _model(tokenizer, "smollm2-shaped")
    kept = TurnCache()
    sample_turns(model, tokenizer, kept)
    assert kept.prefix is not None and {row.block.groups[row.index] for row in kept.rows.values()} == {0, 1, 2}
    # The prompt is kept once per prompt; each row's real slots, its prompt's and its own, are
    # exactly the tokens it has cached.
    prompts = uneven_prompts(tokenizer)
    assert kept.prefix.keys[0].shape[0] == 3
    for key, row in kept.rows.items():
        prompt_mask, own_mask = row.block.prompt_masks[row.index], row.block.mask[row.index]
        assert int(prompt_mask.sum()) == len(prompts[key])
        assert (
            int(prompt_mask.sum() + own_mask.sum())
            == len(row.token_ids)
            == len(prompts[key]) + row.block.counts[row.index]
        )
        # Right-aligned: the row's real slots are the block's last ones.
        count = row.block.counts[row.index]
        assert own_mask[own_mask.shape[0] - count :].all() and not own_mask[: own_mask.shape[0] - count].any()


def test_keeping_and_restoring_cost_the_same_operations_for_any_number_of_rows(tokenizer, shared_and_fused):
    """Rows are kept and restored a batch at a time: on a GPU, operations per row and layer (a
    launch each) cost more than the prefill they save at small batches."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.calls += 1
            return func(*args, **(kwargs or {}))

    model = _model(tokenizer, "smollm2-shaped")
    prompt = tokenizer.encode("call the weather tool for Paris")
    counted = {}
    for rows in (2, 8):
        kept = TurnCache()
        counts = {}
        for method in ("keep", "restore"):
            original = getattr(kept, method)

            def wrapped(*args, _original=original, _method=method, _counts=counts, **kwargs):
                with Count() as counter:
                    out = _original(*args, **kwargs)
                _counts[_method] = _counts.get(_method, 0) + counter.calls
                return out

            setattr(kept, method, wrapped)
        sequences = [list(prompt) for _ in range(rows)]
        for _ in range(2):
            generations = sample(
                model, sequences, max_new_tokens=4, config=SamplingConfig(temperature=0.0), stop_token_ids=[],
                pad_id=tokenizer.pad_token_id, prefix_lengths=[len(prompt)] * rows, turn_cache=kept,
                row_keys=list(range(rows)),
            )  # fmt: skip
            sequences = [s + g.token_ids + tokenizer.encode(" ok") for s, g in zip(sequences, generations)]
        assert kept.reused_tokens > 0
        counted[rows] = counts
    assert counted[2] == counted[8]


def test_a_kept_row_that_no_longer_begins_its_sequence_is_prefilled_again(tokenizer, shared_and_fused):
    model = _model(tokenizer, "smollm2-shaped")
    prompts = uneven_prompts(tokenizer)
    kept = TurnCache()
    config = SamplingConfig(temperature=0.0)
    first = sample(model, prompts, max_new_tokens=5, config=config, stop_token_ids=[], pad_id=0,
                   turn_cache=kept, row_keys=range(6))  # fmt: skip
    assert set(kept.rows) == set(range(6))
    # Row 2's earlier response was rewritten: nothing kept is used, every row is prefilled whole.
    edited = [p + g.token_ids + [7] for p, g in zip(prompts, first)]
    edited[2][-3] = (edited[2][-3] + 1) % 250
    plain = sample(model, edited, max_new_tokens=4, config=config, stop_token_ids=[], pad_id=0)
    again = sample(model, edited, max_new_tokens=4, config=config, stop_token_ids=[], pad_id=0,
                   turn_cache=kept, row_keys=range(6))  # fmt: skip
    assert kept.reused_tokens == 0
    assert [g.token_ids for g in again] == [g.token_ids for g in plain]
    # A key the cache never saw: the same.
    unknown = sample(model, edited[:2], max_new_tokens=4, config=config, stop_token_ids=[], pad_id=0,
                     turn_cache=kept, row_keys=["x", "y"])  # fmt: skip
    assert kept.reused_tokens == 0 and [g.token_ids for g in unknown] == [g.token_ids for g in plain[:2]]


@pytest.mark.parametrize("architecture", ["tiny shared", "smollm2-shaped shared"])
def test_packed_later_turns_under_bf16_autocast_draw_what_padded_ones_draw(
    tokenizer, architecture, shared_and_fused, monkeypatch
):
    """The demos' precision on a CPU with native bf16: the packed prefill's keys go into a bf16
    cache as the padded prefill's do (same tokens, log-probs to float32 rounding)."""
    import slca_grpo.engine.sampling as sampling

    model = _model(tokenizer, architecture)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        packed, _ = sample_turns(model, tokenizer, TurnCache())
        monkeypatch.setattr(sampling, "packs_rests", lambda model: False)
        padded, _ = sample_turns(model, tokenizer, TurnCache())
    for packed_turn, padded_turn in zip(packed, padded):
        assert [g.token_ids for g in packed_turn] == [g.token_ids for g in padded_turn]
        for a, b in zip(packed_turn, padded_turn):
            assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-3)
