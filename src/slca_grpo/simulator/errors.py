"""Stable error kinds and the JSON text of error observations.

Every error observation's text is ``{"error": {"type": <kind>, "message": ..., ...}}`` so the
policy can read it like a real API's error body; ``Observation.error`` carries the same kind and
message for code that counts failures.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from slca_grpo.datatypes import Observation, ObservationError, Turn

# Checks made before any model call (deterministic, never cached).
UNKNOWN_TOOL = "unknown_tool"
MISSING_REQUIRED = "missing_required"
INVALID_ARGUMENTS = "invalid_arguments"
INVALID_SCHEMA = "invalid_schema"
NOT_FOUND = "not_found"  # a lookup of a record this session deleted
CONFLICT = "conflict"  # a write that needs a status the session moved the record out of
# Injected to teach recovery (deterministic under the seed, never cached).
TIMEOUT = "timeout"
SERVER_ERROR = "server_error"
RATE_LIMITED = "rate_limited"
EMPTY_RESULT = "empty_result"
# The simulator's own backend failed (retries exhausted / unusable answer).
BACKEND_ERROR = "backend_error"
INVALID_RESPONSE = "invalid_response"
OVER_BUDGET = "over_budget"  # the service's time budget for one request ran out

ERROR_KINDS = (
    UNKNOWN_TOOL,
    MISSING_REQUIRED,
    INVALID_ARGUMENTS,
    INVALID_SCHEMA,
    NOT_FOUND,
    CONFLICT,
    TIMEOUT,
    SERVER_ERROR,
    RATE_LIMITED,
    EMPTY_RESULT,
    BACKEND_ERROR,
    INVALID_RESPONSE,
    OVER_BUDGET,
)
INJECTED_KINDS = (TIMEOUT, SERVER_ERROR, RATE_LIMITED, EMPTY_RESULT)
# The simulator's own failures, not the policy's doing: a rollout that met one is void (left out of
# its group's statistics and of the loss), never scored as if the policy had earned the outcome.
SIMULATOR_FAULTS = (BACKEND_ERROR, INVALID_RESPONSE, OVER_BUDGET)


def simulator_fault(turns: Iterable[Turn]) -> str | None:
    """The kind of the first simulator fault among the turns' observations, or None."""
    for turn in turns:
        for observation in turn.observations:
            if observation.error is not None and observation.error.kind in SIMULATOR_FAULTS:
                return observation.error.kind
    return None


def error_text(kind: str, message: str, **details: Any) -> str:
    body: dict[str, Any] = {"type": kind, "message": message}
    body.update({k: v for k, v in details.items() if v is not None})
    return json.dumps({"error": body}, ensure_ascii=False)


def error_observation(kind: str, message: str, *, text: str | None = None, **details: Any) -> Observation:
    """An observation for a failed call; ``text`` overrides the default JSON error body."""
    return Observation(
        text=text if text is not None else error_text(kind, message, **details),
        error=ObservationError(kind, message),
    )
