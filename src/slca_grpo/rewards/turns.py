"""The per-turn reward (docs/rewards.md): each tool-call turn scored against the gold step it serves.

Pure arithmetic over a task and a rollout's turns (their texts), so it runs without our trainer:
a verl reward function can return it as an extra. Rules:

- **Which turns.** A turn is one assistant message (one run of learnable tokens). A *call turn*
  holds a ``<tool_call>`` or ``</tool_call>`` tag (``chat.parser.is_call_turn``); other turns
  serve no step and score 0.
- **Which step.** The task's non-empty gold steps are served in order, each by at most one turn.
  A turn can serve a step only if it *earns something for it*: it calls one of the step's tools
  (name F1 > 0 against the step) and its execution reward against the step is above 0. Format and
  parallel credit alone do not count: any well-formed call earns them, whatever step it is for.
  Among the order-preserving one-to-one pairings of call turns with steps they can serve, the one
  with the largest total execution reward wins (on a tie, the earlier turn takes the step). A turn
  is scored with the execution reward's parts (format, name F1, keys, values, parallel) against
  the one step it serves, as HierR scores a whole response against all of them.
- **Extra turns** (more call turns than steps, a malformed or cut-off call, a call to a tool that
  does not exist or to no step's tool, a repeat of a served step, a step called out of order after
  a later one, any call on a task with no gold step) serve nothing and score 0: the floor.
- **Missing steps** (no turn serves them) are charged to a turn that earned something: the first
  turn serving a later step (it went past the missing one), or, when none does, the last serving
  turn (the rollout stopped after it). A charged turn scores the mean of its own score and a 0 for
  every step charged to it, ``score / (1 + charged)``, as HierR's flat reward counts an unmatched
  gold call 0. Without a charge, per-turn normalisation over the rollouts that have a turn would
  never say whether the turn should exist: stopping early, or skipping step 1, would cost nothing.
  A rollout whose call turns serve nothing is charged nowhere: every turn of it is already at 0.

Why charges go only to serving turns: a charge on a turn that scores 0 costs nothing, so a rollout
could dodge it by ending with a junk call that takes the charge. Since a serving turn scores above
0, every charge strictly lowers a reward, and since neither alignment nor charges look at turns
that serve nothing, appending any such turn to a rollout leaves the rewards of its earlier turns
unchanged and adds a turn at the floor: a junk call never beats stopping (a property test checks
this over generated turn sequences). The charge divides rather than subtracts so a reward stays in
[0, 1] with 0 the floor: a subtracted charge would rank a real but charged turn below a junk turn
at the same position in another rollout of the group.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from slca_grpo.chat.parser import TOOL_CALL_CLOSE, ParsedResponse, is_call_turn
from slca_grpo.datatypes import Task, ToolCall, Turn
from slca_grpo.rewards.config import ExecutionWeights, RewardConfig
from slca_grpo.rewards.execution import ExecutionReward, execution_reward, parse_for_task
from slca_grpo.rewards.registry import Answers, FamilyResult, Planned, RewardFamily, register_reward_family

__all__ = ["TURN_NAMES", "TurnRewards", "TurnScore", "split_turns", "turn_rewards"]

TURN_NAMES = ("turn",)
TIE_TOLERANCE = 1e-12  # totals this close count as equal, so the earlier turn keeps the step

TurnInput = str | ParsedResponse | Turn


@dataclass(frozen=True)
class TurnScore:
    """One turn: the gold step it serves (0-based among the non-empty steps; None: none), its
    execution reward against that step, and how many missing steps are charged to it."""

    has_call: bool
    step: int | None = None
    execution: ExecutionReward | None = None
    charged: int = 0

    @property
    def score(self) -> float:
        """The execution reward against the served step (0 when it serves none)."""
        return self.execution.total if self.execution is not None else 0.0

    @property
    def reward(self) -> float:
        return self.score / (1 + self.charged)

    def to_dict(self) -> dict[str, Any]:
        return {
            "has_call": self.has_call,
            "step": self.step,
            "reward": self.reward,
            "score": self.score,
            "charged": self.charged,
            "execution": self.execution.to_dict() if self.execution is not None else None,
        }


@dataclass(frozen=True)
class TurnRewards:
    """The per-turn reward of one rollout: one score per turn, in order."""

    turns: tuple[TurnScore, ...]
    steps: int  # the task's non-empty gold steps

    @property
    def values(self) -> tuple[float, ...]:
        return tuple(turn.reward for turn in self.turns)

    @property
    def step_scores(self) -> tuple[float, ...]:
        """Per gold step, the execution reward of the turn that serves it against it (0 when none
        does); missing-step charges are not in it."""
        scores = [0.0] * self.steps
        for turn in self.turns:
            if turn.step is not None:
                scores[turn.step] = turn.score
        return tuple(scores)

    @property
    def missing(self) -> int:
        """Gold steps no turn serves."""
        return self.steps - sum(turn.step is not None for turn in self.turns)

    @property
    def extra(self) -> int:
        """Call turns that serve no step."""
        return sum(turn.has_call and turn.step is None for turn in self.turns)

    def to_dict(self) -> dict[str, Any]:
        return {
            "turn": list(self.values),
            "steps": self.steps,
            "missing": self.missing,
            "extra": self.extra,
            "turns": [turn.to_dict() for turn in self.turns],
        }


def split_turns(text: str) -> list[str]:
    """A whole response cut into turns after each ``</tool_call>`` (the agent loop's stop string),
    for when the turn boundaries are not known; the tool responses go with the next turn."""
    pieces = text.split(TOOL_CALL_CLOSE)
    turns = [piece + TOOL_CALL_CLOSE for piece in pieces[:-1]]
    if pieces[-1].strip() or not turns:
        turns.append(pieces[-1])
    return turns


def _turn_text(turn: TurnInput) -> str | ParsedResponse:
    if isinstance(turn, Turn):
        return turn.text
    if isinstance(turn, (str, ParsedResponse)):
        return turn
    raise TypeError(f"a turn must be its text, a ParsedResponse or a Turn, got {type(turn).__name__}")


def _align(scores: list[list[float | None]]) -> list[int | None]:
    """For each call turn, the step it serves: the order-preserving one-to-one pairing with the
    largest total score, over the pairs a turn can serve (``None``: it earns nothing for that
    step); on ties a turn takes a step rather than passing it to a later turn."""
    turns, steps = len(scores), len(scores[0]) if scores else 0
    # best[i][j]: the largest total pairing turns i.. with steps j..
    best = [[0.0] * (steps + 1) for _ in range(turns + 1)]
    for i in range(turns - 1, -1, -1):
        for j in range(steps - 1, -1, -1):
            take = scores[i][j]
            options = [best[i + 1][j], best[i][j + 1]]
            if take is not None:
                options.append(take + best[i + 1][j + 1])
            best[i][j] = max(options)
    served: list[int | None] = [None] * turns
    i = j = 0
    while i < turns and j < steps:
        take = scores[i][j]
        if take is not None and take + best[i + 1][j + 1] >= best[i][j] - TIE_TOLERANCE:
            served[i] = j
            i, j = i + 1, j + 1
        elif best[i][j + 1] >= best[i][j] - TIE_TOLERANCE:
            j += 1  # step j goes unserved by turn i or any later one
        else:
            i += 1
    return served


def _earned(execution: ExecutionReward) -> float | None:
    """The score a turn brings to a step it can serve, or None when it earns nothing for the step
    (no call to the step's tools, or nothing at all)."""
    return execution.total if execution.name_f1 > 0 and execution.total > 0 else None


def _step_task(task: Task, step: Sequence[ToolCall]) -> Task:
    return dataclasses.replace(task, gold_calls=[list(step)])


def turn_rewards(
    task: Task, turns: Sequence[TurnInput], config: RewardConfig | ExecutionWeights | None = None
) -> TurnRewards:
    """The per-turn reward of a rollout, from its turns in order: texts, parsed texts or ``Turn``s
    (their ``text``). ``config`` gives the execution weights (a ``RewardConfig`` or the weights)."""
    if isinstance(turns, (str, bytes)):  # one text would be read as one turn per character
        raise TypeError("turns must be a sequence of turns, got a single text")
    weights = config.weights if isinstance(config, RewardConfig) else config or ExecutionWeights()
    parsed = [parse_for_task(_turn_text(turn), task) for turn in turns]
    steps = [step for step in task.gold_calls if step]
    step_tasks = [_step_task(task, step) for step in steps]
    call_turns = [index for index, p in enumerate(parsed) if is_call_turn(p.text)]
    executions = [
        [execution_reward(parsed[index], step_task, weights) for step_task in step_tasks] for index in call_turns
    ]
    served = _align([[_earned(e) for e in row] for row in executions])
    charged = _charges(served, len(steps))
    scores = [TurnScore(has_call=False) for _ in parsed]
    for row, index, step, charge in zip(executions, call_turns, served, charged):
        scores[index] = TurnScore(True, step, row[step] if step is not None else None, charge)
    return TurnRewards(tuple(scores), len(steps))


def _charges(served: Sequence[int | None], steps: int) -> list[int]:
    """Per call turn, the missing steps charged to it: each unserved step goes to the first turn
    serving a later step, or else to the last serving turn; with no serving turn, to none."""
    charged = [0] * len(served)
    serving = [i for i, step in enumerate(served) if step is not None]
    if not serving:
        return charged
    done = {served[i] for i in serving}
    for step in range(steps):
        if step in done:
            continue
        later = next((i for i in serving if served[i] > step), serving[-1])  # type: ignore[operator]
        charged[later] += 1
    return charged


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class TurnRewardFamily(RewardFamily):
    """The per-turn reward as a registered reward: ``turn``, one value per turn of a rollout."""

    uses_turns: ClassVar[bool] = True

    def plan(self, parsed: ParsedResponse, task: Task, config: RewardConfig) -> Planned:
        return self.plan_turns(split_turns(parsed.text), task, config)

    def plan_turns(self, turns: Sequence[TurnInput], task: Task, config: RewardConfig) -> Planned:
        return Planned(state=turn_rewards(task, turns, config))

    def finish(self, state: Any, answers: Answers, config: RewardConfig) -> FamilyResult:
        return FamilyResult({"turn": state.values}, detail=state)

    def metrics(self, results: Sequence[FamilyResult]) -> dict[str, float]:
        """Mean score of gold step j's turn (``turn_step_j``, over rollouts whose task has step j),
        and the mean number of missing steps and extra call turns per rollout."""
        details: list[TurnRewards] = [r.detail for r in results]
        metrics: dict[str, float | None] = {
            "turn_missing": _mean([d.missing for d in details]),
            "turn_extra": _mean([d.extra for d in details]),
        }
        for step in range(max((d.steps for d in details), default=0)):
            metrics[f"turn_step_{step + 1}"] = _mean([d.step_scores[step] for d in details if d.steps > step])
        return {key: value for key, value in metrics.items() if value is not None}

    def describe(self, result: FamilyResult) -> dict[str, Any]:
        return result.detail.to_dict()


register_reward_family(TurnRewardFamily(name="turn", provides=TURN_NAMES))
