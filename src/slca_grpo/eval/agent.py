"""The text-level agent interface that benchmark harnesses drive.

A benchmark harness owns the episode (its messages, tools, environment); the agent only answers
the next assistant turn as text in the Hermes format (``<tool_call>`` blocks and/or prose), which
the harness parses with ``slca_grpo.chat.parse_tool_calls``. Local HF models, OpenAI-compatible
endpoints and oracles that replay gold answers all implement it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class AgentRequest:
    """One pending assistant turn.

    ``messages`` are OpenAI-style (``system``/``user``/``assistant`` with optional ``tool_calls`` of
    ``{"name", "arguments"}``/``tool``); ``key`` names the episode (task or entry id) so that an
    oracle can look up its gold answer; ``step`` counts the assistant turns already taken.
    """

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    key: str = ""
    step: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class ChatAgent(Protocol):
    name: str

    def respond(self, requests: list[AgentRequest]) -> list[str]:
        """Assistant text for each request, in order (a batch, so models can sample together)."""
        ...
