"""Padded tensors for a batch of token sequences, and per-token log-probs of a causal LM.

Everything is in full-sequence coordinates (prompt + response, right-padded): position t of
``loss_mask``/``segment_ids``/``advantages`` refers to token t, predicted from tokens < t.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from slca_grpo.algos import segments_from_mask
from slca_grpo.types import Trajectory


@dataclass
class TokenBatch:
    input_ids: torch.Tensor  # [B, S] long
    attention_mask: torch.Tensor  # [B, S] long
    loss_mask: torch.Tensor  # [B, S] float: 1 on learnable tokens
    segment_ids: torch.Tensor  # [B, S] long (0 outside learnable tokens)

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    @property
    def first_learnable(self) -> int:
        """The earliest position holding a learnable token in any row (0 when there is none)."""
        columns = self.loss_mask.any(dim=0).nonzero()
        return int(columns[0]) if len(columns) else 0

    def select(self, rows: torch.Tensor | Sequence[int]) -> "TokenBatch":
        index = torch.as_tensor(rows, dtype=torch.long)
        return TokenBatch(*(t.index_select(0, index) for t in (self.input_ids, self.attention_mask, self.loss_mask, self.segment_ids)))


def pad_sequences(sequences: Sequence[Sequence[int]], masks: Sequence[Sequence[int]], pad_id: int) -> TokenBatch:
    """Right-pad token sequences with their learnable-token masks; segments come from the masks."""
    width = max(1, max(len(s) for s in sequences))
    batch = len(sequences)
    input_ids = torch.full((batch, width), pad_id, dtype=torch.long)
    attention = torch.zeros((batch, width), dtype=torch.long)
    loss_mask = torch.zeros((batch, width), dtype=torch.float32)
    for row, (ids, mask) in enumerate(zip(sequences, masks)):
        if len(ids) != len(mask):
            raise ValueError(f"row {row}: {len(ids)} tokens but {len(mask)} mask entries")
        input_ids[row, : len(ids)] = torch.tensor(list(ids), dtype=torch.long)
        attention[row, : len(ids)] = 1
        loss_mask[row, : len(mask)] = torch.tensor(list(mask), dtype=torch.float32)
    segment_ids = segments_from_mask(loss_mask)
    return TokenBatch(input_ids, attention, loss_mask, segment_ids)


def trajectory_batch(trajectories: Sequence[Trajectory], pad_id: int) -> TokenBatch:
    sequences = [t.prompt_ids + t.response_ids for t in trajectories]
    masks = [[0] * len(t.prompt_ids) + list(t.response_mask) for t in trajectories]
    return pad_sequences(sequences, masks, pad_id)


def _accepts_logits_to_keep(model: torch.nn.Module) -> bool:
    return "logits_to_keep" in inspect.signature(model.forward).parameters


def token_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    temperature: float = 1.0,
    start: int = 1,
) -> torch.Tensor:
    """log p(token_t | tokens_<t) for positions t >= ``start``; earlier positions are 0.

    Prompts are long and the vocabulary projection is a large share of a small model's cost, so
    logits are computed only where they are needed (from position ``start - 1`` on).
    """
    width = input_ids.shape[1]
    start = min(max(1, start), width)
    keep = width - start + 1
    if _accepts_logits_to_keep(model):
        logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, logits_to_keep=keep).logits
    else:
        logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits[:, -keep:, :]
    logits = logits[:, :-1, :].float()
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    # log_softmax then gather, written as logits[token] - logsumexp to avoid a [B, S, V] copy.
    targets = input_ids[:, start:]
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    logprobs = picked - torch.logsumexp(logits, dim=-1)
    return torch.nn.functional.pad(logprobs, (start, 0), value=0.0)
