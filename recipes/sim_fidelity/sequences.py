"""Tool-call sequences to replay: a τ² task's gold actions, and perturbed copies of them.

A perturbation is a mistake a policy makes in training: a wrong id, calls out of order, a write
sent twice, a missing or mistyped argument; or a probe of session state: a read right after a
write, a cancel followed by a read. Each is a pure function of the gold sequence, the domain's tool
catalog and a seeded ``random.Random``, so the same seed gives the same sequences on any machine.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from slca_grpo.simulator.intent import is_id_key

ASSISTANT = "assistant"
GOLD = "gold"
PERTURBATIONS = (
    "wrong_id",
    "out_of_order",
    "repeated_write",
    "read_after_write",
    "cancel_then_read",
    "missing_argument",
    "mistyped_argument",
)


@dataclass(frozen=True)
class Step:
    """One tool call of a sequence; ``requestor`` is who performs it in τ² (``assistant`` or ``user``)."""

    name: str
    arguments: dict[str, Any]
    requestor: str = ASSISTANT


@dataclass(frozen=True)
class CallSequence:
    """Calls replayed in one session (one fresh τ² environment, one fresh SGLS session)."""

    task_id: str
    kind: str  # "gold" or one of PERTURBATIONS
    steps: tuple[Step, ...]
    note: str = ""  # what the perturbation changed, for the report


@dataclass(frozen=True)
class ToolCatalog:
    """What perturbations need to know about a domain's tools.

    ``parameters`` maps each tool to its parameters schema; ``writes`` are the tools that change
    state (τ² marks each tool read or write; that marking is ground truth, not the simulator's guess).
    """

    parameters: dict[str, dict[str, Any]]
    writes: frozenset[str] = frozenset()
    _readers: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def required(self, name: str) -> list[str]:
        required = self.parameters.get(name, {}).get("required") or []
        return [r for r in required if isinstance(r, str)]

    def properties(self, name: str) -> dict[str, Any]:
        props = self.parameters.get(name, {}).get("properties") or {}
        return props if isinstance(props, dict) else {}

    def reader_for(self, id_key: str) -> str | None:
        """A read tool that takes exactly one required argument, ``id_key`` (``get_order_details``)."""
        if id_key not in self._readers:
            candidates = sorted(
                name for name in self.parameters if name not in self.writes and self.required(name) == [id_key]
            )
            # Prefer get_* tools: find_* and list_* read other things by the same key.
            preferred = [n for n in candidates if n.startswith("get_")] or candidates
            self._readers[id_key] = preferred[0] if preferred else ""
        return self._readers[id_key] or None

    def cancellers(self) -> list[str]:
        return sorted(name for name in self.writes if "cancel" in name)


def gold_sequence(task_id: str, actions: Sequence[Any]) -> CallSequence:
    """τ² gold ``Action``s (``.name``, ``.arguments``, ``.requestor``) as a sequence."""
    steps = tuple(Step(a.name, dict(a.arguments or {}), getattr(a, "requestor", None) or ASSISTANT) for a in actions)
    return CallSequence(task_id, GOLD, steps)


def id_arguments(step: Step) -> list[tuple[str, Any]]:
    """The arguments that name a record (``reservation_id``, ``order_id``), with scalar values."""
    return [
        (k, v)
        for k, v in step.arguments.items()
        if is_id_key(k) and isinstance(v, (str, int)) and not isinstance(v, bool) and str(v)
    ]


def _assistant_indices(steps: Sequence[Step]) -> list[int]:
    return [i for i, s in enumerate(steps) if s.requestor == ASSISTANT]


def _lookalike(value: Any) -> Any:
    """An id of the same shape that is not the same id: each digit +1, each letter one further."""
    if isinstance(value, int):
        return value + 1
    out = []
    for ch in str(value):
        if ch.isdigit():
            out.append(str((int(ch) + 1) % 10))
        elif "a" <= ch <= "z":
            out.append(chr((ord(ch) - 97 + 1) % 26 + 97))
        elif "A" <= ch <= "Z":
            out.append(chr((ord(ch) - 65 + 1) % 26 + 65))
        else:
            out.append(ch)
    return "".join(out)


def _with_arguments(step: Step, arguments: dict[str, Any]) -> Step:
    return replace(step, arguments=arguments)


def wrong_id(steps: tuple[Step, ...], catalog: ToolCatalog, rng: random.Random) -> tuple[tuple[Step, ...], str] | None:
    """One call names a record by a look-alike id that does not exist."""
    choices = [(i, k) for i in _assistant_indices(steps) for k, _ in id_arguments(steps[i])]
    if not choices:
        return None
    index, key = rng.choice(choices)
    old = steps[index].arguments[key]
    new = _lookalike(old)
    changed = _with_arguments(steps[index], {**steps[index].arguments, key: new})
    return steps[:index] + (changed,) + steps[index + 1 :], f"{steps[index].name}: {key} {old!r} -> {new!r}"


def out_of_order(
    steps: tuple[Step, ...], catalog: ToolCatalog, rng: random.Random
) -> tuple[tuple[Step, ...], str] | None:
    """Two neighbouring calls swapped; a swap that moves a write earlier is preferred."""
    indices = _assistant_indices(steps)
    pairs = [(a, b) for a, b in zip(indices, indices[1:]) if steps[a] != steps[b]]
    if not pairs:
        return None
    moving_writes = [p for p in pairs if steps[p[1]].name in catalog.writes]
    a, b = rng.choice(moving_writes or pairs)
    swapped = list(steps)
    swapped[a], swapped[b] = steps[b], steps[a]
    return tuple(swapped), f"swapped {steps[a].name} (#{a}) and {steps[b].name} (#{b})"


def repeated_write(
    steps: tuple[Step, ...], catalog: ToolCatalog, rng: random.Random
) -> tuple[tuple[Step, ...], str] | None:
    """A write sent twice in a row."""
    writes = [i for i in _assistant_indices(steps) if steps[i].name in catalog.writes]
    if not writes:
        return None
    index = rng.choice(writes)
    return steps[: index + 1] + (steps[index],) + steps[index + 1 :], f"{steps[index].name} (#{index}) sent twice"


def read_after_write(
    steps: tuple[Step, ...], catalog: ToolCatalog, rng: random.Random
) -> tuple[tuple[Step, ...], str] | None:
    """Right after a write that names a record, a read of that record."""
    options = []
    for i in _assistant_indices(steps):
        if steps[i].name not in catalog.writes:
            continue
        for key, value in id_arguments(steps[i]):
            reader = catalog.reader_for(key)
            if reader is not None:
                options.append((i, Step(reader, {key: value})))
    if not options:
        return None
    index, read = rng.choice(options)
    note = f"{read.name} after {steps[index].name} (#{index})"
    return steps[: index + 1] + (read,) + steps[index + 1 :], note


def cancel_then_read(
    steps: tuple[Step, ...], catalog: ToolCatalog, rng: random.Random
) -> tuple[tuple[Step, ...], str] | None:
    """At the end: cancel a record the sequence named, then read it back."""
    for canceller in catalog.cancellers():
        id_keys = [k for k in catalog.required(canceller) if is_id_key(k)]
        if len(id_keys) != 1:
            continue
        key = id_keys[0]
        reader = catalog.reader_for(key)
        values = list(dict.fromkeys(v for s in steps for k, v in id_arguments(s) if k == key))
        if reader is None or not values:
            continue
        arguments = {key: rng.choice(values)}
        for name in catalog.required(canceller):
            if name == key:
                continue
            enum = catalog.properties(canceller).get(name, {}).get("enum")
            if not enum:
                break  # a required argument we cannot fill sensibly: try another cancel tool
            arguments[name] = enum[0]
        else:
            added = (Step(canceller, arguments), Step(reader, {key: arguments[key]}))
            return steps + added, f"{canceller}({arguments[key]!r}) then {reader}"
    return None


def missing_argument(
    steps: tuple[Step, ...], catalog: ToolCatalog, rng: random.Random
) -> tuple[tuple[Step, ...], str] | None:
    """One call without one of its required arguments."""
    choices = [
        (i, r) for i in _assistant_indices(steps) for r in catalog.required(steps[i].name) if r in steps[i].arguments
    ]
    if not choices:
        return None
    index, name = rng.choice(choices)
    arguments = {k: v for k, v in steps[index].arguments.items() if k != name}
    return steps[:index] + (_with_arguments(steps[index], arguments),) + steps[index + 1 :], (
        f"{steps[index].name}: dropped {name}"
    )


def mistype(value: Any) -> Any:
    """The value as a policy might mistype it: numeric strings as numbers, numbers as strings, a
    list as its first item, other strings inside a list, objects as JSON text."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return int(value) if value.isdigit() else [value]
    if isinstance(value, list):
        return value[0] if value else ""
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def mistyped_argument(
    steps: tuple[Step, ...], catalog: ToolCatalog, rng: random.Random
) -> tuple[tuple[Step, ...], str] | None:
    """One argument of one call given with the wrong JSON type."""
    choices = [(i, k) for i in _assistant_indices(steps) for k in steps[i].arguments]
    if not choices:
        return None
    index, name = rng.choice(choices)
    old = steps[index].arguments[name]
    new = mistype(old)
    changed = _with_arguments(steps[index], {**steps[index].arguments, name: new})
    return steps[:index] + (changed,) + steps[index + 1 :], (
        f"{steps[index].name}: {name} {type(old).__name__} -> {type(new).__name__}"
    )


# A perturbation: (gold steps, catalog, generator) → (new steps, what changed), or None where it does not apply.
Perturbation = Callable[[tuple[Step, ...], ToolCatalog, random.Random], tuple[tuple[Step, ...], str] | None]
PERTURBATION_FUNCTIONS: dict[str, Perturbation] = {
    "wrong_id": wrong_id,
    "out_of_order": out_of_order,
    "repeated_write": repeated_write,
    "read_after_write": read_after_write,
    "cancel_then_read": cancel_then_read,
    "missing_argument": missing_argument,
    "mistyped_argument": mistyped_argument,
}


def perturbed_sequences(
    gold: CallSequence, catalog: ToolCatalog, seed: int, kinds: Sequence[str] = PERTURBATIONS
) -> list[CallSequence]:
    """One perturbed copy of ``gold`` per kind that applies to it, in ``kinds`` order.

    Each kind draws from its own generator, seeded by (seed, task, kind), so adding or removing a
    kind leaves the others unchanged.
    """
    out = []
    for kind in kinds:
        rng = random.Random(f"{seed}:{gold.task_id}:{kind}")  # str seeds hash the same on every run
        result = PERTURBATION_FUNCTIONS[kind](gold.steps, catalog, rng)
        if result is not None:
            steps, note = result
            out.append(CallSequence(gold.task_id, kind, steps, note))
    return out
