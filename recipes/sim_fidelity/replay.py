"""Replaying call sequences against τ²'s real, stateful tools and against SGLS.

Real side: each sequence runs in a fresh copy of the domain's τ² environment, set to the task's
initial state, so no database change leaks from one sequence (or task) into another. SGLS side:
each sequence runs in its own simulator session, reset before and after.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from recipes.sim_fidelity.sequences import CallSequence, Step, ToolCatalog
from slca_grpo.data.tau2.package import import_tau2
from slca_grpo.datatypes import ToolCall


@dataclass(frozen=True)
class StepOutcome:
    """What one call returned: the text the caller sees, its parsed value, and whether it failed."""

    text: str
    value: Any  # the JSON value of the text, or the text itself when it is not JSON
    error: bool
    error_kind: str | None = None  # SGLS: the observation's error kind; real: the exception's type

    def to_dict(self, max_chars: int = 2000) -> dict[str, Any]:
        text = self.text if len(self.text) <= max_chars else self.text[:max_chars] + "…"
        return {"text": text, "error": self.error, "error_kind": self.error_kind}


def parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def return_schema(tool: Any) -> dict[str, Any] | None:
    """The JSON Schema of a τ² tool's return value (τ² wraps it as ``{"returns": ...}``)."""
    try:
        wrapper = tool.returns.model_json_schema()
    except Exception:  # a return annotation pydantic cannot describe: no schema to check against
        return None
    inner = (wrapper.get("properties") or {}).get("returns")
    if not isinstance(inner, dict):
        return None
    if "$defs" in wrapper:  # keep local references resolvable from the inner schema's root
        inner = {**inner, "$defs": wrapper["$defs"]}
    return inner


class RealDomain:
    """A τ² domain loaded once: its tools, their schemas, and fresh environments on demand."""

    def __init__(self, domain: str) -> None:
        registry = import_tau2("tau2.registry").registry  # τ² (and litellm) only when a domain is loaded
        self.domain = domain
        self._pristine = registry.get_env_constructor(domain)()
        env = self._pristine
        assistant = env.get_tools()
        user = env.get_user_tools() if env.user_tools is not None else []
        self.assistant_tools = [t.openai_schema for t in assistant]
        self.user_tools = [t.openai_schema for t in user]
        self.returns = {t.name: return_schema(t) for t in [*assistant, *user]}
        writes = {
            name
            for kit in (env.tools, env.user_tools)
            if kit is not None
            for name in kit.tools
            if kit.tool_type(name) == "write"  # τ²'s ToolType is a str enum
        }
        parameters = {s["function"]["name"]: s["function"]["parameters"] for s in self.all_tools()}
        self.catalog = ToolCatalog(parameters=parameters, writes=frozenset(writes))

    def all_tools(self) -> list[dict[str, Any]]:
        return [*self.assistant_tools, *self.user_tools]

    def simulator_tools(self, with_returns: bool) -> list[dict[str, Any]]:
        """The tools as SGLS sees them: τ²'s own OpenAI schemas, optionally with the return schema."""
        if not with_returns:
            return self.all_tools()
        out = []
        for tool in self.all_tools():
            function = dict(tool["function"])
            schema = self.returns.get(function["name"])
            if schema is not None:
                function["returns"] = schema
            out.append({**tool, "function": function})
        return out

    def fresh_environment(self, task: Any) -> Any:
        """A copy of the pristine environment (faster than reloading the database) in the task's
        initial state."""
        environment = copy.deepcopy(self._pristine)
        state = getattr(task, "initial_state", None)
        if state is not None:
            environment.set_state(
                initialization_data=state.initialization_data,
                initialization_actions=state.initialization_actions,
                message_history=list(state.message_history or []),
            )
        return environment

    def writes_state(self, sequence: CallSequence) -> bool:
        """Whether the sequence may change the database (a write, or a name τ² does not know)."""
        known = self.catalog.parameters
        return any(s.name in self.catalog.writes or s.name not in known for s in sequence.steps)


def real_call(environment: Any, step: Step) -> StepOutcome:
    """One call as τ²'s ``Environment.get_response`` makes it, keeping the return value's type
    (τ² sends strings as they are and everything else as JSON)."""
    try:
        result = environment.make_tool_call(step.name, requestor=step.requestor, **step.arguments)
        environment.sync_tools()
    except Exception as exc:  # τ² reports every failure to the agent as "Error: <message>"
        return StepOutcome(f"Error: {exc}", f"Error: {exc}", True, type(exc).__name__)
    text = environment.to_json_str(result)
    return StepOutcome(text, result if isinstance(result, str) else parse_value(text), False)


def replay_real(environment: Any, sequence: CallSequence) -> list[StepOutcome]:
    return [real_call(environment, step) for step in sequence.steps]


def simulated_outcome(observation: Any) -> StepOutcome:
    value = parse_value(observation.text)
    if observation.error is not None:
        return StepOutcome(observation.text, value, True, observation.error.kind)
    # An LLM backend may answer with an API error body: that is an error too.
    is_error_body = isinstance(value, dict) and set(value) == {"error"}
    return StepOutcome(observation.text, value, is_error_body, "error_body" if is_error_body else None)


def replay_simulated(
    simulator: Any, tools: list[dict[str, Any]], sequences: Sequence[CallSequence], session_prefix: str
) -> list[list[StepOutcome]]:
    """Every sequence in its own fresh session, as one batch (sessions run concurrently on an
    asynchronous backend; the calls of one session always run in order)."""
    sessions = [f"{session_prefix}/{i}" for i in range(len(sequences))]
    for session in sessions:
        simulator.reset_session(session)
    items = [
        (ToolCall(step.name, dict(step.arguments)), tools, session)
        for sequence, session in zip(sequences, sessions)
        for step in sequence.steps
    ]
    observations = iter(simulator.simulate_many(items))
    out = [[simulated_outcome(next(observations)) for _ in sequence.steps] for sequence in sequences]
    for session in sessions:
        simulator.reset_session(session)
    return out
