"""Advantage estimators: the :class:`Estimator` object, its registry and :func:`compute_advantages`.

An estimator's math is a pure function ``fn(group_index, segment_ids, rewards, config) -> Tensor[B, T]``
registered under a name; adding one is one decorated function and touches no trainer code. The
registration makes an :class:`Estimator`, which owns everything a trainer needs to know about it:
the rewards it reads, its segment layout, its advantage function and its own settings (a dataclass
configured as ``rl.advantage.<name>.*``). Trainers look it up once by name and pass the object on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from slca_grpo.algos.grouping import group_index_from_ids, stat_dtype
from slca_grpo.algos.segments import (
    SEG_FIRST_TURN,
    SEG_TOOL,
    SEGMENTATIONS,
    Answered,
    checked_segment_ids,
    segment_ids_from_mask,
    segment_roles,
)
from slca_grpo.config import (
    ConfigError,
    check_subsection_type,
    fill_subsections,
    from_dict,
    subsection_settings,
    subsections_field,
)
from slca_grpo.registry import Registry, UnknownNameError
from slca_grpo.rewards.registry import pad_rows

__all__ = [
    "AdvantageConfig",
    "Estimator",
    "EstimatorFn",
    "MissingRewardError",
    "RewardView",
    "UnknownEstimatorError",
    "compute_advantages",
    "estimator_spec",
    "get_estimator",
    "list_estimators",
    "register_estimator",
    "segment_ids_for",
    "unregister_estimator",
]


@dataclass(frozen=True)
class AdvantageConfig:
    """The ``rl.advantage`` section: the knobs the built-in estimators share (docs/method.md §5
    defaults), and under ``settings`` the own settings of each estimator that declares them, keyed
    by its name (``rl.advantage.<name>.*``; the defaults when not given)."""

    eps: float = 1e-6  # added to the group std before dividing
    norm_std: bool = True  # False: only subtract the group mean (Dr.GRPO)
    lambda_tool: float = 1.0  # SLCA: scale of the tool-segment advantage, after normalising
    lambda_summary: float = 1.0  # SLCA: scale of the summary-segment advantage
    toolpo_lambda: float = 1.0  # ToolPO: weight of the tool-call advantage on tool tokens
    # slca-turn: turn k's return is r_k + γ·r_{k+1} + γ²·r_{k+2} + ... over the rollout's later tool
    # turns (γ = turn_discount), so 0 scores each turn alone and 1 credits a turn with every later one.
    turn_discount: float = 0.0
    settings: dict[str, Any] = subsections_field()

    @classmethod
    def subsection_types(cls) -> dict[str, type]:
        """Estimator name -> its settings dataclass, for every registered estimator that has one."""
        return {estimator.name: estimator.settings for estimator in ESTIMATORS.values() if estimator.settings}

    def __post_init__(self) -> None:
        if not isinstance(self.norm_std, bool):
            raise ConfigError(f"norm_std must be a bool, got {self.norm_std!r}")
        for field in ("eps", "lambda_tool", "lambda_summary", "toolpo_lambda", "turn_discount"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"{field} must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ConfigError(f"{field} must be finite, got {value!r}")
        if self.eps < 0:
            raise ConfigError(f"eps must be >= 0, got {self.eps!r}")
        if not 0 <= self.turn_discount <= 1:
            raise ConfigError(f"turn_discount must be in [0, 1], got {self.turn_discount!r}")
        object.__setattr__(self, "settings", fill_subsections(self, self.settings))


class MissingRewardError(KeyError):
    """Raised when an estimator needs a reward the caller did not provide."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


EstimatorFn = Callable[..., Tensor]  # (group_index, segment_ids, rewards, config[, settings]) -> [B, T]
# A segment layout of an estimator's own: (response_mask, answered) -> [B, T] codes of the role or turn layout.
SegmentLayout = Callable[[Tensor, Answered], Tensor]


