"""Fabricate a JSON response from a ``returns`` JSON Schema, filled with plausible values.

Values come first from the context (verb-implied overrides such as ``status: cancelled``, the
stored entity the call refers to, the call's arguments), then from field-name heuristics, then from
the schema alone. Keywords honoured: type (incl. lists), enum, const, format, pattern,
min/maxLength, minimum/maximum (exclusive too), multipleOf, items/prefixItems, min/maxItems,
uniqueItems, properties/required/additionalProperties/minProperties, allOf/anyOf/oneOf, local
``$ref``, ``nullable``. The caller validates the result and retries with echoing off if needed.
Every value and character counts against ``MAX_ANSWER_UNITS`` (the generator fills optional
properties and up to three items per array, so an answer can outgrow the smallest valid value the
schema checks bounded); past it, or past the call's time budget, generation stops.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from slca_grpo.simulator.budget import check_deadline
from slca_grpo.simulator.field_values import (
    MISSING,
    ValueContext,
    coerce,
    field_value,
    generic_value,
)
from slca_grpo.simulator.regexgen import string_from_pattern
from slca_grpo.simulator.safety import MAX_GENERATED_UNITS, PatternError, SchemaRefused, local_pointer, search
from slca_grpo.simulator.words import singular, snake

_MAX_DEPTH = 8
MAX_ANSWER_UNITS = 2 * MAX_GENERATED_UNITS  # characters + values of one generated answer
_TYPE_CHECKS = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


class SchemaFaker:
    """Builds one value for a schema; ``context_values`` maps field names to preferred values."""

    def __init__(
        self,
        root: Mapping[str, Any],
        ctx: ValueContext,
        context_values: Mapping[str, Any],
        *,
        echo: bool = True,
    ) -> None:
        self.root = root
        self.ctx = ctx
        self.context_values = context_values if echo else {}
        self._normalized = {_norm(k): v for k, v in self.context_values.items()}
        self.units_left = MAX_ANSWER_UNITS

    def generate(self, schema: Any = None, name: str = "", depth: int = 0, in_array: bool = False) -> Any:
        """A value for ``schema`` (the root by default); SchemaRefused when the answer would grow
        past ``MAX_ANSWER_UNITS``, OverBudget when the call's time budget is spent."""
        check_deadline()
        self._spend(1)
        schema = self._resolve(self.root if schema is None else schema)
        if schema is True or not isinstance(schema, Mapping):
            value = field_value(name, self.ctx) if name else MISSING
            return generic_value(name or "value", self.ctx, "string") if value is MISSING else value
        if "allOf" in schema:
            schema = self._merge_all_of(schema)
        if "const" in schema:
            return schema["const"]
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return self._from_enum(schema["enum"], name, in_array)
        for key in ("oneOf", "anyOf"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                rest = {k: v for k, v in schema.items() if k != key}
                option = self._option_for_context(options, name, in_array)
                if option is None:
                    option = options[0] if depth >= _MAX_DEPTH else self.ctx.rng.choice(options)
                merged = {**rest, **self._resolve(option)} if isinstance(self._resolve(option), Mapping) else rest
                return self.generate(merged, name, depth + 1, in_array)
        kind = self._pick_type(schema, name, in_array)
        if name:
            preferred = self._context_value(name, in_array)
            if preferred is not MISSING and _fits(preferred, schema, kind):
                return preferred
        if kind == "object":
            return self._object(schema, name, depth, in_array)
        if kind == "array":
            return self._array(schema, name, depth)
        if kind == "string":
            return self._string(schema, name)
        if kind in ("integer", "number"):
            return self._number(schema, name, kind)
        if kind == "boolean":
            value = field_value(name, self.ctx, "boolean") if name else MISSING
            return self.ctx.rng.chance(0.5) if value is MISSING else value
        return None

    # -- helpers -----------------------------------------------------------------------------

    def _spend(self, units: int) -> None:
        if units > self.units_left:
            raise SchemaRefused(
                f"its returns schema makes answers larger than {MAX_ANSWER_UNITS:,} characters and values"
            )
        self.units_left -= units

    def _resolve(self, schema: Any, hops: int = 0) -> Any:
        while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str) and hops < 20:
            target = local_pointer(self.root, schema["$ref"])
            if target is None:
                return {k: v for k, v in schema.items() if k != "$ref"} or True
            extra = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **extra} if isinstance(target, Mapping) else target
            hops += 1
        return schema

    def _merge_all_of(self, schema: Mapping[str, Any]) -> dict[str, Any]:
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema.get("allOf") or []:
            part = self._resolve(part)
            if not isinstance(part, Mapping):
                continue
            if "allOf" in part:
                part = self._merge_all_of(part)
            for key, value in part.items():
                if key == "properties" and isinstance(value, Mapping):
                    merged["properties"] = {**merged.get("properties", {}), **value}
                elif key == "required" and isinstance(value, list):
                    merged["required"] = list(dict.fromkeys([*merged.get("required", []), *value]))
                elif key in ("minimum", "exclusiveMinimum", "minLength", "minItems") and key in merged:
                    merged[key] = max(merged[key], value)
                elif key in ("maximum", "exclusiveMaximum", "maxLength", "maxItems") and key in merged:
                    merged[key] = min(merged[key], value)
                else:
                    merged[key] = value
        return merged

    def _pick_type(self, schema: Mapping[str, Any], name: str, in_array: bool) -> str:
        declared = schema.get("type")
        types = [declared] if isinstance(declared, str) else [t for t in declared or [] if isinstance(t, str)]
        if not types:
            if "properties" in schema or "required" in schema or "additionalProperties" in schema:
                types = ["object"]
            elif "items" in schema or "prefixItems" in schema or "minItems" in schema:
                types = ["array"]
            elif any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "multipleOf")):
                types = ["number"]
            elif any(k in schema for k in ("minLength", "maxLength", "pattern", "format")):
                types = ["string"]
            else:
                guess = field_value(name, self.ctx) if name else MISSING
                types = [_json_type(guess)] if guess is not MISSING else ["string"]
        concrete = [t for t in types if t != "null"]
        if not concrete:
            return "null"
        preferred = self._context_value(name, in_array) if name else MISSING
        for t in concrete:
            if preferred is not MISSING and _TYPE_CHECKS.get(t, lambda v: False)(preferred):
                return t
        return concrete[0]

    def _option_for_context(self, options: list[Any], name: str, in_array: bool) -> Any:
        """The first alternative the context's value for ``name`` fits (``status: cancelled`` picks
        ``{"const": "cancelled"}`` over ``{"type": "null"}``), or None."""
        preferred = self._context_value(name, in_array) if name else MISSING
        if preferred is MISSING:
            return None
        for option in options:
            resolved = self._resolve(option)
            if not isinstance(resolved, Mapping):
                continue
            if "const" in resolved:
                if resolved["const"] == preferred:
                    return option
                continue
            if isinstance(resolved.get("enum"), list):
                if preferred in resolved["enum"]:
                    return option
                continue
            declared = resolved.get("type")
            types = [declared] if isinstance(declared, str) else list(declared or [])
            if any(_TYPE_CHECKS.get(t, lambda v: False)(preferred) for t in types if isinstance(t, str)):
                return option
        return None

    def _context_value(self, name: str, in_array: bool) -> Any:
        if name in self.context_values:
            value = self.context_values[name]
        else:
            value = self._normalized.get(_norm(name), MISSING)
        # Inside lists only filters echo (every hotel is in the searched city); ids do not.
        if in_array and (snake(name) == "id" or snake(name).endswith("_id")):
            return MISSING
        return value

    def _from_enum(self, options: list[Any], name: str, in_array: bool) -> Any:
        preferred = self._context_value(name, in_array) if name else MISSING
        if preferred is MISSING and name:
            preferred = field_value(name, self.ctx)
        if preferred is not MISSING:
            if preferred in options:
                return preferred
            if isinstance(preferred, str):
                close = _closest_enum(preferred, options)
                if close is not MISSING:
                    return close
        return self.ctx.rng.choice(options)

    def _object(self, schema: Mapping[str, Any], name: str, depth: int, in_array: bool) -> dict[str, Any]:
        declared = schema.get("properties")
        props: Mapping[str, Any] = declared if isinstance(declared, Mapping) else {}
        required = [r for r in schema.get("required") or [] if isinstance(r, str)]
        shallow = depth >= _MAX_DEPTH
        result: dict[str, Any] = {}
        if in_array:
            self.ctx.new_record()
        for key, sub in props.items():
            if shallow and key not in required:
                continue
            result[key] = self.generate(sub, key, depth + 1, in_array)
        for key in required:
            if key not in result:
                result[key] = self.generate(self._extra_schema(schema, key), key, depth + 1, in_array)
        wanted = schema.get("minProperties")
        extra = self._extra_schema(schema, None)
        index = 1
        while isinstance(wanted, int) and len(result) < wanted and extra is not False and index < 100:
            key = f"field_{index}"
            if key not in result:
                result[key] = self.generate(extra, key, depth + 1, in_array)
            index += 1
        return result

    def _extra_schema(self, schema: Mapping[str, Any], key: str | None) -> Any:
        if key is not None:
            for pattern, sub in (schema.get("patternProperties") or {}).items():
                try:
                    if search(pattern, key):
                        return sub
                except PatternError:  # too slow or invalid: the pattern does not apply
                    continue
        extra = schema.get("additionalProperties", True)
        return True if extra is None else extra

    def _array(self, schema: Mapping[str, Any], name: str, depth: int) -> list[Any]:
        prefix = schema.get("prefixItems")
        items = schema.get("items", True)
        if isinstance(items, list):  # draft 4-7 tuple form
            prefix, items = items, schema.get("additionalItems", True)
        prefix = prefix if isinstance(prefix, list) else []
        low = schema.get("minItems", 0) if isinstance(schema.get("minItems"), int) else 0
        high = schema.get("maxItems") if isinstance(schema.get("maxItems"), int) else None
        if depth >= _MAX_DEPTH:
            count = max(low, len(prefix) if items is False else 0)
        else:
            lo, hi = max(low, 1), max(low, 3)
            if high is not None:
                hi = min(hi, high)
                lo = min(lo, hi)
            count = self.ctx.rng.randint(lo, hi)
        count = max(count, min(len(prefix), high if high is not None else len(prefix)))
        item_name = singular(snake(name)) if name else "item"
        values: list[Any] = []
        attempts = 0
        while len(values) < count and attempts < count * 4 + 4:
            attempts += 1
            index = len(values)
            sub = prefix[index] if index < len(prefix) else items
            if sub is False:
                break
            value = self.generate(sub, item_name, depth + 1, in_array=True)
            if schema.get("uniqueItems") and value in values:
                continue
            values.append(value)
        return values

    def _string(self, schema: Mapping[str, Any], name: str) -> str:
        fmt = schema.get("format")
        pattern = schema.get("pattern")
        value: Any = MISSING
        if isinstance(fmt, str):
            value = self._formatted(fmt, name)
        if value is MISSING and isinstance(pattern, str):
            value = string_from_pattern(pattern, self.ctx.rng, max_chars=self.units_left) or MISSING
        if value is MISSING and name:
            value = field_value(name, self.ctx, "string")
        if value is MISSING:
            value = generic_value(name or "value", self.ctx, "string")
        if fmt is None and pattern is None:
            min_length = schema.get("minLength")
            self._spend(min_length if isinstance(min_length, int) and min_length > 0 else 0)  # before padding
            value = _fit_length(value, schema, self.ctx)
        else:
            self._spend(len(value))
        return value

    def _formatted(self, fmt: str, name: str) -> Any:
        ctx = self.ctx
        if fmt == "date-time":
            value = field_value(name, ctx, "string") if name else MISSING
            if isinstance(value, str) and re.match(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}", value):
                return value
            return ctx.base_time().strftime("%Y-%m-%dT%H:%M:%SZ")
        if fmt == "date":
            value = field_value(name, ctx, "string") if name else MISSING
            if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
                return value
            return (ctx.anchor + timedelta(days=ctx.rng.randint(0, 5))).isoformat()
        if fmt == "time":
            return f"{ctx.rng.randint(6, 21):02d}:{5 * ctx.rng.randint(0, 11):02d}:00Z"
        by_format = {
            "email": "email",
            "idn-email": "email",
            "uri": "url",
            "url": "url",
            "iri": "url",
            "uri-reference": "url",
            "iri-reference": "url",
            "uuid": "uuid",
            "ipv4": "ip",
        }
        if fmt in by_format:
            return field_value(by_format[fmt], ctx, "string")
        if fmt in ("hostname", "idn-hostname"):
            return f"api{ctx.rng.randint(1, 9)}.example.com"
        if fmt == "ipv6":
            return f"2001:db8::{ctx.rng.randint(1, 0xFFFF):x}"
        if fmt == "duration":
            return f"PT{ctx.rng.randint(1, 12)}H{ctx.rng.randint(0, 59)}M"
        return MISSING

    def _number(self, schema: Mapping[str, Any], name: str, kind: str) -> int | float:
        low, high = _bounds(schema, kind)
        value = field_value(name, self.ctx, kind) if name else MISSING
        if value is MISSING or (low is not None and value < low) or (high is not None and value > high):
            lo = low if low is not None else (high - 100 if high is not None else 1)
            hi = high if high is not None else lo + (99 if kind == "integer" else 499)
            value = (
                self.ctx.rng.randint(math.ceil(lo), math.floor(hi))
                if kind == "integer"
                else round(self.ctx.rng.uniform(lo, hi), 2)
            )
            if kind == "number" and ((low is not None and value < low) or (high is not None and value > high)):
                value = lo
        step = schema.get("multipleOf")
        if isinstance(step, (int, float)) and not isinstance(step, bool) and step > 0:
            value = _snap(value, step, low, high, kind)
        return int(value) if kind == "integer" else value


