"""Next-token cross-entropy through the output layer a chunk of rows at a time.

A small model's pretraining step on a CPU spends more time on its logits than on its layers: for
24k tokens and a 4k vocabulary the float32 logits, their log-softmax and the gradient of each are
~400 MB apiece, every one a pass through memory. :class:`ChunkedCrossEntropy` never holds them:
for each chunk of rows it forms the logits, the loss and, at once, the gradients of the hidden
states and of the output weight (the gradient of softmax cross-entropy is ``softmax - one_hot``),
so a chunk's logits live only while they are in cache. The backward pass then only scales the
stored gradients. Rows whose target is ``ignore_index`` count neither in the loss nor its mean.
"""

from __future__ import annotations

import torch

IGNORE_INDEX = -100
CHUNK_ROWS = 256


class ChunkedCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of ``hidden @ weight.T`` against ``targets``, gradients formed in the forward pass."""

    @staticmethod
    def forward(
        ctx: torch.autograd.function.FunctionCtx,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        targets: torch.Tensor,
        compute_dtype: torch.dtype,
        chunk_rows: int,
    ) -> torch.Tensor:
        kept = targets != IGNORE_INDEX
        count = int(kept.sum())
        exact = torch.promote_types(hidden.dtype, torch.float32)  # softmax and sums: float32 or wider
        total = torch.zeros((), dtype=exact, device=hidden.device)
        grad_hidden = torch.zeros_like(hidden)
        grad_weight = torch.zeros(weight.shape, dtype=exact, device=weight.device)
        weight_c = weight.to(compute_dtype)
        for start in range(0, hidden.shape[0], chunk_rows):
            rows = slice(start, start + chunk_rows)
            chunk_kept = kept[rows]
            if not bool(chunk_kept.any()):
                continue
            h = hidden[rows][chunk_kept]
            target = targets[rows][chunk_kept]
            logits = (h.to(compute_dtype) @ weight_c.T).to(exact)
            lse = torch.logsumexp(logits, dim=-1)
            total += (lse - logits.gather(1, target[:, None]).squeeze(1)).sum()
            # d loss / d logits = softmax - one_hot, formed in place over the chunk's logits.
            grad_logits = logits.sub_(lse[:, None]).exp_()
            grad_logits[torch.arange(len(target), device=target.device), target] -= 1.0
            grad_logits = grad_logits.to(compute_dtype)
            grad_hidden[start : start + chunk_rows][chunk_kept] = (grad_logits @ weight_c).to(hidden.dtype)
            grad_weight += (grad_logits.T @ h.to(compute_dtype)).to(exact)
        scale = 1.0 / max(1, count)
        ctx.save_for_backward(grad_hidden.mul_(scale), grad_weight.mul_(scale).to(weight.dtype))
        return total * scale

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad_output: torch.Tensor):  # type: ignore[override]
        grad_hidden, grad_weight = ctx.saved_tensors
        return grad_hidden * grad_output, grad_weight * grad_output, None, None, None


def chunked_next_token_loss(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
    *,
    compute_dtype: torch.dtype = torch.float32,
    chunk_rows: int = CHUNK_ROWS,
) -> torch.Tensor:
    """The causal LM loss (position ``t`` predicts label ``t + 1``) of ``hidden`` [B, T, H] under ``weight`` [V, H]."""
    shifted_hidden = hidden[:, :-1].reshape(-1, hidden.shape[-1])
    shifted_labels = labels[:, 1:].reshape(-1)
    if not (hidden.requires_grad or weight.requires_grad):
        logits = (shifted_hidden.to(compute_dtype) @ weight.to(compute_dtype).T).float()
        return torch.nn.functional.cross_entropy(logits, shifted_labels, ignore_index=IGNORE_INDEX)
    return ChunkedCrossEntropy.apply(shifted_hidden, weight, shifted_labels, compute_dtype, chunk_rows)