@dataclass(frozen=True)
class Estimator:
    """A registered estimator, looked up once by name and then passed as an object.

    ``fn``: its advantage function; ``rewards``: the reward names it reads; ``segmentation``: the
    segment layout it reads (``"role"``: 0/1/2; ``"turn"``: one code per tool turn; or a function
    of its own, ``(response_mask, answered) -> segment ids``); ``settings``: the dataclass of its
    own settings (``rl.advantage.<name>.*``), None when it reads only the shared knobs. With
    settings, ``fn`` gets them as a fifth argument. ``ignores_summary``: declared by an estimator
    that reads ``summary`` or ``score`` but whose advantages never change with R_sum (see
    :attr:`noise_blind`).
    """

    name: str
    fn: EstimatorFn
    rewards: tuple[str, ...]
    segmentation: str | SegmentLayout = "role"
    settings: type | None = None
    ignores_summary: bool = False

    @property
    def noise_blind(self) -> bool:
        """Whether summary-reward noise cannot reach its advantages: it reads neither ``summary``
        nor ``score`` (the two rewards the noise shifts), or declares that R_sum never changes them.
        A study trains such an estimator at one noise level and reports those runs at every level."""
        return self.ignores_summary or not {"summary", "score"} & set(self.rewards)

    @property
    def description(self) -> str:
        doc = (self.fn.__doc__ or "").strip()
        return doc.splitlines()[0].strip() if doc else ""

    @property
    def layout_name(self) -> str:
        """``"role"``, ``"turn"``, or the name of the estimator's own layout function."""
        layout = self.segmentation
        return layout if isinstance(layout, str) else getattr(layout, "__name__", type(layout).__name__)

    def own_settings(self, config: AdvantageConfig) -> Any:
        """This estimator's settings in ``config`` (their defaults if the config predates the
        registration); None when it has none."""
        return subsection_settings(config.settings, self.name, self.settings, f"rl.advantage.{self.name}")

    def segment_ids(self, response_mask: Tensor, answered: Answered = None) -> Tensor:
        """The segment ids this estimator reads, from a ``[B, T]`` (or ``[T]``) response mask.

        The one place a trainer (ours or the verl adapter) turns a mask into segments: the runs are
        the mask's maximal runs of learnable tokens. ``answered`` (``[B]`` flags): whether each
        response ends with its answer; a response cut off on a call has no summary segment, its last
        run is a tool run. ``None``: every response does.
        """
        if callable(self.segmentation):
            return self.segmentation(response_mask, answered)
        return segment_ids_from_mask(self.segmentation, response_mask, answered)

    def advantages(
        self,
        *,
        group_ids: Tensor | Sequence[Hashable],
        segment_ids: Tensor,
        rewards: Mapping[str, RewardColumn],
        config: AdvantageConfig | Mapping[str, Any] | None = None,
        valid: Tensor | Sequence[bool] | None = None,
    ) -> Tensor:
        """Per-token advantages ``[B, T]`` (float32); see :func:`compute_advantages`."""
        if valid is not None:
            return _advantages_of_valid(self, group_ids, segment_ids, rewards, config, valid)
        name = self.name
        cfg = config if isinstance(config, AdvantageConfig) else from_dict(AdvantageConfig, config or {})
        if not isinstance(segment_ids, Tensor):
            raise TypeError(f"segment_ids must be a torch.Tensor, got {type(segment_ids).__name__}")
        segment_ids, high = checked_segment_ids(segment_ids)
        if self.segmentation == "role" and high >= SEG_FIRST_TURN:
            segment_ids = segment_roles(segment_ids)
        # Role ids' tool code cannot say which turn a token is in (with turn codes present, the
        # validation has already refused it).
        elif self.segmentation == "turn" and high < SEG_FIRST_TURN and bool((segment_ids == SEG_TOOL).any()):
            raise ValueError(
                f"estimator {name!r} reads per-turn segment ids, but these hold the role layout's tool code "
                f"{SEG_TOOL}; build them with segment_ids_for({name!r}, response_mask)"
            )
        batch_size = segment_ids.shape[0]
        group_index, _ = group_index_from_ids(group_ids, batch_size=batch_size, device=segment_ids.device)
        view = RewardView(name, rewards, batch_size=batch_size, device=segment_ids.device)
        view.require(self.rewards)
        if self.settings is None:
            advantages = self.fn(group_index, segment_ids, view, cfg)
        else:
            advantages = self.fn(group_index, segment_ids, view, cfg, self.own_settings(cfg))
        if not isinstance(advantages, Tensor) or advantages.shape != segment_ids.shape:
            shape = tuple(advantages.shape) if isinstance(advantages, Tensor) else type(advantages)
            raise ValueError(
                f"estimator {name!r} returned {shape}, expected a tensor of shape {tuple(segment_ids.shape)}"
            )
        return advantages.to(torch.float32)


class UnknownEstimatorError(UnknownNameError):
    """Raised for an estimator name that is not registered."""


# Every estimator by name: the built-ins and the plugins' (:func:`register_estimator`).
ESTIMATORS: Registry[Estimator] = Registry("advantage estimator", unknown=UnknownEstimatorError)


