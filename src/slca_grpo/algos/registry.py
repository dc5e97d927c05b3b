"""The advantage-estimator registry and :func:`compute_advantages`, the one entry point trainers call.

An estimator is a pure function ``fn(group_index, segment_ids, rewards, config) -> Tensor[B, T]``
registered under a name; adding one is one decorated function and touches no trainer code.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from slca_grpo.algos.grouping import group_index_from_ids, stat_dtype
from slca_grpo.algos.segments import validate_segment_ids
from slca_grpo.config import ConfigError, from_dict

__all__ = [
    "AdvantageConfig",
    "EstimatorFn",
    "EstimatorSpec",
    "MissingRewardError",
    "RewardView",
    "UnknownEstimatorError",
    "compute_advantages",
    "estimator_spec",
    "get_estimator",
    "list_estimators",
    "register_estimator",
    "unregister_estimator",
]


@dataclass(frozen=True)
class AdvantageConfig:
    """Knobs shared by the estimators (docs/method.md §5 defaults)."""

    eps: float = 1e-6  # added to the group std before dividing
    norm_std: bool = True  # False: only subtract the group mean (Dr.GRPO)
    lambda_tool: float = 1.0  # SLCA: scale of the tool-segment advantage, after normalising
    lambda_summary: float = 1.0  # SLCA: scale of the summary-segment advantage
    toolpo_lambda: float = 1.0  # ToolPO: weight of the tool-call advantage on tool tokens

    def __post_init__(self) -> None:
        if not isinstance(self.norm_std, bool):
            raise ConfigError(f"norm_std must be a bool, got {self.norm_std!r}")
        for field in ("eps", "lambda_tool", "lambda_summary", "toolpo_lambda"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"{field} must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ConfigError(f"{field} must be finite, got {value!r}")
        if self.eps < 0:
            raise ConfigError(f"eps must be >= 0, got {self.eps!r}")


class UnknownEstimatorError(KeyError):
    """Raised for an estimator name that is not registered."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


class MissingRewardError(KeyError):
    """Raised when an estimator needs a reward the caller did not provide."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


EstimatorFn = Callable[[Tensor, Tensor, "RewardView", AdvantageConfig], Tensor]


@dataclass(frozen=True)
class EstimatorSpec:
    """A registered estimator: its function, the rewards it reads and a one-line description."""

    name: str
    fn: EstimatorFn
    rewards: tuple[str, ...]

    @property
    def description(self) -> str:
        doc = (self.fn.__doc__ or "").strip()
        return doc.splitlines()[0].strip() if doc else ""


_REGISTRY: dict[str, EstimatorSpec] = {}


def register_estimator(
    name: str, *, rewards: Sequence[str] = (), replace: bool = False
) -> Callable[[EstimatorFn], EstimatorFn]:
    """Decorator registering ``fn(group_index, segment_ids, rewards, config)`` under ``name``.

    ``rewards`` names the reward keys the estimator reads, so a missing one is reported before it
    runs (reading an undeclared missing key still fails clearly). Re-registering a name raises unless
    ``replace=True``.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"estimator name must be a non-empty string, got {name!r}")
    if isinstance(rewards, str):
        rewards = (rewards,)

    def decorator(fn: EstimatorFn) -> EstimatorFn:
        if not callable(fn):
            raise TypeError(f"estimator {name!r} must be callable, got {type(fn).__name__}")
        if name in _REGISTRY and not replace:
            raise ValueError(f"estimator {name!r} is already registered (pass replace=True)")
        _REGISTRY[name] = EstimatorSpec(name=name, fn=fn, rewards=tuple(rewards))
        return fn

    return decorator


def unregister_estimator(name: str) -> None:
    """Remove ``name`` from the registry (for plugins and tests); unknown names raise."""
    estimator_spec(name)
    del _REGISTRY[name]


