"""Reading a τ² task's gold answer: its actions (split by who performs them) and what to say.

Works on τ² ``Task`` objects by attribute only, so it needs no τ² import of its own.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

ASSISTANT = "assistant"
USER = "user"


@dataclass(frozen=True)
class GoldSegment:
    """Consecutive gold actions performed by the same side (``assistant`` or ``user``)."""

    requestor: str
    actions: tuple[Any, ...]  # τ² ``Action``s: ``.name``, ``.arguments``, ``.action_id``


def gold_actions(task: Any, skip_action_ids: Collection[str] = ()) -> list[Any]:
    """The task's gold actions in order, minus those whose ``action_id`` is in ``skip_action_ids``."""
    criteria = getattr(task, "evaluation_criteria", None)
    actions = list(getattr(criteria, "actions", None) or [])
    return [a for a in actions if a.action_id not in set(skip_action_ids)]


def gold_segments(actions: Sequence[Any]) -> list[GoldSegment]:
    """Split actions into runs by requestor, keeping their order."""
    segments: list[GoldSegment] = []
    for action in actions:
        requestor = getattr(action, "requestor", ASSISTANT) or ASSISTANT
        if segments and segments[-1].requestor == requestor:
            segments[-1] = GoldSegment(requestor, (*segments[-1].actions, action))
        else:
            segments.append(GoldSegment(requestor, (action,)))
    return segments


def communicate_info(task: Any) -> list[str]:
    criteria = getattr(task, "evaluation_criteria", None)
    return [str(x) for x in (getattr(criteria, "communicate_info", None) or [])]


def call_format(action: Any) -> str:
    """``name(a=1, b='x')`` for instructions to the user."""
    arguments = ", ".join(f"{k}={v!r}" for k, v in (action.arguments or {}).items())
    return f"{action.name}({arguments})"


def opening_request(task: Any) -> str:
    """The user's first message, from the scenario's reason for calling and what the user knows."""
    instructions = task.user_scenario.instructions
    if isinstance(instructions, str):
        return instructions.strip()
    parts = [instructions.reason_for_call, instructions.known_info]
    return "\n".join(p.strip() for p in parts if p and p.strip())
