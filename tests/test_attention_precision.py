"""Training passes under CPU bf16 autocast compute attention in float32 (models/attention.py)."""

from __future__ import annotations

import pytest
import torch
from decode_helpers import small_tokenizer, tiny_gqa_model

from slca_grpo.engine import token_logprobs
from slca_grpo.engine.attention import TRAINING_ATTENTION, training_attention
from slca_grpo.engine.kv_cache import ATTENTION_NAME, decode_attention


@pytest.fixture(scope="module")
def model():
    return tiny_gqa_model(small_tokenizer(), seed=3)


def _batch():
    ids = torch.randint(3, 250, (3, 40), generator=torch.Generator().manual_seed(0))
    attention = torch.ones_like(ids)
    attention[2, 30:] = 0  # a right-padded row
    positions = torch.zeros_like(ids, dtype=torch.bool)
    positions[:, 20:30] = True
    return ids, attention, positions


def test_under_bf16_autocast_attention_runs_in_float32_and_gradients_flow(model, sdpa_calls):
    ids, attention, positions = _batch()
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logprobs = token_logprobs(model, ids, attention, positions=positions)
    logprobs.sum().backward()
    assert sdpa_calls and {call.dtype for call in sdpa_calls} == {torch.float32}
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters() if p.requires_grad)
    assert model.config._attn_implementation == "sdpa"  # restored after the pass
    # The products around attention are still bfloat16: the result is not the float32 one.
    plain = token_logprobs(model, ids, attention, positions=positions)
    assert not torch.equal(plain, logprobs.detach()) and torch.allclose(plain, logprobs.detach(), atol=0.1)


def test_in_float32_attention_stays_float32(model, sdpa_calls):
    ids, attention, positions = _batch()
    token_logprobs(model, ids, attention, positions=positions)
    assert {call.dtype for call in sdpa_calls} == {torch.float32}


def test_without_the_switch_bf16_autocast_gives_bfloat16_attention(model, sdpa_calls):
    """The control for the first test: SDPA under autocast is handed bfloat16."""
    ids, attention, _ = _batch()
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        model(input_ids=ids, attention_mask=attention)
    assert sdpa_calls and {call.dtype for call in sdpa_calls} == {torch.bfloat16}


def test_another_attention_in_place_is_left_alone(model):
    ids, attention, positions = _batch()
    with decode_attention(model), torch.autocast("cpu", dtype=torch.bfloat16):
        token_logprobs(model, ids, attention, positions=positions)
        assert model.config._attn_implementation == ATTENTION_NAME
    with pytest.raises(RuntimeError), torch.autocast("cpu", dtype=torch.bfloat16), training_attention(model):
        assert model.config._attn_implementation == TRAINING_ATTENTION
        raise RuntimeError("boom")
    assert model.config._attn_implementation == "sdpa"