def estimator_spec(name: str) -> EstimatorSpec:
    """The registration record of ``name`` (function, declared rewards, description)."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise UnknownEstimatorError(
            f"unknown advantage estimator {name!r}; known: {', '.join(list_estimators())}"
        ) from None


def get_estimator(name: str) -> EstimatorFn:
    """The estimator function registered as ``name`` (``UnknownEstimatorError``, a KeyError, if none)."""
    return estimator_spec(name).fn


def list_estimators() -> list[str]:
    """Names of the registered estimators, in registration order."""
    return list(_REGISTRY)


RewardValue = Tensor | Sequence[float] | Sequence[bool]


class RewardView(Mapping[str, Tensor]):
    """Read-only view of the caller's rewards that checks each one when an estimator reads it.

    Values come back as 1-D tensors of length ``B`` on the segment ids' device; lists are
    converted. A missing key raises :class:`MissingRewardError` naming the estimator; NaN or inf
    raises ``ValueError``. Only the keys an estimator reads are checked, so callers may pass extras.
    """

    def __init__(
        self,
        estimator: str,
        rewards: Mapping[str, RewardValue],
        *,
        batch_size: int,
        device: torch.device | str | None = None,
    ) -> None:
        if not isinstance(rewards, Mapping):
            raise TypeError(f"rewards must be a mapping of reward name to [B] values, got {type(rewards).__name__}")
        self._estimator = estimator
        self._raw = rewards
        self._batch_size = batch_size
        self._device = device
        self._checked: dict[str, Tensor] = {}

    def __getitem__(self, key: str) -> Tensor:
        if key in self._checked:
            return self._checked[key]
        if key not in self._raw:
            raise MissingRewardError(
                f"estimator {self._estimator!r} needs reward {key!r}, "
                f"but rewards only has {sorted(map(str, self._raw))}"
            )
        tensor = self._convert(key, self._raw[key])
        self._checked[key] = tensor
        return tensor

    def _convert(self, key: str, value: Any) -> Tensor:
        where = f"reward {key!r} (estimator {self._estimator!r})"
        try:
            tensor = torch.as_tensor(value, device=self._device)
            if not isinstance(value, Tensor) and tensor.is_floating_point():
                # Python floats are doubles; torch would default them to float32.
                tensor = torch.as_tensor(value, dtype=stat_dtype(tensor.device), device=tensor.device)
        except (TypeError, ValueError, RuntimeError) as err:
            raise ValueError(f"{where} is not numeric: {err}") from None
        if tensor.dim() != 1 or tensor.shape[0] != self._batch_size:
            raise ValueError(f"{where} must have shape [{self._batch_size}], got {tuple(tensor.shape)}")
        if tensor.is_complex():
            raise ValueError(f"{where} must be real, got dtype {tensor.dtype}")
        if tensor.is_floating_point():
            bad = ~torch.isfinite(tensor)
            if bool(bad.any()):
                rows = bad.nonzero().flatten()[:8].tolist()
                raise ValueError(f"{where} has non-finite values (NaN/inf) at rollouts {rows}")
        return tensor

    def require(self, keys: Sequence[str]) -> None:
        """Raise one :class:`MissingRewardError` listing every key of ``keys`` that is absent."""
        missing = [key for key in keys if key not in self._raw]
        if missing:
            raise MissingRewardError(
                f"estimator {self._estimator!r} needs reward(s) {missing}, "
                f"but rewards only has {sorted(map(str, self._raw))}"
            )

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __contains__(self, key: object) -> bool:
        return key in self._raw


def compute_advantages(
    name: str,
    *,
    group_ids: Tensor | Sequence[Hashable],
    segment_ids: Tensor,
    rewards: Mapping[str, RewardValue],
    config: AdvantageConfig | Mapping[str, Any] | None = None,
) -> Tensor:
    """Per-token advantages ``[B, T]`` (float32) from the estimator registered as ``name``.

    ``group_ids``: one id per rollout (tensor or hashables; rollouts of one prompt share it).
    ``segment_ids``: ``[B, T]`` codes 0/1/2 (none/tool/summary), e.g. from ``segments_from_mask``.
    ``rewards``: reward name -> ``[B]`` values; which names depends on the estimator.
    """
    spec = estimator_spec(name)
    cfg = config if isinstance(config, AdvantageConfig) else from_dict(AdvantageConfig, config or {})
    if not isinstance(segment_ids, Tensor):
        raise TypeError(f"segment_ids must be a torch.Tensor, got {type(segment_ids).__name__}")
    segment_ids = validate_segment_ids(segment_ids)
    batch_size = segment_ids.shape[0]
    group_index, _ = group_index_from_ids(group_ids, batch_size=batch_size, device=segment_ids.device)
    view = RewardView(name, rewards, batch_size=batch_size, device=segment_ids.device)
    view.require(spec.rewards)
    advantages = spec.fn(group_index, segment_ids, view, cfg)
    if not isinstance(advantages, Tensor) or advantages.shape != segment_ids.shape:
        shape = tuple(advantages.shape) if isinstance(advantages, Tensor) else type(advantages)
        raise ValueError(f"estimator {name!r} returned {shape}, expected a tensor of shape {tuple(segment_ids.shape)}")
    return advantages.to(torch.float32)
