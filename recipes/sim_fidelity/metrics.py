"""How far SGLS's answers are from the real tools' answers: pure comparisons (the recipe's README.md,
"What is measured", defines each metric) and the tallies that add them up per tool and per
sequence kind."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from recipes.sim_fidelity.replay import StepOutcome
from recipes.sim_fidelity.sequences import Step, id_arguments
from slca_grpo.simulator import intent as I
from slca_grpo.simulator.checks import validate_value

OVERALL = "(all)"

# -- shapes and fields ------------------------------------------------------------------------


def json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def records(value: Any) -> list[dict[str, Any]]:
    """The records an answer holds at its top level: the object itself, or the objects of a list."""
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        return value
    return []


def field_set(value: Any) -> frozenset[str]:
    """Top-level field names; a list of objects gives ``[].name`` for its items' fields."""
    if isinstance(value, dict):
        return frozenset(value)
    return frozenset(f"[].{key}" for item in records(value) for key in item)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b|; two empty sets agree (1.0)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def same_value(a: Any, b: Any) -> bool:
    """JSON equality, with 1 == 1.0 but not True == 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=0, abs_tol=1e-9)
    return type(a) is type(b) and a == b


def normal_status(value: Any) -> str:
    return re.sub(r"[\s_\-]+", " ", str(value).strip().lower())


def status_keys(record: dict[str, Any]) -> list[str]:
    return [k for k in record if (k == "status" or k.endswith("_status")) and isinstance(record[k], str)]


# -- values the call determines -----------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    """A field value the call determines: an argument the real tool echoed, or a status after a write."""

    kind: str  # "echo" or "status"
    key: str
    value: Any


def determined_facts(arguments: dict[str, Any], real_value: Any, is_write: bool) -> list[Fact]:
    """Echoes: a scalar argument ``k=v`` is determined when every top-level record of the real answer
    has ``k`` equal to ``v``. Statuses: after a write, each string ``status``/``*_status`` field of
    the real answer (an object)."""
    recs = records(real_value)
    if not recs:
        return []
    facts = [
        Fact("echo", key, value)
        for key, value in arguments.items()
        if is_scalar(value) and value is not None and all(key in r and same_value(r[key], value) for r in recs)
    ]
    if is_write and isinstance(real_value, dict):
        facts += [Fact("status", key, real_value[key]) for key in status_keys(real_value)]
    return facts


def fact_holds(fact: Fact, value: Any) -> bool:
    """The answer has the fact: every top-level record carries the key with that value (a status
    compares case-insensitively, with spaces, hyphens and underscores alike)."""
    recs = records(value)
    if not recs:
        return False
    if fact.kind == "status":
        return all(fact.key in r and normal_status(r[fact.key]) == normal_status(fact.value) for r in recs)
    return all(fact.key in r and same_value(r[fact.key], fact.value) for r in recs)


# -- value formats ------------------------------------------------------------------------------


def signature(text: str) -> str:
    """The alphabet of a string: A (upper-case letters), a (lower-case), 9 (digits) and each other
    character itself, sorted. ``8JX2WO`` → ``9A``, ``#W2378156`` → ``#9A``, ``2024-05-01`` → ``-9``."""
    classes = set()
    for ch in text:
        if ch.isdigit():
            classes.add("9")
        elif ch.isalpha():
            classes.add("A" if ch.isupper() else "a")
        else:
            classes.add(ch)
    return "".join(sorted(classes))


def format_pairs(arguments: dict[str, Any], real_value: Any, sim_value: Any) -> list[tuple[str, bool]]:
    """(field, same alphabet) for each string field both answers' first records hold, leaving out
    fields the real answer copied from the arguments (those count as values, not formats)."""
    real_recs, sim_recs = records(real_value), records(sim_value)
    if not real_recs or not sim_recs:
        return []
    real, sim = real_recs[0], sim_recs[0]
    echoed = {v for v in arguments.values() if isinstance(v, str)}
    return [
        (key, signature(real[key]) == signature(sim[key]))
        for key in real
        if key in sim and isinstance(real[key], str) and isinstance(sim[key], str) and real[key] not in echoed
    ]


def schema_valid(validator: Any, value: Any) -> bool:
    return validate_value(validator, value) is None


# -- state within a session ---------------------------------------------------------------------

READ_AFTER_WRITE = "read_after_write"
CANCEL_THEN_READ = "cancel_then_read"
DELETE_THEN_READ = "delete_then_read"
REPEAT_READ = "repeat_read"
CONSISTENCY_CHECKS = (READ_AFTER_WRITE, CANCEL_THEN_READ, DELETE_THEN_READ, REPEAT_READ)


@dataclass(frozen=True)
class ConsistencyCheck:
    kind: str
    passed: bool
    read_index: int


def record_id(value: Any) -> tuple[str, Any] | None:
    """Which record an answer is: its first top-level id field (``reservation_id``) with a scalar value."""
    if not isinstance(value, dict):
        return None
    return next(((k, v) for k, v in value.items() if I.is_id_key(k) and isinstance(v, (str, int))), None)


