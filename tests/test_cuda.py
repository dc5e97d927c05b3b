"""The engine and the trainer on a CUDA device agree with the CPU (skipped without one; run by
benchmarks/gpu_check.sh): the reader's log-probs, what the sampler says it drew against a full
forward, greedy decoding, and one update's gradients."""

from __future__ import annotations

import copy

import pytest
import torch

from slca_grpo.chat.formatter import ChatFormatter
from slca_grpo.data.synthetic import generate_tasks
from slca_grpo.engine import SamplingConfig, sample, token_logprobs
from slca_grpo.models import load_model

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (benchmarks/gpu_check.sh)")


@pytest.fixture(scope="module")
def reader():
    model, tokenizer = load_model("reader")
    return model, tokenizer


def _prompts(tokenizer, n: int) -> list[list[int]]:
    formatter = ChatFormatter(tokenizer)
    return [formatter.task_prompt_ids(task) for task in generate_tasks(11, n, "test")]


def _on(model: torch.nn.Module, device: str) -> torch.nn.Module:
    return copy.deepcopy(model).to(device).eval()


def test_the_readers_log_probs_on_cuda_are_the_cpus(reader):
    model, tokenizer = reader
    prompts = _prompts(tokenizer, 4)
    length = min(len(p) for p in prompts)
    ids = torch.tensor([p[:length] for p in prompts])
    mask = torch.ones_like(ids)
    with torch.no_grad():
        cpu = token_logprobs(model, ids, mask, start=1)
        cuda = token_logprobs(_on(model, "cuda"), ids.cuda(), mask.cuda(), start=1).cpu()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            bf16 = token_logprobs(_on(model, "cuda"), ids.cuda(), mask.cuda(), start=1).float().cpu()
    assert (cuda - cpu).abs().max().item() < 1e-3
    # bf16 rounds every product to 8 bits of mantissa: close on average, not token for token.
    assert (bf16 - cpu)[:, 1:].abs().mean().item() < 0.05


@pytest.mark.parametrize("bf16", [False, True])
def test_what_the_sampler_drew_on_cuda_is_what_a_full_forward_gives(reader, bf16):
    model, tokenizer = reader
    cuda_model = _on(model, "cuda")
    prompts = [p for p in _prompts(tokenizer, 3) for _ in range(4)]  # groups of 4 share a prompt
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
        generations = sample(
            cuda_model,
            prompts,
            max_new_tokens=48,
            config=SamplingConfig(temperature=1.0),
            stop_token_ids=[tokenizer.eos_token_id],
            pad_id=tokenizer.pad_token_id,
            generator=torch.Generator().manual_seed(0),
        )
        gaps = []
        for prompt, generation in zip(prompts, generations):
            assert generation.token_ids and all(0 <= t < len(tokenizer) for t in generation.token_ids)
            ids = torch.tensor([prompt + generation.token_ids], device="cuda")
            again = token_logprobs(cuda_model, ids, torch.ones_like(ids), start=len(prompt))[0, len(prompt) :]
            gaps.append((again.float().cpu() - torch.tensor(generation.logprobs)).abs())
    gaps = torch.cat(gaps)
    print(f"sampler vs full forward, bf16={bf16}: mean |dlogp| {gaps.mean():.2e}, max {gaps.max():.2e}")
    if bf16:
        # The sampler's cached decode and the trainer's full pass round differently in bf16: that
        # gap is the importance ratio's noise floor, small on average, not token for token.
        assert gaps.mean().item() < 0.05
    else:
        assert gaps.max().item() < 1e-3