def register_estimator(
    name: str,
    *,
    rewards: Sequence[str] = (),
    segmentation: str | SegmentLayout = "role",
    settings: type | None = None,
    ignores_summary: bool = False,
    replace: bool = False,
) -> Callable[[EstimatorFn], EstimatorFn]:
    """Decorator registering ``fn(group_index, segment_ids, rewards, config)`` under ``name``.

    ``rewards`` names the reward keys the estimator reads, so a missing one is reported before it
    runs (reading an undeclared missing key still fails clearly). ``segmentation`` is the layout of
    the segment ids it reads: ``"role"`` (0 none / 1 tool / 2 summary), ``"turn"`` (tool turn k
    coded ``SEG_FIRST_TURN + k - 1``), or a function ``(response_mask, answered) -> [B, T]`` ids
    of the estimator's own (in the codes of either layout). ``settings``: a dataclass of the estimator's own settings
    (every field with a default), configured as ``rl.advantage.<name>.<field>`` and passed to
    ``fn`` as a fifth argument. ``ignores_summary``: it reads ``summary`` or ``score`` but R_sum never
    changes its advantages (so summary noise cannot reach it). Re-registering a name raises unless ``replace=True``.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"estimator name must be a non-empty string, got {name!r}")
    if not callable(segmentation) and segmentation not in SEGMENTATIONS:
        raise ValueError(
            f"segmentation must be one of {SEGMENTATIONS} or a function (response_mask, answered) -> segment ids, "
            f"got {segmentation!r}"
        )
    if settings is not None:
        check_subsection_type("estimator", name, settings, AdvantageConfig)
    if isinstance(rewards, str):
        rewards = (rewards,)

    def decorator(fn: EstimatorFn) -> EstimatorFn:
        if not callable(fn):
            raise TypeError(f"estimator {name!r} must be callable, got {type(fn).__name__}")
        estimator = Estimator(
            name=name,
            fn=fn,
            rewards=tuple(rewards),
            segmentation=segmentation,
            settings=settings,
            ignores_summary=ignores_summary,
        )
        ESTIMATORS.add(name, estimator, origin=getattr(fn, "__module__", "") or "", replace=replace)
        return fn

    return decorator


def unregister_estimator(name: str) -> None:
    """Remove ``name`` from the registry (for plugins and tests); unknown names raise."""
    ESTIMATORS.remove(name)


def estimator_spec(name: str | Estimator) -> Estimator:
    """The :class:`Estimator` registered as ``name`` (``UnknownEstimatorError``, a KeyError, if
    none); an Estimator is returned as it is."""
    return name if isinstance(name, Estimator) else ESTIMATORS.get(name)


def get_estimator(name: str) -> EstimatorFn:
    """The estimator function registered as ``name`` (``UnknownEstimatorError``, a KeyError, if none)."""
    return estimator_spec(name).fn


def list_estimators() -> list[str]:
    """Names of the registered estimators, in registration order."""
    return ESTIMATORS.names()


def segment_ids_for(estimator: str | Estimator, response_mask: Tensor, answered: Answered = None) -> Tensor:
    """The segment ids ``estimator`` (an :class:`Estimator` or its name) reads, from a response
    mask: :meth:`Estimator.segment_ids`."""
    return estimator_spec(estimator).segment_ids(response_mask, answered)


RewardColumn = Tensor | Sequence[float] | Sequence[bool]  # one value per rollout of a batch


def _check_finite(where: str, tensor: Tensor) -> None:
    bad = ~torch.isfinite(tensor)
    if bool(bad.any()):
        rows = (bad.any(dim=1) if bad.dim() == 2 else bad).nonzero().flatten()[:8].tolist()
        raise ValueError(f"{where} has non-finite values (NaN/inf) at rollouts {rows}")


class RewardView(Mapping[str, Tensor]):
    """Read-only view of the caller's rewards that checks each one when an estimator reads it.

    Values come back as 1-D tensors of length ``B`` on the segment ids' device; lists are
    converted. A missing key raises :class:`MissingRewardError` naming the estimator; NaN or inf
    raises ``ValueError``. Only the keys an estimator reads are checked, so callers may pass extras.
    """

    def __init__(
        self,
        estimator: str,
        rewards: Mapping[str, RewardColumn],
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
        self._checked: dict[Any, Tensor] = {}

    def __getitem__(self, key: str) -> Tensor:
        if key in self._checked:
            return self._checked[key]
        if key not in self._raw:
            raise self._missing(key)
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
            _check_finite(where, tensor)
        return tensor

    def per_turn(self, key: str, turns: Tensor) -> Tensor:
        """The reward ``key`` as ``[B, K]`` floats, column k - 1 for tool turn k: a ``[B, K]``
        tensor, or one sequence of per-turn values per rollout (ragged rows are padded with 0).
        ``turns`` ``[B]``: how many tool turns each rollout has, the values it must hold at least."""
        cache_key = (key, "per_turn")
        if cache_key in self._checked:
            return self._checked[cache_key]
        if key not in self._raw:
            raise self._missing(key)
        where = f"per-turn reward {key!r} (estimator {self._estimator!r})"
        value = self._raw[key]
        given: Tensor | None = None  # values per rollout, when they come as sequences
        if not isinstance(value, Tensor):
            try:
                rows = [[float(v) for v in row] for row in value]
            except (TypeError, ValueError) as err:
                raise ValueError(f"{where} must be [B, K] numbers or one sequence per rollout: {err}") from None
            width = max((len(row) for row in rows), default=0)
            given = torch.tensor([len(row) for row in rows], dtype=torch.long)
            value = torch.tensor(pad_rows(rows, width), dtype=torch.float64).reshape(len(rows), width)
        if value.dim() != 2 or value.shape[0] != self._batch_size:
            raise ValueError(f"{where} must have shape [{self._batch_size}, K], got {tuple(value.shape)}")
        if value.is_complex() or value.dtype == torch.bool:
            raise ValueError(f"{where} must be real numbers, got dtype {value.dtype}")
        device = value.device if self._device is None else torch.device(self._device)
        tensor = value.to(device=device, dtype=stat_dtype(device))
        _check_finite(where, tensor)
        turns = turns.cpu()
        most = int(turns.max()) if turns.numel() else 0
        if tensor.shape[1] < most:
            raise ValueError(
                f"per-turn reward {key!r} has {tensor.shape[1]} column(s), but the segment ids hold {most} tool turns"
            )
        short = (given < turns).nonzero().flatten() if given is not None else torch.zeros(0)
        if short.numel():  # a ragged row shorter than its rollout's turns would read padding as rewards
            row = int(short[0])
            raise ValueError(
                f"{where} holds {int(given[row])} value(s) for rollout {row}, which has {int(turns[row])} tool "
                f"turns (rollouts short of values: {short[:8].tolist()})"
            )
        self._checked[cache_key] = tensor
        return tensor

    def _missing(self, key: str) -> MissingRewardError:
        return MissingRewardError(
            f"estimator {self._estimator!r} needs reward {key!r}, but rewards only has {sorted(map(str, self._raw))}"
        )

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
    estimator: str | Estimator,
    *,
    group_ids: Tensor | Sequence[Hashable],
    segment_ids: Tensor,
    rewards: Mapping[str, RewardColumn],
    config: AdvantageConfig | Mapping[str, Any] | None = None,
    valid: Tensor | Sequence[bool] | None = None,
) -> Tensor:
    """Per-token advantages ``[B, T]`` (float32) from ``estimator`` (an :class:`Estimator`, or the
    name it is registered under).

    ``group_ids``: one id per rollout (tensor or hashables; rollouts of one prompt share it).
    ``segment_ids``: ``[B, T]`` codes from ``segment_ids_for(estimator, response_mask)``. An estimator
    of the role layout also accepts turn-layout ids (they are collapsed to 0/1/2); one of the turn
    layout refuses role-layout tool codes, which cannot say which turn a token belongs to.
    ``rewards``: reward name -> ``[B]`` values (``[B, K]`` for per-turn ones); which names depends
    on the estimator. ``config``: the ``rl.advantage`` section (or a mapping of it). ``valid``:
    ``[B]`` flags; a rollout marked False (void: the simulator or the judge failed, not the policy)
    is left out of every group statistic and gets advantage 0, as if it had not been sampled.
    """
    return estimator_spec(estimator).advantages(
        group_ids=group_ids, segment_ids=segment_ids, rewards=rewards, config=config, valid=valid
    )


def _advantages_of_valid(
    estimator: Estimator,
    group_ids: Tensor | Sequence[Hashable],
    segment_ids: Tensor,
    rewards: Mapping[str, RewardColumn],
    config: AdvantageConfig | Mapping[str, Any] | None,
    valid: Tensor | Sequence[bool],
) -> Tensor:
    """The estimator on the valid rollouts alone, scattered back; void rollouts get 0."""
    if not isinstance(segment_ids, Tensor):
        raise TypeError(f"segment_ids must be a torch.Tensor, got {type(segment_ids).__name__}")
    keep = torch.as_tensor(valid, dtype=torch.bool, device=segment_ids.device).flatten()
    if keep.numel() != segment_ids.shape[0]:
        raise ValueError(f"valid has {keep.numel()} flags for a batch of {segment_ids.shape[0]} rollouts")
    out = torch.zeros(segment_ids.shape, dtype=torch.float32, device=segment_ids.device)
    if not bool(keep.any()):
        return out
    rows = keep.nonzero().flatten()
    ids = (
        group_ids[rows.to(group_ids.device)] if isinstance(group_ids, Tensor) else [group_ids[i] for i in rows.tolist()]
    )
    kept_rewards = {
        key: value[rows.to(value.device)] if isinstance(value, Tensor) else [value[i] for i in rows.tolist()]
        for key, value in rewards.items()
    }
    out[rows] = estimator.advantages(group_ids=ids, segment_ids=segment_ids[rows], rewards=kept_rewards, config=config)
    return out
