"""Padded tensors for a batch of trajectories: ids, masks, segments and advantages per token
(their log-probs under a model: :func:`slca_grpo.engine.token_logprobs`).

Everything is in full-sequence coordinates (prompt + response, right-padded): position t of
``loss_mask``/``segment_ids``/``advantages`` refers to token t, predicted from tokens < t.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from slca_grpo.algos import Estimator, estimator_spec, segments_from_mask
from slca_grpo.chat.parser import is_call_turn, last_turn_text
from slca_grpo.datatypes import Trajectory


@dataclass
class TokenBatch:
    input_ids: torch.Tensor  # [B, S] long
    attention_mask: torch.Tensor  # [B, S] long
    loss_mask: torch.Tensor  # [B, S] float: 1 on learnable tokens
    segment_ids: torch.Tensor  # [B, S] long (0 outside learnable tokens), in the estimator's layout

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    @property
    def first_learnable(self) -> int:
        """The earliest position holding a learnable token in any row (0 when there is none)."""
        columns = self.loss_mask.any(dim=0).nonzero()
        return int(columns[0]) if len(columns) else 0

    @property
    def tensors(self) -> tuple[torch.Tensor, ...]:
        return self.input_ids, self.attention_mask, self.loss_mask, self.segment_ids

    def to(self, device: torch.device | str) -> TokenBatch:
        return TokenBatch(*(t.to(device) for t in self.tensors))

    def select(self, rows: torch.Tensor | Sequence[int]) -> TokenBatch:
        index = torch.as_tensor(rows, dtype=torch.long).to(self.input_ids.device)
        return TokenBatch(*(t.index_select(0, index) for t in self.tensors))


def pad_sequences(
    sequences: Sequence[Sequence[int]],
    masks: Sequence[Sequence[int]],
    pad_id: int,
    *,
    estimator: Estimator | str | None = None,
    answered: Sequence[bool] | None = None,
) -> TokenBatch:
    """Right-pad token sequences with their learnable-token masks; segments come from the masks, in
    the layout ``estimator`` reads (``Estimator.segment_ids``; the role layout without one), and from
    ``answered``: whether each sequence ends with its answer (None: all do)."""
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
    if estimator is None:
        segment_ids = segments_from_mask(loss_mask, answered)
    else:
        segment_ids = estimator_spec(estimator).segment_ids(loss_mask, answered)
    return TokenBatch(input_ids, attention, loss_mask, segment_ids)


def ends_with_answer(trajectory: Trajectory) -> bool:
    """Whether a rollout's last turn is an answer rather than a call the limits left unanswered."""
    last = trajectory.turns[-1].text if trajectory.turns else last_turn_text(trajectory.response_text)
    return not is_call_turn(last)


def trajectory_batch(
    trajectories: Sequence[Trajectory], pad_id: int, *, estimator: Estimator | str | None = None
) -> TokenBatch:
    """Prompt + response rows; a rollout that ends on a call has no summary segment."""
    sequences = [t.prompt_ids + t.response_ids for t in trajectories]
    masks = [[0] * len(t.prompt_ids) + list(t.response_mask) for t in trajectories]
    answered = [ends_with_answer(t) for t in trajectories]
    return pad_sequences(sequences, masks, pad_id, estimator=estimator, answered=answered)
