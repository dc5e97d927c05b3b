"""One finished τ² simulation as a plain record: reward, its breakdown, and what the agent did."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from slca_grpo.eval.tau2.adapter import (
    STATUS_CALLS,
    STATUS_EMPTY,
    STATUS_MALFORMED,
    AdapterState,
)
from slca_grpo.eval.tau2.metrics import is_success

ERROR_TERMINATION = "error"  # the simulation raised (agent, user LLM or environment); reward 0


@dataclass
class SimulationRecord:
    """A line of ``per_item.jsonl``."""

    task_id: str
    trial: int
    seed: int | None
    reward: float
    success: bool
    termination_reason: str
    reward_basis: list[str] = field(default_factory=list)
    reward_breakdown: dict[str, float] = field(default_factory=dict)
    db_match: bool | None = None
    communicate_checks: list[dict[str, Any]] = field(default_factory=list)
    action_checks: list[dict[str, Any]] = field(default_factory=list)
    env_assertions: list[dict[str, Any]] = field(default_factory=list)
    nl_assertions_not_scored: int = 0
    agent_turns: int = 0
    agent_tool_calls: int = 0
    malformed_turns: int = 0
    malformed_blocks: int = 0
    empty_turns: int = 0
    tool_errors: int = 0
    num_messages: int = 0
    duration_s: float = 0.0
    error: str | None = None
    note: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def compact_messages(messages: list[Any]) -> list[dict[str, Any]]:
    """τ² messages as small JSON dicts; an assistant turn keeps the agent's raw text."""
    out = []
    for message in messages:
        data = message.model_dump(
            mode="json", exclude_none=True, exclude={"timestamp", "usage", "cost", "raw_data", "turn_idx"}
        )
        raw = getattr(message, "raw_data", None)
        if getattr(message, "role", None) == "assistant" and isinstance(raw, dict) and "text" in raw:
            data["raw_text"] = raw["text"]
            data["status"] = raw.get("status")
        out.append(data)
    return out


def _reward_details(reward_info: Any) -> dict[str, Any]:
    if reward_info is None:
        return {}
    details: dict[str, Any] = {
        "reward_basis": [getattr(b, "value", str(b)) for b in (reward_info.reward_basis or [])],
        "reward_breakdown": {
            getattr(k, "value", str(k)): float(v) for k, v in (reward_info.reward_breakdown or {}).items()
        },
        "db_match": reward_info.db_check.db_match if reward_info.db_check is not None else None,
        "communicate_checks": [{"info": c.info, "met": c.met} for c in reward_info.communicate_checks or []],
        "action_checks": [
            {
                "action_id": c.action.action_id,
                "name": c.action.name,
                "requestor": c.action.requestor,
                "match": c.action_match,
            }
            for c in reward_info.action_checks or []
        ],
        "env_assertions": [
            {
                "func_name": c.env_assertion.func_name,
                "env_type": c.env_assertion.env_type,
                "arguments": c.env_assertion.arguments,
                "met": c.met,
            }
            for c in reward_info.env_assertions or []
        ],
    }
    info = reward_info.info or {}
    if isinstance(info, dict) and isinstance(info.get("note"), str):
        details["note"] = info["note"]
    return details


def _agent_counters(state: AdapterState | None) -> dict[str, int]:
    if state is None:
        return {}
    statuses = Counter(state.statuses)
    return {
        "agent_turns": state.turns,
        "malformed_turns": statuses[STATUS_MALFORMED],
        "malformed_blocks": state.malformed_blocks,
        "empty_turns": statuses[STATUS_EMPTY],
    }


def nl_assertions_not_scored(task: Any) -> int:
    """NL assertions of a task whose reward basis does not include them (so nobody judged them)."""
    criteria = task.evaluation_criteria
    if criteria is None or not criteria.nl_assertions:
        return 0
    basis = {getattr(b, "value", str(b)) for b in criteria.reward_basis}
    return 0 if "NL_ASSERTION" in basis else len(criteria.nl_assertions)


def make_record(
    task: Any,
    trial: int,
    seed: int | None,
    simulation: Any | None,
    agent_state: AdapterState | None,
    *,
    error: str | None = None,
    partial_messages: list[Any] | None = None,
    duration_s: float = 0.0,
) -> SimulationRecord:
    """A record from a finished τ² ``SimulationRun`` (``simulation``), or from a failed one."""
    messages = list(simulation.messages) if simulation is not None else list(partial_messages or [])
    reward_info = simulation.reward_info if simulation is not None else None
    reward = float(reward_info.reward) if reward_info is not None else 0.0
    termination = (
        getattr(simulation.termination_reason, "value", str(simulation.termination_reason))
        if simulation is not None
        else ERROR_TERMINATION
    )
    details = _reward_details(reward_info)
    counters = _agent_counters(agent_state)
    # Calls the agent made in this run (a task's initial history may hold earlier ones).
    counters["agent_tool_calls"] = sum(len(m.tool_calls or []) for m in messages if _made_by_agent(m))
    tool_errors = sum(1 for m in messages if getattr(m, "role", None) == "tool" and getattr(m, "error", False))
    return SimulationRecord(
        task_id=str(task.id),
        trial=trial,
        seed=seed,
        reward=reward,
        success=error is None and is_success(reward),
        termination_reason=termination,
        nl_assertions_not_scored=nl_assertions_not_scored(task),
        tool_errors=tool_errors,
        num_messages=len(messages),
        duration_s=round(float(simulation.duration if simulation is not None else duration_s), 4),
        error=error,
        messages=compact_messages(messages),
        **details,
        **counters,
    )


def _made_by_agent(message: Any) -> bool:
    raw = getattr(message, "raw_data", None)
    return getattr(message, "role", None) == "assistant" and isinstance(raw, dict) and raw.get("status") == STATUS_CALLS
