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

A reward that needs no service is one function, of one rollout or (``batched=True``) of the
whole batch, as TRL's reward functions are::

    @register_reward("calls")
    def calls(parsed, task, config) -> float:
        return float(len(parsed.calls))

    @register_reward("calls_vs_batch", batched=True)
    def calls_vs_batch(parsed, tasks, config) -> list[float]:
        counts = [len(p.calls) for p in parsed]
        return [count - sum(counts) / len(counts) for count in counts]

A family with settings of its own (``settings=`` a dataclass) is configured as
``reward.<family>.<field>``; a function gets them as one more argument, a subclass reads
``self.own_settings(config)``.

Estimators declare the names they read (``register_estimator(..., rewards=("calls",))``) and the
trainer computes only the families that provide them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from slca_grpo.chat import ParsedResponse
from slca_grpo.config import check_subsection_type, subsection_settings
from slca_grpo.datatypes import Task, ToolCall
from slca_grpo.registry import Registry, UnknownNameError
from slca_grpo.rewards.completeness import CompletenessVerdict
from slca_grpo.rewards.config import FAMILY_SETTINGS, RewardConfig
from slca_grpo.rewards.judge_base import JudgeRequest, JudgeVerdict

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
    "pad_rows",
    "register_reward",
    "register_reward_family",
    "unregister_reward_family",
]

RewardValue = float | bool | tuple[float, ...]  # a tuple: one value per turn


class UnknownRewardError(UnknownNameError):
    """Raised for a reward (or family) name nothing registered provides."""


def pad_rows(rows: Sequence[Sequence[float]], width: int) -> list[list[float]]:
    """Ragged rows of per-turn values padded with 0 to ``width`` columns."""
    return [list(row) + [0.0] * (width - len(row)) for row in rows]


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
    # The dataclass of the family's own settings, configured as ``reward.<name>.<field>``.
    settings: type | None = field(default=None, kw_only=True)
    # True: ``compute_rewards`` calls ``plan_turns`` with the rollout's turns when it has them.
    uses_turns: ClassVar[bool] = False

    def own_settings(self, config: RewardConfig) -> Any:
        """This family's settings in ``config`` (their defaults if the config predates the
        registration); None when it has none."""
        return subsection_settings(config.settings, self.name, self.settings, f"reward.{self.name}")

    def plan_batch(
        self,
        parsed: Sequence[ParsedResponse],
        tasks: Sequence[Task],
        config: RewardConfig,
        turns: Sequence[Sequence[Any]] | None = None,
    ) -> list[Planned]:
        """One plan per rollout of a batch: ``plan_turns`` with each rollout's turns when they are
        given and the family uses them, else ``plan``. Override to see the whole batch at once."""
        if turns is not None and self.uses_turns:
            return [self.plan_turns(rollout_turns, task, config) for rollout_turns, task in zip(turns, tasks)]
        return [self.plan(one, task, config) for one, task in zip(parsed, tasks)]

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
    """A family of one reward computed by a function; no services.

    Per rollout, ``fn(parsed, task, config) -> float``; with ``batched``, the whole batch at once,
    ``fn(parsed_list, tasks, config) -> list[float]`` (one value per rollout, in order). With
    ``settings``, the family's own settings come as one more argument after ``config``.
    """

    fn: Callable[..., Any]
    batched: bool = False

    def _config_args(self, config: RewardConfig) -> tuple[Any, ...]:
        return (config,) if self.settings is None else (config, self.own_settings(config))

    def plan(self, parsed: ParsedResponse, task: Task, config: RewardConfig) -> Planned:
        if self.batched:
            return self.plan_batch([parsed], [task], config)[0]
        return Planned(state=self.fn(parsed, task, *self._config_args(config)))

    def plan_batch(
        self,
        parsed: Sequence[ParsedResponse],
        tasks: Sequence[Task],
        config: RewardConfig,
        turns: Sequence[Sequence[Any]] | None = None,
    ) -> list[Planned]:
        if not self.batched:
            return super().plan_batch(parsed, tasks, config, turns)
        values = self.fn(list(parsed), list(tasks), *self._config_args(config))
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) != len(parsed):
            got = f"{len(values)} values" if isinstance(values, Sequence) else type(values).__name__
            raise ValueError(f"batched reward {self.name!r} returned {got} for {len(parsed)} rollouts")
        return [Planned(state=value) for value in values]

    def finish(self, state: Any, answers: Answers, config: RewardConfig) -> FamilyResult:
        value = state if isinstance(state, bool) else float(state)
        return FamilyResult({self.name: value})


