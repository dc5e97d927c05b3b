"""The pretraining loss through the output layer a chunk at a time equals the plain one, gradients included."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from recipes.reader.chunked_loss import IGNORE_INDEX, chunked_next_token_loss


def _plain(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    logits = hidden[:, :-1] @ weight.T
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, weight.shape[0]), labels[:, 1:].reshape(-1), ignore_index=IGNORE_INDEX
    )


def test_a_hand_computed_case() -> None:
    # Two positions predict; the second label is ignored. Logits of the first: [0, log 3] over 2 words,
    # target word 1: loss = -log(3/4).
    hidden = torch.tensor([[[1.0], [5.0], [7.0]]], requires_grad=True)
    weight = torch.tensor([[0.0], [math.log(3.0)]], requires_grad=True)
    labels = torch.tensor([[0, 1, IGNORE_INDEX]])
    loss = chunked_next_token_loss(hidden, weight, labels, chunk_rows=1)
    assert loss.item() == pytest.approx(-math.log(3 / 4))
    loss.backward()
    # d/dh = (softmax - onehot) @ W = (1/4 * 0 + (3/4 - 1) * log 3); the ignored position gets 0.
    assert hidden.grad[0, 0, 0].item() == pytest.approx(-0.25 * math.log(3.0))
    assert hidden.grad[0, 1:].abs().sum().item() == 0.0
    assert weight.grad[:, 0].tolist() == pytest.approx([0.25, -0.25])


@settings(max_examples=40, deadline=None)
@given(
    batch=st.integers(1, 3),
    length=st.integers(2, 40),
    width=st.integers(1, 16),
    vocab=st.integers(2, 50),
    chunk=st.integers(1, 64),
    ignored=st.floats(0.0, 0.9),
    seed=st.integers(0, 10_000),
)
def test_equals_plain_cross_entropy_and_its_gradients(batch, length, width, vocab, chunk, ignored, seed) -> None:
    generator = torch.Generator().manual_seed(seed)
    hidden = torch.randn(batch, length, width, generator=generator, dtype=torch.float64)
    weight = torch.randn(vocab, width, generator=generator, dtype=torch.float64)
    labels = torch.randint(0, vocab, (batch, length), generator=generator)
    labels[torch.rand(batch, length, generator=generator) < ignored] = IGNORE_INDEX
    labels[0, 1] = 0  # at least one position counts
    grads = []
    for loss_of in (
        _plain,
        lambda h, w, y: chunked_next_token_loss(h, w, y, compute_dtype=torch.float64, chunk_rows=chunk),
    ):
        h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
        loss = loss_of(h, w, labels)
        (3.0 * loss).backward()
        grads.append((loss.detach(), h.grad, w.grad))
    for plain, chunked in zip(grads[0], grads[1]):
        torch.testing.assert_close(chunked, plain, rtol=1e-9, atol=1e-9)


def test_without_gradients_it_is_the_plain_loss() -> None:
    hidden, weight = torch.randn(2, 9, 8), torch.randn(30, 8)
    labels = torch.randint(0, 30, (2, 9))
    torch.testing.assert_close(chunked_next_token_loss(hidden, weight, labels), _plain(hidden, weight, labels))


def test_bf16_products_stay_close_and_give_float32_gradients() -> None:
    torch.manual_seed(0)
    hidden = torch.randn(2, 64, 32, requires_grad=True)
    weight = torch.randn(100, 32, requires_grad=True)
    labels = torch.randint(0, 100, (2, 64))
    loss = chunked_next_token_loss(hidden, weight, labels, compute_dtype=torch.bfloat16, chunk_rows=16)
    loss.backward()
    assert loss.item() == pytest.approx(_plain(hidden.detach(), weight.detach(), labels).item(), rel=0.02)
    assert hidden.grad.dtype == weight.grad.dtype == torch.float32
