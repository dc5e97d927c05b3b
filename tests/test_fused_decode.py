"""The sampler's fused decode step: the layers' own logits, used where it applies, repacked on change."""

from __future__ import annotations

import pytest
import torch
from decode_helpers import assert_same_samples, sample_two_turns, small_tokenizer, tiny_gqa_model, uneven_prompts

import slca_grpo.engine.fused_decode as fused_decode
from slca_grpo.engine.fused_decode import FusedDecoder, supports_fused_decode
from slca_grpo.engine.kv_cache import decode_attention, growing_cache
from slca_grpo.engine.packed_linear import PlainWeight, packing_available
from slca_grpo.engine.sampling import distinct_rows, prefill_shared, select_cache_rows

pytestmark = pytest.mark.skipif(not packing_available(), reason="this torch build has no oneDNN packed linear ops")


@pytest.fixture(scope="module")
def tokenizer():
    return small_tokenizer()


@pytest.fixture(scope="module")
def model(tokenizer):
    return tiny_gqa_model(tokenizer)


@pytest.fixture
def fused_at_any_width(monkeypatch):
    """The fused step (and prompt sharing) for the test's tiny model, which is narrower than 512."""
    import slca_grpo.engine.kv_cache as kv_cache

    monkeypatch.setattr(fused_decode, "FUSED_MIN_HIDDEN", 0)
    monkeypatch.setattr(kv_cache, "SHARED_PREFIX_MIN_HIDDEN", 0)


def _decode(model, prompts, tokens, *, fused, share=True, drop_at=None, pad_id=0):
    """Logits of one-token steps feeding ``tokens`` [steps, rows] after a shared-prompt prefill, by
    the fused step or by the model's layers; at step ``drop_at`` rows 0 and 3 stop (their cache rows
    are dropped, as the sampler drops finished rows)."""
    cache = growing_cache(model, share_prefixes=share)
    out = []
    with torch.no_grad(), decode_attention(model, cache):
        prefill = prefill_shared(model, *distinct_rows(prompts), pad_id=pad_id, device="cpu", past_key_values=cache)
        past, attention, last = prefill.cache, prefill.attention, prefill.positions[:, -1:]
        decoder = FusedDecoder.for_sampler(model, past, len(prompts)) if fused else None
        assert (decoder is not None) == fused
        keep = torch.arange(len(prompts))
        for step, feed in enumerate(tokens):
            if step == drop_at:
                keep = torch.tensor([1, 2, 4, 5])
                past = select_cache_rows(past, keep)
                attention, last = attention[keep], last[keep]
            feed = feed[keep]
            attention = torch.cat([attention, attention.new_ones((len(attention), 1))], dim=1)
            last = last + 1
            if decoder is not None:
                logits = decoder.step(past, feed, attention, last)
            else:
                output = model(
                    input_ids=feed[:, None],
                    attention_mask=attention,
                    position_ids=last,
                    past_key_values=past,
                    use_cache=True,
                )
                past, logits = output.past_key_values, output.logits[:, -1]
            out.append(logits.float())
    return out, cache


@pytest.mark.parametrize("share", [True, False])
@pytest.mark.parametrize("bf16", [False, True])
def test_fused_steps_give_the_layers_logits(model, tokenizer, fused_at_any_width, share, bf16):
    prompts = uneven_prompts(tokenizer)
    tokens = torch.randint(3, 200, (12, len(prompts)), generator=torch.Generator().manual_seed(0))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        layers, _ = _decode(model, prompts, tokens, fused=False, share=share, drop_at=7)
        fused, cache = _decode(model, prompts, tokens, fused=True, share=share, drop_at=7)
    assert (getattr(cache.layers[0], "prefix", None) is not None) == share
    assert [x.shape[0] for x in fused] == [6] * 7 + [4] * 5
    # float32: rounding (the joined products sum in another order); bf16: one rounding apart at most.
    tolerance = 0.02 if bf16 else 1e-5
    for ours, theirs in zip(fused, layers):
        assert torch.allclose(ours, theirs, atol=tolerance)


@pytest.mark.parametrize("bf16", [False, True])
def test_fused_steps_over_more_rows_than_onednn_packs_give_the_layers_logits(
    model, tokenizer, fused_at_any_width, monkeypatch, bf16
):
    """Past ``MAX_ROWS`` rows the joined weights multiply plainly (bf16, or float32 without the C
    kernel) or in the C kernel's panels (float32): the layers' logits either way."""
    prompts = uneven_prompts(tokenizer) * 12  # 72 rows
    tokens = torch.randint(3, 200, (3, len(prompts)), generator=torch.Generator().manual_seed(4))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        layers, _ = _decode(model, prompts, tokens, fused=False)
        fused, _ = _decode(model, prompts, tokens, fused=True)
    for ours, theirs in zip(fused, layers):
        assert ours.shape[0] == 72 and torch.allclose(ours, theirs, atol=0.02 if bf16 else 1e-5)
    packed = fused_decode._packed_models[model]
    assert (torch.bfloat16 if bf16 else torch.float32) in {dtype for dtype, _ in packed}
    if bf16:
        assert isinstance(packed[(torch.bfloat16, True)].layers[0].qkv.weight, PlainWeight)