def _bounds(schema: Mapping[str, Any], kind: str) -> tuple[float | None, float | None]:
    def num(key: str) -> float | None:
        v = schema.get(key)
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    low, high = num("minimum"), num("maximum")
    tiny = 1 if kind == "integer" else 1e-6
    ex_low, ex_high = num("exclusiveMinimum"), num("exclusiveMaximum")
    if schema.get("exclusiveMinimum") is True and low is not None:  # draft 4 booleans
        low += tiny
    elif ex_low is not None:
        low = max(low if low is not None else -math.inf, ex_low + tiny)
    if schema.get("exclusiveMaximum") is True and high is not None:
        high -= tiny
    elif ex_high is not None:
        high = min(high if high is not None else math.inf, ex_high - tiny)
    if kind == "integer":
        low = math.ceil(low) if low is not None else None
        high = math.floor(high) if high is not None else None
    return low, high


def _snap(value: float, step: float, low: float | None, high: float | None, kind: str) -> float:
    lo = math.ceil(low / step) if low is not None else None
    hi = math.floor(high / step) if high is not None else None
    k = round(value / step)
    if lo is not None:
        k = max(k, lo)
    if hi is not None:
        k = min(k, hi)
    snapped = k * step
    if kind == "number":
        snapped = round(snapped, 10)
        if isinstance(step, int) and float(snapped).is_integer():
            snapped = int(snapped)
    return snapped