def consistency_checks(
    steps: Sequence[Step], reference: Sequence[StepOutcome], outcomes: Sequence[StepOutcome], writes: frozenset[str]
) -> list[ConsistencyCheck]:
    """State checks on one side's ``outcomes``; the real tools' answers (``reference``) decide which
    checks apply, so both sides are checked on the same reads.

    For each read (a tool τ² marks read) naming a record by id, the last earlier call naming the same
    record decides, when it succeeded on the real side:

    - a cancel → the read succeeds and its status field contains "cancel";
    - a delete → the read fails (not found);
    - another write whose real answer is that record (its first id field is the read's id) → on this
      side both answered objects and the read holds each top-level scalar field of the write's
      answer with the same value;
    - an identical read (same tool, same arguments) → on this side both succeeded with the same answer.
    """
    checks = []
    for j, read in enumerate(steps):
        if read.name in writes:
            continue
        names = set(id_arguments(read))
        if not names:
            continue
        last = next((i for i in range(j - 1, -1, -1) if names & set(id_arguments(steps[i]))), None)
        if last is None or reference[last].error:
            continue
        before, written, answer = steps[last], outcomes[last], outcomes[j]
        if before.name in writes:
            verb = I.read_intent(before.name).verb
            if verb == I.CANCEL:
                status = [r[k] for r in records(answer.value)[:1] for k in status_keys(r)]
                passed = not answer.error and any("cancel" in s.lower() for s in status)
                checks.append(ConsistencyCheck(CANCEL_THEN_READ, passed, j))
            elif verb == I.DELETE:
                checks.append(ConsistencyCheck(DELETE_THEN_READ, answer.error, j))
            elif record_id(reference[last].value) in names:
                checks.append(ConsistencyCheck(READ_AFTER_WRITE, _holds_written(written, answer), j))
        elif before == read:
            same = not written.error and not answer.error and answer.value == written.value
            checks.append(ConsistencyCheck(REPEAT_READ, same, j))
    return checks


def _holds_written(written: StepOutcome, answer: StepOutcome) -> bool:
    if written.error or answer.error or not isinstance(written.value, dict) or not isinstance(answer.value, dict):
        return False
    fields = {k: v for k, v in written.value.items() if is_scalar(v)}
    return all(k in answer.value and same_value(answer.value[k], v) for k, v in fields.items())


# -- tallies ------------------------------------------------------------------------------------


@dataclass
class Mean:
    total: float = 0.0
    n: int = 0

    def add(self, value: float | bool) -> None:
        self.total += float(value)
        self.n += 1

    @property
    def value(self) -> float | None:
        return self.total / self.n if self.n else None

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "n": self.n, "total": self.total}


class Tally:
    """Means by metric and group; every value also counts towards the group ``OVERALL``."""

    def __init__(self) -> None:
        self.means: dict[str, dict[str, Mean]] = defaultdict(lambda: defaultdict(Mean))

    def add(self, metric: str, group: str, value: float | bool) -> None:
        self.means[metric][group].add(value)
        self.means[metric][OVERALL].add(value)

    def get(self, metric: str, group: str = OVERALL) -> Mean:
        return self.means.get(metric, {}).get(group) or Mean()

    def groups(self) -> list[str]:
        found = {g for by_group in self.means.values() for g in by_group if g != OVERALL}
        return sorted(found)

    def to_dict(self) -> dict[str, dict[str, dict[str, Any]]]:
        return {m: {g: mean.to_dict() for g, mean in sorted(by.items())} for m, by in sorted(self.means.items())}


def error_cell(real_error: bool, sim_error: bool) -> str:
    if real_error and sim_error:
        return "err_both"
    if real_error:
        return "err_real_only"
    return "err_sim_only" if sim_error else "err_neither"


def compare_call(
    step: Step,
    real: StepOutcome,
    sim: StepOutcome,
    *,
    is_write: bool,
    validator: Any | None,
    add: Any,
) -> None:
    """Add one call's comparisons through ``add(metric, value)``."""
    add("error_agree", real.error == sim.error)
    add(error_cell(real.error, sim.error), 1.0)
    if validator is not None:
        if not real.error:
            add("valid_real", schema_valid(validator, real.value))
        if not sim.error:
            add("valid_sim", schema_valid(validator, sim.value))
    if real.error or sim.error:
        return
    add("shape", json_kind(real.value) == json_kind(sim.value))
    fields = jaccard(field_set(real.value), field_set(sim.value))
    add("fields", fields)
    add("fields_exact", fields == 1.0)
    for fact in determined_facts(step.arguments, real.value, is_write):
        add(fact.kind, fact_holds(fact, sim.value))
    for key, same in format_pairs(step.arguments, real.value, sim.value):
        add("format", same)
        if I.is_id_key(key):
            add("format_id", same)