def test_greedy_decoding_on_cuda_picks_the_cpus_best_token_or_a_tie(reader):
    model, tokenizer = reader
    prompts = _prompts(tokenizer, 2)
    with torch.no_grad():
        generations = sample(
            _on(model, "cuda"),
            prompts,
            max_new_tokens=32,
            config=SamplingConfig(temperature=0.0),
            stop_token_ids=[tokenizer.eos_token_id],
            pad_id=tokenizer.pad_token_id,
        )
        for prompt, generation in zip(prompts, generations):
            ids = torch.tensor([prompt + generation.token_ids])
            logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
            chosen = logits.gather(1, torch.tensor(generation.token_ids)[:, None])[:, 0]
            # Each greedy token is the CPU's argmax, or within rounding of it (a near-tie).
            assert torch.all(logits.max(dim=1).values - chosen < 1e-3)


def test_one_update_on_cuda_has_the_cpus_gradients(reader):
    from slca_grpo.trainer.batch import pad_sequences

    model, tokenizer = reader
    prompts = _prompts(tokenizer, 2)
    ids = [p[:96] for p in prompts for _ in range(2)]
    batch = pad_sequences(ids, [[0.0] * 64 + [1.0] * 32] * 4, tokenizer.pad_token_id)
    advantages = torch.tensor([1.0, -1.0, 0.5, -0.5])[:, None] * batch.loss_mask
    grads = {}
    for device in ("cpu", "cuda"):
        copy_ = _on(model, device).train()
        logprobs = token_logprobs(copy_, batch.input_ids.to(device), batch.attention_mask.to(device), start=1)
        mask = batch.loss_mask.to(device)
        loss = -(logprobs * advantages.to(device) * mask).sum() / mask.sum()
        loss.backward()
        grads[device] = torch.cat([p.grad.flatten().cpu() for p in copy_.parameters() if p.grad is not None])
    assert grads["cuda"].shape == grads["cpu"].shape
    assert torch.allclose(grads["cuda"], grads["cpu"], rtol=1e-3, atol=1e-5)


def test_a_later_turns_prefill_on_a_shared_prompt_samples_on_cuda_as_a_full_prefill_does(reader):
    model, tokenizer = reader
    cuda_model = _on(model, "cuda")
    first, second = _prompts(tokenizer, 2)
    rests = [tokenizer.encode(t) for t in ("sunny", "it rains a lot", "", "for two", "at eight tonight")]
    prompts = [first + rests[0], first + rests[1], first + rests[2], second + rests[3], second + rests[4]]
    lengths = [len(first)] * 3 + [len(second)] * 2

    def run(prefix_lengths):
        with torch.no_grad():
            return sample(
                cuda_model,
                prompts,
                max_new_tokens=16,
                config=SamplingConfig(temperature=0.0),
                stop_token_ids=[],
                pad_id=tokenizer.pad_token_id,
                prefix_lengths=prefix_lengths,
            )

    shared, plain = run(lengths), run(None)
    for by_prompt, whole in zip(shared, plain):
        gaps = (torch.tensor(by_prompt.logprobs) - torch.tensor(whole.logprobs)).abs()
        # The same tokens, or a near-tie broken the other way (then the rest of the row differs).
        same = by_prompt.token_ids == whole.token_ids
        assert same or gaps[0].item() < 1e-3
        if same:
            assert gaps.max().item() < 1e-3


def test_a_later_turn_from_the_kept_cache_on_cuda_samples_what_a_full_prefill_samples(reader):
    from decode_helpers import sample_turns

    from slca_grpo.engine import TurnCache

    model, tokenizer = reader
    cuda_model = _on(model, "cuda")
    kept = TurnCache()
    with torch.no_grad():
        ours, _ = sample_turns(cuda_model, tokenizer, kept)
        theirs, _ = sample_turns(cuda_model, tokenizer, None)
    assert kept.reused_tokens > 0
    for by_cache, whole in zip(ours[1], theirs[1]):
        gaps = (torch.tensor(by_cache.logprobs) - torch.tensor(whole.logprobs)).abs()
        same = by_cache.token_ids == whole.token_ids
        assert same or gaps[0].item() < 1e-3  # or a near-tie broken the other way
        if same:
            assert gaps.max().item() < 1e-3