def _fit_length(value: str, schema: Mapping[str, Any], ctx: ValueContext) -> str:
    min_length, max_length = schema.get("minLength"), schema.get("maxLength")
    low: int = min_length if isinstance(min_length, int) else 0
    high: int | None = max_length if isinstance(max_length, int) else None
    if high is not None and len(value) > high:
        value = value[:high].rstrip() if high > 0 else ""
        value = value if len(value) >= low else value.ljust(low, "x")
    while len(value) < low:
        value += ctx.rng.choice("abcdefghijklmnopqrstuvwxyz")
    return value


def _fits(value: Any, schema: Mapping[str, Any], kind: str) -> bool:
    """Cheap check of the common keywords; the caller validates the whole answer afterwards."""
    if not _TYPE_CHECKS.get(kind, lambda v: False)(value):
        return False
    if kind == "string":
        if isinstance(schema.get("minLength"), int) and len(value) < schema["minLength"]:
            return False
        if isinstance(schema.get("maxLength"), int) and len(value) > schema["maxLength"]:
            return False
        if isinstance(schema.get("pattern"), str):
            try:
                if not search(schema["pattern"], value):
                    return False
            except PatternError:
                return False
        fmt = schema.get("format")
        if fmt == "date" and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            return False
        if fmt == "date-time" and not re.match(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}", value):
            return False
        if fmt == "email" and "@" not in value:
            return False
    if kind in ("integer", "number"):
        low, high = _bounds(schema, kind)
        if (low is not None and value < low) or (high is not None and value > high):
            return False
    if kind == "array":
        if isinstance(schema.get("minItems"), int) and len(value) < schema["minItems"]:
            return False
        if isinstance(schema.get("maxItems"), int) and len(value) > schema["maxItems"]:
            return False
    return True


def _closest_enum(wanted: str, options: list[Any]) -> Any:
    """``"cancelled"`` → ``"CANCELED"`` when that is what the enum spells."""
    key = re.sub(r"[^a-z]", "", wanted.lower())
    for option in options:
        if isinstance(option, str) and re.sub(r"[^a-z]", "", option.lower()) == key:
            return option
    if len(key) >= 5:
        for option in options:
            if isinstance(option, str) and re.sub(r"[^a-z]", "", option.lower())[:5] == key[:5]:
                return option
    return MISSING


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _json_type(value: Any) -> str:
    for name in ("boolean", "integer", "number", "string", "array", "object"):
        if _TYPE_CHECKS[name](value):
            return name
    return "string"


__all__ = ["SchemaFaker", "coerce"]
