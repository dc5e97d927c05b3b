"""Our text agents inside τ²'s orchestrator.

:class:`ChatAgentAdapter` is a τ² ``LocalAgent``: τ² hands it the last user/tool message, it turns
the conversation into an :class:`~slca_grpo.eval.agent.AgentRequest` (OpenAI-style messages and
the tools' ``openai_schema``), asks a responder for Hermes text and turns that text back into a τ²
``AssistantMessage``: ``<tool_call>`` blocks become τ² tool calls (sent to the environment), prose
alone becomes a message to the user. Model output never raises here; see
:func:`text_to_assistant_message` for what malformed text becomes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from slca_grpo.chat import clean_answer, parse_tool_calls, strip_tool_call_blocks
from slca_grpo.data.tau2.package import import_tau2
from slca_grpo.data.tau2.prompt import tau2_system_prompt
from slca_grpo.eval.agent import AgentRequest

import_tau2("tau2.agent.base")

from tau2.agent.base import LocalAgent, is_valid_agent_history_message  # noqa: E402
from tau2.data_model.message import (  # noqa: E402
    AssistantMessage,
    Message,
    MultiToolMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from tau2.data_model.message import ToolCall as Tau2ToolCall  # noqa: E402

# What the user sees when the agent produced nothing at all (τ² rejects empty messages, and an
# empty turn is the agent's failure to record, not a reason to stop the simulation).
EMPTY_REPLY = "(no response)"

# Turn outcomes recorded per assistant turn (``AssistantMessage.raw_data["status"]``).
STATUS_CALLS = "calls"  # usable tool calls went to the environment
STATUS_TEXT = "text"  # prose went to the user
STATUS_MALFORMED = "malformed_as_text"  # only broken <tool_call> blocks: their text went to the user
STATUS_EMPTY = "empty"  # nothing usable at all: EMPTY_REPLY went to the user

Responder = Callable[[AgentRequest], str]

# A block whose call is well formed but names a tool the domain lacks still goes to τ²'s
# environment, which answers with an error, exactly as for an API model calling an unknown tool.


def to_openai_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """τ² messages as the OpenAI-style dicts of :class:`AgentRequest` (calls as ``{id, name, arguments}``)."""
    flat: list[Message] = []
    for message in messages:
        flat.extend(message.tool_messages if isinstance(message, MultiToolMessage) else [message])
    out: list[dict[str, Any]] = []
    call_names: dict[str, str] = {}
    for message in flat:
        content = message.content if isinstance(message.content, str) else ""
        if isinstance(message, SystemMessage):
            out.append({"role": "system", "content": content})
        elif isinstance(message, ToolMessage):
            item = {"role": "tool", "tool_call_id": message.id, "content": content}
            if message.id in call_names:
                item["name"] = call_names[message.id]
            out.append(item)
        elif isinstance(message, AssistantMessage):
            item = {"role": "assistant", "content": content}
            if message.tool_calls:
                item["tool_calls"] = [
                    {"id": call.id, "name": call.name, "arguments": call.arguments} for call in message.tool_calls
                ]
                call_names.update({call.id: call.name for call in message.tool_calls})
            out.append(item)
        elif isinstance(message, UserMessage):
            out.append({"role": "user", "content": content})
    return out


@dataclass(frozen=True)
class TurnConversion:
    """An agent's text as a τ² assistant message, with what happened to it."""

    message: AssistantMessage
    status: str
    malformed_blocks: int = 0