def test_smollm2_fused_steps_give_the_layers_logits(smollm2):
    """SmolLM2's architecture (Llama: no biases, a tied head, 9 query / 3 key-value heads, 576 wide,
    so fused by default). float32 to rounding; under bf16 autocast the same bf16 products."""
    model, tokenizer = smollm2
    a, b = tokenizer.encode("What is the weather in Paris today? Answer briefly."), tokenizer.encode("Hello there!")
    prompts = [a, b, a, a, b, b]
    tokens = torch.randint(300, 40000, (4, len(prompts)), generator=torch.Generator().manual_seed(2))
    layers, _ = _decode(model, prompts, tokens, fused=False, drop_at=2, pad_id=tokenizer.pad_token_id)
    fused, _ = _decode(model, prompts, tokens, fused=True, drop_at=2, pad_id=tokenizer.pad_token_id)
    assert max(float((x - y).abs().max()) for x, y in zip(fused, layers)) < 1e-4
    with torch.autocast("cpu", dtype=torch.bfloat16):
        layers, _ = _decode(model, prompts, tokens, fused=False, drop_at=2, pad_id=tokenizer.pad_token_id)
        fused, _ = _decode(model, prompts, tokens, fused=True, drop_at=2, pad_id=tokenizer.pad_token_id)
    assert max(float((x - y).abs().max()) for x, y in zip(fused, layers)) < 0.1  # logits of ~15


def test_the_sampler_uses_the_fused_step_with_the_layers_tokens(model, tokenizer, monkeypatch, fused_at_any_width):
    """Sampled tokens and log-probs with rows dropped as they finish and a later turn prefilled on a
    shared prompt: the same with the fused step as with the layers."""
    made = []
    real = FusedDecoder.for_sampler.__func__

    def run(use):
        def for_sampler(cls, *args):
            made.append(real(cls, *args) if use else None)
            return made[-1]

        monkeypatch.setattr(FusedDecoder, "for_sampler", classmethod(for_sampler))
        return sample_two_turns(model, tokenizer)

    fused, layers = run(True), run(False)
    assert [decoder is not None for decoder in made] == [True, True, False, False]  # once per call
    assert_same_samples(fused, layers)


def test_packed_weights_are_kept_between_calls_and_repacked_when_a_weight_changes(tokenizer, fused_at_any_width):
    model = tiny_gqa_model(tokenizer, layers=1, seed=6)
    prompts = uneven_prompts(tokenizer)
    tokens = torch.randint(3, 200, (3, len(prompts)), generator=torch.Generator().manual_seed(3))
    first = fused_decode._packed_weights(model, torch.float32, 6)
    assert fused_decode._packed_weights(model, torch.float32, 6) is first
    with torch.no_grad():
        model.model.layers[0].self_attn.k_proj.bias.add_(0.5)  # in place, as an optimizer step writes
    assert fused_decode._packed_weights(model, torch.float32, 6) is not first
    fused, _ = _decode(model, prompts, tokens, fused=True)
    layers, _ = _decode(model, prompts, tokens, fused=False)
    assert torch.allclose(fused[-1], layers[-1], atol=1e-5)


def test_which_models_are_fused(model, tokenizer, fused_at_any_width, monkeypatch):
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3Config, Qwen3ForCausalLM

    assert supports_fused_decode(model)
    assert not supports_fused_decode(model, min_hidden=512)  # narrower than the default width
    qwen3 = Qwen3ForCausalLM(
        Qwen3Config(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4)
    )
    assert not supports_fused_decode(qwen3)  # per-head query/key norms
    wrapped = get_peft_model(tiny_gqa_model(tokenizer, layers=1, seed=7), LoraConfig(r=2, target_modules=["q_proj"]))
    assert not supports_fused_decode(wrapped)  # LoRA layers keep their forward
    assert not supports_fused_decode(tiny_gqa_model(tokenizer, layers=1).to(torch.bfloat16))  # weights not float32
    cache = growing_cache(model)
    with torch.no_grad(), decode_attention(model, cache):
        prefill_shared(model, *distinct_rows(uneven_prompts(tokenizer)), pad_id=0, device="cpu", past_key_values=cache)
        assert FusedDecoder.for_sampler(model, cache, 6) is not None
        assert FusedDecoder.for_sampler(model, cache, 65) is not None  # any number of rows
        assert FusedDecoder.for_sampler(model, None, 6) is None  # not the sampler's cache
        with torch.autocast("cpu", dtype=torch.float16):
            assert FusedDecoder.for_sampler(model, cache, 6) is None
    with torch.no_grad():  # outside the sampler's attention (or for a model not on SDPA) the layers run
        assert FusedDecoder.for_sampler(model, cache, 6) is None
