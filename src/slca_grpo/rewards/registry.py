"""The reward registry: every per-rollout reward an estimator can read, by name.

Rewards come in *families* that compute one or more named values per rollout together (HierR
gives ``score``, ``tool``, ``summary`` and ``no_call``). A family works in two pure steps around
the shared services, so that a batch sends the judge requests of every family at once
(de-duplicated) and every completeness check at once:

- ``plan(parsed, task, config) -> Planned``: everything that needs no service, and what to ask;
- ``finish(state, answers, config) -> FamilyResult``: the values, once the answers are in.

A family that scores a rollout turn by turn sets ``uses_turns`` and plans with
``plan_turns(turns, task, config)`` when the caller knows the turns; its value is then a tuple of
floats, one per turn.

A reward that needs no service is one function::

    @register_reward("calls")
    def calls(parsed, task, config) -> float:
        return float(len(parsed.calls))

Estimators declare the names they read (``register_estimator(..., rewards=("calls",))``) and the
trainer computes only the families that provide them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from slca_grpo.chat import ParsedResponse
from slca_grpo.rewards.completeness import CompletenessVerdict
from slca_grpo.rewards.config import RewardConfig
from slca_grpo.rewards.judge_base import JudgeRequest, JudgeVerdict
from slca_grpo.types import Task, ToolCall

__all__ = [
    "Answers",
    "FamilyResult",
    "Planned",
    "RewardFamily",
    "UnknownRewardError",
    "family_providing",
    "get_reward_family",
    "list_reward_families",
    "list_rewards",
    "register_reward",
    "register_reward_family",
    "unregister_reward_family",
]

RewardValue = float | bool | tuple[float, ...]  # a tuple: one value per turn


@dataclass(frozen=True)
class Planned:
    """One rollout's plan: private ``state`` for ``finish``, judge requests, and a tool-call plan
    for the completeness checker (None: nothing to check)."""

    state: Any = None
    judge: tuple[JudgeRequest, ...] = ()
    check: tuple[ToolCall, ...] | None = None


@dataclass(frozen=True)
class Answers:
    """The services' answers to one rollout's plan: one verdict per judge request (in order), and
    the checker's verdicts on the plan's calls."""

    judge: tuple[JudgeVerdict, ...] = ()
    check: tuple[CompletenessVerdict, ...] = ()


@dataclass(frozen=True)
class FamilyResult:
    """One rollout's values (name → float, or bool for a flag) and the family's detail record."""

    values: Mapping[str, RewardValue]
    detail: Any = None


@dataclass(frozen=True)
class RewardFamily:
    """Named rewards computed together. Subclass and override ``plan``/``finish`` (and
    ``metrics``/``describe`` for richer logs), or register a plain function with
    :func:`register_reward`."""

    name: str
    provides: tuple[str, ...]
    # True: ``compute_rewards`` calls ``plan_turns`` with the rollout's turns when it has them.
    uses_turns: ClassVar[bool] = False

    def plan(self, parsed: ParsedResponse, task: Task, config: RewardConfig) -> Planned:
        raise NotImplementedError

    def plan_turns(self, turns: Sequence[Any], task: Task, config: RewardConfig) -> Planned:
        """Plan from the rollout's turns, in order (texts, parsed texts or ``Turn`` records)."""
        raise NotImplementedError

    def finish(self, state: Any, answers: Answers, config: RewardConfig) -> FamilyResult:
        raise NotImplementedError

    def metrics(self, results: Sequence[FamilyResult]) -> dict[str, float]:
        """Batch metrics (logged under ``reward/``): by default the mean of every value."""
        return {name: sum(float(r.values[name]) for r in results) / len(results) for name in self.provides if results}

    def describe(self, result: FamilyResult) -> dict[str, Any]:
        """A JSON-ready record of one rollout (``slca score`` prints it)."""
        return {name: result.values[name] for name in self.provides}


@dataclass(frozen=True)
class FunctionReward(RewardFamily):
    """A family of one reward from ``fn(parsed, task, config) -> float``; no services."""

    fn: Callable[[ParsedResponse, Task, RewardConfig], RewardValue]

    def plan(self, parsed: ParsedResponse, task: Task, config: RewardConfig) -> Planned:
        return Planned(state=self.fn(parsed, task, config))

    def finish(self, state: Any, answers: Answers, config: RewardConfig) -> FamilyResult:
        value = state if isinstance(state, bool) else float(state)
        return FamilyResult({self.name: value})


class UnknownRewardError(KeyError):
    """Raised for a reward (or family) name nothing registered provides."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


_FAMILIES: dict[str, RewardFamily] = {}


def register_reward_family(family: RewardFamily, *, replace: bool = False) -> RewardFamily:
    """Register ``family``; its reward names must not be provided by another family."""
    if not isinstance(family, RewardFamily):
        raise TypeError(f"expected a RewardFamily, got {type(family).__name__}")
    if not isinstance(family.name, str) or not family.name.strip():
        raise ValueError(f"reward family name must be a non-empty string, got {family.name!r}")
    if not family.provides or not all(isinstance(n, str) and n.strip() for n in family.provides):
        raise ValueError(f"reward family {family.name!r} must provide at least one reward name")
    if family.name in _FAMILIES and not replace:
        raise ValueError(f"reward family {family.name!r} is already registered (pass replace=True)")
    for other in _FAMILIES.values():
        clash = set(other.provides) & set(family.provides)
        if other.name != family.name and clash:
            raise ValueError(f"reward(s) {sorted(clash)} of {family.name!r} are already provided by {other.name!r}")
    _FAMILIES[family.name] = family
    return family


def register_reward(
    name: str, *, replace: bool = False
) -> Callable[[Callable[[ParsedResponse, Task, RewardConfig], RewardValue]], Callable]:
    """Decorator registering ``fn(parsed, task, config) -> float`` as the reward ``name``."""

    def decorator(fn: Callable[[ParsedResponse, Task, RewardConfig], RewardValue]) -> Callable:
        if not callable(fn):
            raise TypeError(f"reward {name!r} must be callable, got {type(fn).__name__}")
        register_reward_family(FunctionReward(name=name, provides=(name,), fn=fn), replace=replace)
        return fn

    return decorator


def unregister_reward_family(name: str) -> None:
    """Remove the family ``name`` (for plugins and tests); unknown names raise."""
    get_reward_family(name)
    del _FAMILIES[name]


def get_reward_family(name: str) -> RewardFamily:
    try:
        return _FAMILIES[name]
    except (KeyError, TypeError):
        raise UnknownRewardError(
            f"unknown reward family {name!r}; known: {', '.join(list_reward_families())}"
        ) from None


def list_reward_families() -> list[str]:
    return list(_FAMILIES)


def list_rewards() -> list[str]:
    """Every reward name a registered family provides, in registration order."""
    return [name for family in _FAMILIES.values() for name in family.provides]


def family_providing(name: str) -> RewardFamily:
    """The family that computes the reward ``name``."""
    for family in _FAMILIES.values():
        if name in family.provides:
            return family
    raise UnknownRewardError(f"unknown reward {name!r}; known: {', '.join(list_rewards())}")
