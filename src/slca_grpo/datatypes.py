"""Plain data types that cross module boundaries: tasks, calls, observations, sampled turns, trajectories."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

SUBSET_TOOL_CALL = "tool_call"
SUBSET_IRRELEVANT = "irrelevant"
SUBSETS = (SUBSET_TOOL_CALL, SUBSET_IRRELEVANT)

# Why the sampler stopped a row (:class:`Generation.stop_reason`).
STOP_EOS = "eos"  # a stop token (end of turn)
STOP_STRING = "stop_string"  # a stop string such as </tool_call>
STOP_LENGTH = "length"  # the token budget ran out


@dataclass
class Generation:
    """What the sampler wrote for one row: token ids as sampled, their log-probs, and why it stopped."""

    token_ids: list[int]
    logprobs: list[float]
    stop_reason: str


@dataclass(frozen=True)
class ToolCall:
    """One function call: a tool name and its (JSON-object) arguments."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        return cls(name=data["name"], arguments=dict(data.get("arguments") or {}))


def call_signature(call: ToolCall) -> str:
    """Exact identity of a call, for repeat detection: name plus canonical arguments."""
    try:
        arguments = json.dumps(call.arguments, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):  # mixed-type keys from a non-JSON source
        arguments = repr(call.arguments)
    return call.name + "\x00" + arguments


def tool_name(schema: dict[str, Any]) -> str | None:
    """Name of an OpenAI-format tool schema (``{"type": "function", "function": {...}}``) or a bare one."""
    fn = schema.get("function", schema) if isinstance(schema, dict) else None
    name = fn.get("name") if isinstance(fn, dict) else None
    return name if isinstance(name, str) else None


def tool_function(schema: dict[str, Any]) -> dict[str, Any]:
    """The ``function`` part of a tool schema (the schema itself when it is bare)."""
    fn = schema.get("function", schema)
    return fn if isinstance(fn, dict) else {}


@dataclass
class Task:
    """A training or evaluation prompt with its tools and gold calls (docs/method.md §2)."""

    id: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    gold_calls: list[list[ToolCall]] = field(default_factory=list)
    subset: str = SUBSET_TOOL_CALL
    reference_answer: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def tool_names(self) -> list[str]:
        return [n for n in (tool_name(t) for t in self.tools) if n is not None]

    @property
    def flat_gold_calls(self) -> list[ToolCall]:
        return [call for step in self.gold_calls for call in step]

    @property
    def expects_call(self) -> bool:
        return self.subset != SUBSET_IRRELEVANT and bool(self.flat_gold_calls)

    @property
    def question(self) -> str:
        """The last user message, the question a judge sees."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return str(message.get("content", ""))
        return ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "messages": self.messages,
            "tools": self.tools,
            "gold_calls": [[c.to_dict() for c in step] for step in self.gold_calls],
            "subset": self.subset,
        }
        if self.reference_answer is not None:
            data["reference_answer"] = self.reference_answer
        if self.metadata:
            data["metadata"] = self.metadata
        return data


@dataclass(frozen=True)
class ObservationError:
    """Why a simulated call failed: a short machine-readable kind and a message."""

    kind: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message}


@dataclass
class Observation:
    """What a tool call returned to the policy."""

    text: str
    error: ObservationError | None = None
    cached: bool = False
    latency_ms: float = 0.0

    @property
    def is_error(self) -> bool:
        return self.error is not None


@dataclass
class Turn:
    """One assistant turn of a rollout: its text, the calls it made and what they returned."""

    text: str
    calls: list[ToolCall] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)


@dataclass
class Trajectory:
    """One rollout, token-exact (docs/method.md §2).

    ``response_ids`` holds sampled tokens and injected tool-response tokens in order;
    ``response_mask`` is 1 for sampled tokens and 0 for injected ones; ``logprobs`` has one entry
    per response token (0.0 where the mask is 0).
    """

    task_id: str
    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    response_text: str = ""
    final_text: str = ""
    truncated: bool = False
    counters: dict[str, float] = field(default_factory=dict)

    @property
    def num_calls(self) -> int:
        return sum(len(t.calls) for t in self.turns)
