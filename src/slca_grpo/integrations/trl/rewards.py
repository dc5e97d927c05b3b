"""HierR (and every reward family an estimator reads) as TRL reward functions.

TRL calls each reward function once per batch with the rows' columns as keyword arguments and
takes one float (or None) per completion. :class:`TaskRewards` scores a batch once — every named
reward in one ``compute_rewards`` call, so a judge is asked once per rollout — and hands out one
function per scalar reward (``score``, ``tool``, ``summary``, ``no_call``, ToolPO's ``success``,
…), each reading its column of that one scoring. Per-turn rewards (``slca-turn``'s ``turn``, one
value per turn) are no TRL reward; the trainer reads them from :meth:`TaskRewards.score`.

The text scored is the one our rollouts return (``slca_response_text``: the response decoded with
its chat markers, as our trainer scores it). Without it — a plain TRL generation — the completion
messages TRL parsed are written back as Hermes text (content, then one ``<tool_call>`` block per
parsed call). A rollout the simulator failed on, or whose judge or checker failed behind a reward
the estimator reads, is void: every function returns None for it, which TRL leaves out of its
group statistics as the trainer leaves it out of ours.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slca_grpo.chat.template import assistant_text
from slca_grpo.datatypes import Task
from slca_grpo.integrations.trl.data import task_of_row
from slca_grpo.rewards.batch import RewardBatch, compute_rewards, families_for
from slca_grpo.rewards.config import RewardConfig
from slca_grpo.rewards.factory import make_checker, make_judge
from slca_grpo.rewards.hierarchical import HIERR_NAMES
from slca_grpo.rewards.registry import family_providing

# Fields our rollout function returns beside TRL's three; TRL hands them to the reward functions.
RESPONSE_TEXT_FIELD = "slca_response_text"
TURN_TEXTS_FIELD = "slca_turn_texts"  # each assistant turn's text, for per-turn rewards
SIMULATOR_FAULT_FIELD = "slca_simulator_fault"  # the kind of the first simulator fault, "" if none
ANSWERED_FIELD = "slca_answered"  # whether the rollout's last turn is its answer
# How the episode ended, logged by the trainer as rollout/<name> (the means over the batch), as our
# trainer logs them: cut off before an answer, asked for a final answer by the loop, calls repeated.
ENDING_FIELDS = {
    "truncated": "slca_truncated",
    "forced_answer": "slca_forced_answer",
    "repeat_calls": "slca_repeat_calls",
}

__all__ = [
    "ANSWERED_FIELD",
    "ENDING_FIELDS",
    "RESPONSE_TEXT_FIELD",
    "SIMULATOR_FAULT_FIELD",
    "TURN_TEXTS_FIELD",
    "Scored",
    "TaskRewards",
    "completion_text",
]


def completion_text(completion: Any) -> str:
    """A TRL completion as the text our parser reads: a string as it is; conversational messages
    as their content with each parsed ``tool_calls`` entry written back as a ``<tool_call>`` block."""
    if isinstance(completion, str):
        return completion
    parts = []
    for message in completion or []:
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        content = content if isinstance(content, str) else ""
        calls = [call.get("function", call) for call in message.get("tool_calls") or [] if isinstance(call, Mapping)]
        parts.append(assistant_text(content, calls))
    return "\n".join(parts)


@dataclass(frozen=True)
class Scored:
    """One batch's rewards: the batch itself and, per rollout, whether it is void."""

    batch: RewardBatch
    void: list[bool]

    def values(self, name: str) -> list[Any]:
        """``name``'s value per rollout (None where void): floats, flags, or per-turn lists."""
        column = self.batch.as_dict()[name]
        return [None if void else value for value, void in zip(column, self.void, strict=True)]