def text_to_assistant_message(
    text: Any, allowed_tools: Collection[str] | None, call_id_prefix: str = "call"
) -> TurnConversion:
    """Turn Hermes text into a τ² ``AssistantMessage``; never raises on model output.

    - Well-formed calls (also to unknown tools) become τ² tool calls with ids
      ``{call_id_prefix}_{i}``; prose beside them stays as the message content, as an
      OpenAI-compatible server's tool parser would return it. Broken blocks beside usable ones are
      dropped and counted.
    - Prose alone becomes a message to the user.
    - Only broken blocks (bad JSON, no name, non-object arguments): the whole text, tags removed,
      goes to the user as plain text, so the failure is visible in the conversation.
    - Nothing at all: :data:`EMPTY_REPLY`.
    """
    parsed = parse_tool_calls(text, allowed_tools=allowed_tools)
    calls = [call for block in parsed.blocks if block.is_executable for call in block.calls]
    malformed = sum(1 for block in parsed.blocks if not block.is_executable)
    prose = clean_answer(strip_tool_call_blocks(parsed.text))
    if calls:
        tool_calls = [
            Tau2ToolCall(id=f"{call_id_prefix}_{i}", name=call.name, arguments=dict(call.arguments))
            for i, call in enumerate(calls)
        ]
        message = AssistantMessage(role="assistant", content=prose or None, tool_calls=tool_calls, cost=0.0)
        return TurnConversion(message, STATUS_CALLS, malformed)
    if malformed:
        content, status = clean_answer(parsed.text) or EMPTY_REPLY, STATUS_MALFORMED
    elif prose:
        content, status = prose, STATUS_TEXT
    else:
        content, status = EMPTY_REPLY, STATUS_EMPTY
    return TurnConversion(AssistantMessage(role="assistant", content=content, cost=0.0), status, malformed)


@dataclass
class AdapterState:
    """The agent side of one simulation: τ²'s messages plus counters for the report."""

    system_messages: list[SystemMessage]
    messages: list[Message]
    turns: int = 0
    statuses: list[str] = field(default_factory=list)
    malformed_blocks: int = 0


class ChatAgentAdapter(LocalAgent[AdapterState]):
    """A τ² agent whose turns come from a text responder (one :class:`AgentRequest` per turn)."""

    def __init__(
        self,
        tools: Sequence[Any],
        domain_policy: str,
        responder: Responder,
        *,
        key: str,
        metadata: dict[str, Any] | None = None,
        system_prompt: str | None = None,
    ) -> None:
        super().__init__(tools=list(tools), domain_policy=domain_policy)
        self.responder = responder
        self.key = key
        self.metadata = dict(metadata or {})
        self._system_prompt = system_prompt if system_prompt is not None else tau2_system_prompt(domain_policy)
        self.tool_schemas = [tool.openai_schema for tool in self.tools]
        self.tool_names = frozenset(tool.name for tool in self.tools)
        self.last_state: AdapterState | None = None

    @property
    def system_prompt(self) -> str:
        return self._system_prompt

    def get_init_state(self, message_history: list[Message] | None = None) -> AdapterState:
        history = list(message_history or [])
        if not all(is_valid_agent_history_message(m) for m in history):
            raise ValueError("agent history may hold only assistant, user and assistant-tool messages")
        state = AdapterState(
            system_messages=[SystemMessage(role="system", content=self.system_prompt)], messages=history
        )
        self.last_state = state
        return state

    def generate_next_message(self, message: Any, state: AdapterState) -> tuple[AssistantMessage, AdapterState]:
        if isinstance(message, MultiToolMessage):
            state.messages.extend(message.tool_messages)
        elif message is not None:
            state.messages.append(message)
        request = AgentRequest(
            messages=to_openai_messages([*state.system_messages, *state.messages]),
            tools=self.tool_schemas,
            key=self.key,
            step=state.turns,
            metadata=dict(self.metadata),
        )
        text = self.responder(request)
        conversion = text_to_assistant_message(text, self.tool_names, call_id_prefix=f"call_{state.turns}")
        reply = conversion.message
        # The raw text stays in the trajectory (τ² saves ``raw_data``) so a report can show what the
        # model actually wrote, not only what was made of it.
        reply.raw_data = {"text": text if isinstance(text, str) else repr(text), "status": conversion.status}
        state.messages.append(reply)
        state.turns += 1
        state.statuses.append(conversion.status)
        state.malformed_blocks += conversion.malformed_blocks
        return reply, state

    def set_seed(self, seed: int) -> None:
        # τ²'s orchestrator gives every trial its own seed; sampling agents may read it.
        self.metadata["seed"] = seed
