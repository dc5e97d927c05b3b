"""Limits on what a tool schema may make the simulator do. Schemas come from policies and datasets,
so they are hostile input:

- references resolve only inside the schema itself (``#/...``): nothing is fetched, no file is read;
- ``pattern`` / ``patternProperties`` run on the ``regex`` engine with a time limit per match, so a
  catastrophic pattern costs at most ``PATTERN_TIMEOUT_S``, not the server;
- a pattern longer than ``MAX_PATTERN_NODES`` characters, one the engine would unroll into more
  nodes than that, or one whose shortest match is longer than ``MAX_GENERATED_UNITS``, is refused
  before it is compiled (see regexsize.py), and compiled patterns are kept within a node budget;
- a schema whose smallest valid value is huge (``minLength: 1000000``, nested ``minItems``, a
  pattern's shortest match) is refused before anything is generated, and so is any single
  ``minLength``/``minItems``/``minProperties`` beyond the limit, required or not;
- schemas are bounded in nesting depth.

Each refusal is a ``SchemaRefused`` with a message for the error observation.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

import regex
from jsonschema import ValidationError
from referencing import Registry

from slca_grpo.simulator.budget import check_deadline
from slca_grpo.simulator.regexsize import pattern_cost

PATTERN_TIMEOUT_S = 0.05  # per match; ordinary patterns take microseconds
MAX_SCHEMA_DEPTH = 64
MAX_GENERATED_UNITS = 100_000  # characters + values of the smallest value a schema allows
# The regex engine keeps about 150-550 bytes per unrolled node: a pattern costs at most a few MB
# and milliseconds to compile, and the compiled patterns kept for reuse at most a few tens of MB.
MAX_PATTERN_NODES = 10_000  # also the longest pattern accepted, in characters
MAX_CACHED_PATTERN_NODES = 200_000
MAX_CACHED_PATTERNS = 2048
MAX_SIZING_STEPS = 10_000  # schema nodes visited to size it (references make it a graph)
REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")

# Validators get an empty registry without a retrieve function: any reference that is not inside
# the schema is unresolvable instead of being fetched over HTTP or read from a file.
NO_RETRIEVAL = Registry()


class SchemaRefused(ValueError):
    """A schema the simulator will not apply (the message says why)."""


class PatternError(RuntimeError):
    """A ``pattern`` that cannot be used: invalid, too costly to compile, or slower than
    ``PATTERN_TIMEOUT_S`` to match."""


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` may not be compiled, or None when it may."""
    if len(pattern) > MAX_PATTERN_NODES:  # checked before parsing, which takes time per character
        return f"pattern of {len(pattern):,} characters is longer than the simulator's limit of {MAX_PATTERN_NODES:,}"
    cost = pattern_cost(pattern)
    if cost is None:
        return f"pattern {pattern[:80]!r} is not a regular expression Python's re module can read"
    if cost.nodes > MAX_PATTERN_NODES:
        return (
            f"pattern {pattern[:80]!r} unrolls into over {MAX_PATTERN_NODES:,} regex nodes (counted repeats multiply)"
        )
    return None


class _CompiledPatterns:
    """Compiled patterns for reuse, least recently used out, bounded by their unrolled size (the
    ``regex`` module's own cache keeps 500 of any size)."""

    def __init__(self) -> None:
        self._patterns: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self.nodes = 0
        self._lock = threading.Lock()

    def get(self, pattern: str) -> Any:
        with self._lock:
            found = self._patterns.get(pattern)
            if found is not None:
                self._patterns.move_to_end(pattern)
                return found[0]
        problem = pattern_problem(pattern)
        if problem is not None:
            raise PatternError(problem)
        try:
            compiled = regex.compile(pattern, cache_pattern=False)
        except regex.error as exc:
            raise PatternError(f"pattern {pattern[:80]!r} is not a valid regular expression ({exc})") from None
        weight = max(1, pattern_cost(pattern).nodes)  # type: ignore[union-attr]
        with self._lock:
            if pattern not in self._patterns:
                self._patterns[pattern] = (compiled, weight)
                self.nodes += weight
            while len(self._patterns) > MAX_CACHED_PATTERNS or self.nodes > MAX_CACHED_PATTERN_NODES:
                _, (_, dropped) = self._patterns.popitem(last=False)
                self.nodes -= dropped
        return compiled


COMPILED_PATTERNS = _CompiledPatterns()


def search(pattern: str, text: str) -> bool:
    """``re.search`` semantics on the time-limited engine; PatternError when it cannot be used."""
    check_deadline()
    compiled = COMPILED_PATTERNS.get(pattern)
    try:
        return compiled.search(text, timeout=PATTERN_TIMEOUT_S) is not None
    except TimeoutError:
        raise PatternError(f"pattern {pattern[:80]!r} took longer than {PATTERN_TIMEOUT_S:g} s to match") from None


# -- jsonschema keywords on the time-limited engine (same semantics as jsonschema's own) ----------