# Every reward family by name: the built-ins and the plugins' (:func:`register_reward_family`).
REWARD_FAMILIES: Registry[RewardFamily] = Registry("reward family", unknown=UnknownRewardError)


def register_reward_family(family: RewardFamily, *, replace: bool = False) -> RewardFamily:
    """Register ``family``; its reward names must not be provided by another family."""
    if not isinstance(family, RewardFamily):
        raise TypeError(f"expected a RewardFamily, got {type(family).__name__}")
    if not isinstance(family.name, str) or not family.name.strip():
        raise ValueError(f"reward family name must be a non-empty string, got {family.name!r}")
    if not family.provides or not all(isinstance(n, str) and n.strip() for n in family.provides):
        raise ValueError(f"reward family {family.name!r} must provide at least one reward name")
    if family.settings is not None:
        check_subsection_type("reward family", family.name, family.settings, RewardConfig)
    for other in REWARD_FAMILIES.values():
        clash = set(other.provides) & set(family.provides)
        if other.name != family.name and clash:
            raise ValueError(f"reward(s) {sorted(clash)} of {family.name!r} are already provided by {other.name!r}")
    origin = family.fn.__module__ if isinstance(family, FunctionReward) else type(family).__module__
    REWARD_FAMILIES.add(family.name, family, origin=origin or "", replace=replace)
    if family.name in FAMILY_SETTINGS:  # a replaced family's settings go with it
        FAMILY_SETTINGS.remove(family.name)
    if family.settings is not None:
        FAMILY_SETTINGS.add(family.name, family.settings, origin=origin or "")
    return family


def register_reward(
    name: str, *, batched: bool = False, settings: type | None = None, replace: bool = False
) -> Callable[[Callable[..., Any]], Callable]:
    """Decorator registering a function as the reward ``name``: ``fn(parsed, task, config) -> float``,
    or with ``batched=True`` ``fn(parsed_list, tasks, config) -> list[float]``. ``settings``: a
    dataclass of the reward's own settings (``reward.<name>.<field>``), passed after ``config``."""

    def decorator(fn: Callable[..., Any]) -> Callable:
        if not callable(fn):
            raise TypeError(f"reward {name!r} must be callable, got {type(fn).__name__}")
        family = FunctionReward(name=name, provides=(name,), fn=fn, batched=batched, settings=settings)
        register_reward_family(family, replace=replace)
        return fn

    return decorator


def unregister_reward_family(name: str) -> None:
    """Remove the family ``name`` (for plugins and tests); unknown names raise."""
    REWARD_FAMILIES.remove(name)
    if name in FAMILY_SETTINGS:
        FAMILY_SETTINGS.remove(name)


def get_reward_family(name: str) -> RewardFamily:
    return REWARD_FAMILIES.get(name)


def list_reward_families() -> list[str]:
    return REWARD_FAMILIES.names()


def list_rewards() -> list[str]:
    """Every reward name a registered family provides, in registration order."""
    return [name for family in REWARD_FAMILIES.values() for name in family.provides]


def family_providing(name: str) -> RewardFamily:
    """The family that computes the reward ``name``."""
    for family in REWARD_FAMILIES.values():
        if name in family.provides:
            return family
    raise UnknownRewardError(f"unknown reward {name!r}; known: {', '.join(list_rewards())}")
