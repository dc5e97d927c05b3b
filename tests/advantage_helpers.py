"""Reading advantages back per rollout, for the estimator tests."""

from __future__ import annotations

import torch


def per_rollout(advantages: torch.Tensor, segments: torch.Tensor, code: int) -> list[float | None]:
    """The single value each row carries on tokens of ``code`` (None if the row has none)."""
    values: list[float | None] = []
    for row_adv, row_seg in zip(advantages, segments):
        on_code = row_adv[row_seg == code]
        if on_code.numel() == 0:
            values.append(None)
            continue
        assert torch.all(on_code == on_code[0]), "one value per rollout and segment"
        values.append(float(on_code[0]))
    return values