def pattern_keyword(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def pattern_properties_keyword(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def additional_properties_keyword(
    validator: Any, allowed: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [
        key for key in instance if key not in properties and not any(search(pattern, key) for pattern in patterns)
    ]
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            regexes = ", ".join(map(repr, sorted(patterns)))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {regexes}")
        else:
            names = ", ".join(repr(each) for each in sorted(extras, key=str))
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({names} {verb} unexpected)")


SAFE_KEYWORDS = {
    "pattern": pattern_keyword,
    "patternProperties": pattern_properties_keyword,
    "additionalProperties": additional_properties_keyword,
}


# -- schema pre-checks --------------------------------------------------------------------------


def check_schema_limits(schema: Any, part: str) -> None:
    """Refuse references outside the schema, nesting beyond ``MAX_SCHEMA_DEPTH``, patterns too
    costly to compile or to generate from, and schemas whose smallest valid value (or any one
    keyword's minimum) exceeds ``MAX_GENERATED_UNITS``."""
    _check_nodes(schema, part, depth=0)
    steps = [MAX_SIZING_STEPS]
    units = minimum_units(schema, schema, 0, steps)
    if steps[0] <= 0:
        raise SchemaRefused(f"its {part} schema is too complex to size (over {MAX_SIZING_STEPS:,} nodes to visit)")
    if units > MAX_GENERATED_UNITS:
        raise SchemaRefused(
            f"its {part} schema asks for values of at least {units:,} characters or items "
            f"(the simulator's limit is {MAX_GENERATED_UNITS:,})"
        )


def _check_nodes(node: Any, part: str, depth: int) -> None:
    if depth > MAX_SCHEMA_DEPTH:
        raise SchemaRefused(f"its {part} schema is nested deeper than {MAX_SCHEMA_DEPTH} levels")
    if isinstance(node, dict):
        for key in REF_KEYS:
            target = node.get(key)
            if target is not None and (not isinstance(target, str) or not target.startswith("#")):
                raise SchemaRefused(
                    f"its {part} schema refers outside itself ({key}: {str(target)[:100]!r}); "
                    "only references inside the schema (#/...) are allowed"
                )
        _check_sizes(node, part)
        for value in node.values():
            _check_nodes(value, part, depth + 1)
    elif isinstance(node, list):
        for value in node:
            _check_nodes(value, part, depth + 1)


def _check_sizes(node: dict[str, Any], part: str) -> None:
    """One schema node's own demands. The generator also fills optional properties, so a huge
    minimum anywhere would be built even when the smallest valid value is small."""
    for key in ("minLength", "minItems", "minProperties"):
        if _count(node.get(key)) > MAX_GENERATED_UNITS:
            raise SchemaRefused(
                f"its {part} schema asks for {key}: {node[key]:,} (the simulator's limit is {MAX_GENERATED_UNITS:,})"
            )
    pattern = node.get("pattern")
    keys = node.get("patternProperties")
    patterns = [pattern] if isinstance(pattern, str) else []
    patterns += [key for key in keys if isinstance(key, str)] if isinstance(keys, dict) else []
    for each in patterns:
        problem = pattern_problem(each)
        if problem is not None:
            raise SchemaRefused(f"its {part} schema's {problem}")
    shortest = _shortest_match(pattern)  # values are built from `pattern`, never from the keys
    if shortest > MAX_GENERATED_UNITS:
        raise SchemaRefused(
            f"its {part} schema has a pattern {pattern[:80]!r} whose shortest match is {shortest:,} "
            f"characters (the simulator's limit is {MAX_GENERATED_UNITS:,})"
        )


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _shortest_match(pattern: Any) -> int:
    cost = pattern_cost(pattern) if isinstance(pattern, str) else None
    return cost.shortest if cost is not None else 0


def minimum_units(schema: Any, root: Any, depth: int, steps: list[int]) -> int:
    """A lower bound on the size (characters plus values) of the smallest value ``schema`` allows,
    following local references; saturates just above the limit. ``steps`` is a shared budget of
    nodes to visit (a cyclic schema would otherwise be walked forever)."""
    steps[0] -= 1
    if not isinstance(schema, dict) or depth > MAX_SCHEMA_DEPTH or steps[0] <= 0:
        return 1
    reference = schema.get("$ref")
    if isinstance(reference, str) and reference.startswith("#"):
        target = local_pointer(root, reference)
        if target is not None and target is not schema:
            return minimum_units(target, root, depth + 1, steps)
    units = max(
        1, _count(schema.get("minLength")), _count(schema.get("minProperties")), _shortest_match(schema.get("pattern"))
    )
    need = _count(schema.get("minItems"))
    if need:
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        units = max(units, need * minimum_units(items, root, depth + 1, steps))
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    needed = [properties.get(key, {}) for key in required if isinstance(key, str)]
    units = max(units, sum(minimum_units(sub, root, depth + 1, steps) for sub in needed))
    for sub in schema.get("allOf") if isinstance(schema.get("allOf"), list) else []:
        units = max(units, minimum_units(sub, root, depth + 1, steps))
    return min(units, MAX_GENERATED_UNITS + 1)


def local_pointer(root: Any, ref: str) -> Any:
    """The part of ``root`` a local reference (``#/$defs/x``) names; None for anything else."""
    if not ref.startswith("#"):
        return None
    node = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node
