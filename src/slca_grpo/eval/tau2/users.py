"""The user side of a τ² simulation: τ²'s LLM user simulator, or a scripted user for offline runs.

The scripted user is for smoke tests and for proving the harness with the oracle, not for scores:
it replays fixed turns whatever the agent says. Each turn may first perform user-side tool calls
(telecom's device actions), then says its text; after the last turn it sends τ²'s stop token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from slca_grpo.data.tau2.gold import USER, gold_actions, gold_segments, opening_request
from slca_grpo.data.tau2.package import import_tau2
from slca_grpo.eval.tau2.spec import UserLLMSpec

import_tau2("tau2.user.user_simulator")

from tau2.data_model.message import MultiToolMessage, ToolCall, UserMessage  # noqa: E402
from tau2.user.base import STOP, BaseUser, UserState, is_valid_user_history_message  # noqa: E402
from tau2.user.user_simulator import UserSimulator  # noqa: E402

SCRIPTED = "scripted"
DONE_TEXT = "I have done that. What next?"


@dataclass(frozen=True)
class ScriptedTurn:
    """One user turn: tool calls to perform first (``(name, arguments)`` pairs), then ``text``."""

    text: str
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()


class ScriptedUserState(UserState):
    """τ²'s user state plus the position in the script."""

    turn_index: int = 0
    calls_done: int = 0


class ScriptedUser(BaseUser):
    """Replays ``turns``, one per agent message to the user, then ends with ``###STOP###``."""

    def __init__(self, turns: Sequence[ScriptedTurn]) -> None:
        super().__init__(instructions=None, llm=None, llm_args=None)
        self.turns = tuple(turns)

    def get_init_state(self, message_history: list[Any] | None = None) -> ScriptedUserState:
        history = list(message_history or [])
        if not all(is_valid_user_history_message(m) for m in history):
            raise ValueError("user history may hold only user, assistant-text and user-tool messages")
        return ScriptedUserState(system_messages=[], messages=history)

    @classmethod
    def is_stop(cls, message: UserMessage) -> bool:
        return UserSimulator.is_stop(message)

    def set_seed(self, seed: int) -> None:
        pass  # nothing random here; τ²'s base class would demand an LLM

    def generate_next_message(self, message: Any, state: ScriptedUserState) -> tuple[UserMessage, ScriptedUserState]:
        if isinstance(message, MultiToolMessage):
            state.messages.extend(message.tool_messages)
        elif message is not None:
            state.messages.append(message)
        reply = self._next_reply(state)
        state.messages.append(reply)
        return reply, state

    def _next_reply(self, state: ScriptedUserState) -> UserMessage:
        if state.turn_index >= len(self.turns):
            return UserMessage(role="user", content=STOP, cost=0.0)
        turn = self.turns[state.turn_index]
        if state.calls_done < len(turn.tool_calls):
            name, arguments = turn.tool_calls[state.calls_done]
            call = ToolCall(
                id=f"user_{state.turn_index}_{state.calls_done}",
                name=name,
                arguments=dict(arguments),
                requestor="user",
            )
            state.calls_done += 1
            return UserMessage(role="user", tool_calls=[call], cost=0.0)
        state.turn_index += 1
        state.calls_done = 0
        return UserMessage(role="user", content=turn.text, cost=0.0)


def scripted_turns(task: Any, follow_gold_user_actions: bool = True) -> list[ScriptedTurn]:
    """The task's request as the first turn; with ``follow_gold_user_actions``, one more turn per
    run of user-side gold actions, performed in order (these match the oracle's instructions)."""
    turns = [ScriptedTurn(text=opening_request(task) or "Hello, I need help.")]
    if follow_gold_user_actions:
        for segment in gold_segments(gold_actions(task)):
            if segment.requestor == USER:
                calls = tuple((a.name, dict(a.arguments or {})) for a in segment.actions)
                turns.append(ScriptedTurn(text=DONE_TEXT, tool_calls=calls))
    return turns


def user_tools_of(environment: Any) -> list[Any] | None:
    """The environment's user-side tools (telecom's phone), or ``None`` where the user has none."""
    if getattr(environment, "user_tools", None) is None:
        return None
    return environment.get_user_tools()


def make_user(user: str | UserLLMSpec, task: Any, environment: Any, max_retries: int = 3) -> BaseUser:
    """A fresh user for one simulation: scripted, or τ²'s ``UserSimulator`` on the given endpoint."""
    if isinstance(user, UserLLMSpec):
        return UserSimulator(
            tools=user_tools_of(environment),
            instructions=str(task.user_scenario),
            llm=user.litellm_model,
            llm_args={**user.litellm_args(), "num_retries": max_retries},
        )
    if user == SCRIPTED:
        return ScriptedUser(scripted_turns(task))
    raise ValueError(f"unknown user {user!r}: use 'scripted' or an openai:BASE_URL#MODEL spec")