class TaskRewards:
    """Rewards of TRL batches, scored once per batch.

    ``names``: the rewards to compute (default HierR's four); ``trained``: those whose judge or
    checker failing makes a rollout void (default: all of ``names``). ``config``: our reward
    settings (judge, weights, penalties); the judge and checker are built from it once.
    """

    def __init__(
        self,
        names: Iterable[str] = HIERR_NAMES,
        *,
        config: RewardConfig | None = None,
        trained: Iterable[str] | None = None,
        judge: Any = None,
        checker: Any = None,
    ):
        self.names = tuple(dict.fromkeys(names))
        for name in self.names:
            family_providing(name)  # an unknown reward name fails here, not mid-training
        self.trained = tuple(trained) if trained is not None else self.names
        self.config = config or RewardConfig()
        self.judge = judge if judge is not None else make_judge(config=self.config)
        self.checker = checker if checker is not None else make_checker(config=self.config)
        self.uses_turns = any(family.uses_turns for family in families_for(self.names))
        self._last_key: tuple | None = None
        self._last: Scored | None = None

    def score(
        self,
        texts: Sequence[str],
        tasks: Sequence[Task],
        *,
        turns: Sequence[Sequence[str]] | None = None,
        faults: Sequence[str] | None = None,
    ) -> Scored:
        """Every reward of ``names`` for each rollout; the last batch is kept, so the reward
        functions and the trainer asking again for the same rollouts score them once."""
        key = (
            tuple(texts),
            tuple(id(task) for task in tasks),
            None if turns is None else tuple(tuple(t) for t in turns),
            None if faults is None else tuple(faults),
        )
        if key == self._last_key and self._last is not None:
            return self._last
        if turns is None and self.uses_turns:
            raise ValueError(
                f"the rewards {self.names} include a per-turn reward, which needs each turn's text "
                f"({TURN_TEXTS_FIELD!r}); run the rollouts with slca_grpo.integrations.trl.AgentLoopRollouts"
            )
        batch = compute_rewards(
            list(texts),
            list(tasks),
            self.judge,
            self.config,
            names=self.names,
            checker=self.checker,
            turns=[list(t) for t in turns] if turns is not None else None,
        )
        failed = batch.failed_for(self.trained)
        faults = faults if faults is not None else [""] * len(texts)
        scored = Scored(batch, [bool(fault) or bad for fault, bad in zip(faults, failed, strict=True)])
        self._last_key, self._last = key, scored
        return scored

    def score_rows(self, completions: Sequence[Any], rows: Mapping[str, Sequence[Any]]) -> Scored:
        """:meth:`score` of a batch as TRL hands it to a reward function: ``completions`` and the
        rows' columns (``slca_task``, and our rollout's fields when it ran)."""
        if "slca_task" not in rows:
            raise ValueError(
                f"the reward functions need the task of each row in a 'slca_task' column (the batch has "
                f"{sorted(rows)}); build the dataset with slca_grpo.integrations.trl.task_dataset(tasks)"
            )
        tasks = [task_of_row({"slca_task": raw}, index) for index, raw in enumerate(rows["slca_task"])]
        texts = rows.get(RESPONSE_TEXT_FIELD)
        if texts is None:
            texts = [completion_text(completion) for completion in completions]
        turns = rows.get(TURN_TEXTS_FIELD)
        faults = rows.get(SIMULATOR_FAULT_FIELD)
        return self.score(texts, tasks, turns=turns, faults=faults)

    def scalar_names(self) -> tuple[str, ...]:
        """The rewards that are one number (or flag) per rollout: those TRL can take."""
        return tuple(name for name in self.names if not family_providing(name).uses_turns)

    def function(self, name: str) -> Callable[..., list[float | None]]:
        """TRL's reward function for ``name`` (its ``__name__`` is ``name``, which TRL logs)."""
        if name not in self.scalar_names():
            raise ValueError(f"{name!r} is not a per-rollout reward of {self.scalar_names()}")

        def reward(prompts=None, completions=None, completion_ids=None, **rows: Any) -> list[float | None]:
            scored = self.score_rows(completions or [], rows)
            return [None if value is None else float(value) for value in scored.values(name)]

        reward.__name__ = reward.__qualname__ = name
        reward.__doc__ = f"The {name!r} reward of each completion (None when the rollout is void)."
        return reward

    def functions(self) -> list[Callable[..., list[float | None]]]:
        """One TRL reward function per scalar reward, in ``names`` order."""
        return [self.function(name) for name in self.scalar_names()]
