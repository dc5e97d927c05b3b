"""Deterministic checks made before any model call: tool known, schema sound, arguments valid.

Compiled validators are cached by the tool's canonical JSON, so a tool seen before costs one
``json.dumps`` and a dictionary lookup.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError, best_match

from slca_grpo.data.tasks import TaskFormatError
from slca_grpo.datatypes import Observation, Task, ToolCall, tool_function, tool_name
from slca_grpo.simulator import errors as E
from slca_grpo.simulator.intent import Intent, read_intent
from slca_grpo.simulator.safety import NO_RETRIEVAL, SAFE_KEYWORDS, SchemaRefused, check_schema_limits
from slca_grpo.simulator.words import canonical_json, digest

_MAX_MESSAGE = 300
_MAX_LISTED_TOOLS = 50
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _build_format_checker() -> FormatChecker:
    """Formats checked with the standard library only, so results do not depend on extras."""
    checker = FormatChecker(formats=("email", "idn-email", "ipv4", "ipv6", "uuid", "regex"))

    @checker.checks("date", raises=ValueError)
    def _is_date(value: object) -> bool:
        return not isinstance(value, str) or (bool(_DATE.fullmatch(value)) and bool(date.fromisoformat(value)))

    @checker.checks("date-time", raises=ValueError)
    def _is_datetime(value: object) -> bool:
        if not isinstance(value, str):
            return True
        if not re.match(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}", value):
            return False
        return bool(datetime.fromisoformat(re.sub(r"[Zz]$", "+00:00", value)))

    return checker


FORMAT_CHECKER = _build_format_checker()


@dataclass(frozen=True)
class ToolSpec:
    """A tool with its schemas checked and compiled."""

    name: str
    function: dict[str, Any]
    parameters: dict[str, Any]
    returns: dict[str, Any] | None
    digest: str  # sha256 of the canonical JSON of the tool (function + returns)
    intent: Intent
    arguments_validator: Any
    returns_validator: Any | None


def tool_returns(tool: dict[str, Any]) -> Any:
    """The ``returns`` schema of a tool, at either level; None when absent."""
    fn = tool_function(tool)
    if "returns" in fn:
        return fn["returns"]
    return tool.get("returns") if isinstance(tool, dict) else None


_SAFE_CLASSES: dict[type, type] = {}


def _safe_class(cls: type) -> type:
    # The draft's validator with pattern keywords on the time-limited engine (see safety.py).
    if cls not in _SAFE_CLASSES:
        _SAFE_CLASSES[cls] = jsonschema.validators.extend(cls, SAFE_KEYWORDS)
    return _SAFE_CLASSES[cls]


def compile_validator(schema: Any, part: str = "parameters") -> Any:
    """A validator for ``schema``: SchemaError when the schema itself is broken, SchemaRefused when
    it breaks the simulator's limits. It never fetches a reference."""
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(f"schema must be an object, got {type(schema).__name__}")
    check_schema_limits(schema, part)
    cls = jsonschema.validators.validator_for(schema, default=Draft202012Validator)
    cls.check_schema(schema)
    return _safe_class(cls)(schema, format_checker=FORMAT_CHECKER, registry=NO_RETRIEVAL)


class ToolChecker:
    """Finds the called tool and checks the call against it; thread-safe. Compiled tools are cached
    (least recently used first out) up to ``max_cached_tools`` and ``max_cached_bytes`` of tool JSON
    (a compiled validator's memory grows with its schema's size)."""

    def __init__(self, max_cached_tools: int = 4096, max_cached_bytes: int = 32 * 1024 * 1024) -> None:
        self._specs: OrderedDict[str, ToolSpec | Observation] = OrderedDict()
        self._max = max_cached_tools
        self._max_bytes = max_cached_bytes
        self._bytes = 0
        self._lock = threading.Lock()

    def check(self, call: ToolCall, tools: list[Any]) -> ToolSpec | Observation:
        """The tool spec when the call may go ahead, else an error observation."""
        name = call.name
        tool = None
        if isinstance(name, str) and name:
            for candidate in tools if isinstance(tools, list) else ():
                if isinstance(candidate, dict) and tool_name(candidate) == name:
                    tool = candidate
                    break
        if tool is None:
            available = (
                [n for n in (tool_name(t) for t in tools if isinstance(t, dict)) if n]
                if isinstance(tools, list)
                else []
            )
            return E.error_observation(
                E.UNKNOWN_TOOL,
                f"Tool {name!r} not found.",
                tool=name if isinstance(name, str) else None,
                available_tools=available[:_MAX_LISTED_TOOLS],
            )
        spec = self.spec(tool)
        if isinstance(spec, Observation):
            return dataclasses.replace(spec)  # cached per tool; the caller fills in its latency
        return self.check_arguments(spec, call.arguments)

    def spec(self, tool: dict[str, Any]) -> ToolSpec | Observation:
        try:
            key = canonical_json(tool)
        except (TypeError, ValueError) as exc:
            return E.error_observation(E.INVALID_SCHEMA, f"Tool schema is not JSON-serialisable: {exc}")
        with self._lock:
            cached = self._specs.get(key)
            if cached is not None:
                self._specs.move_to_end(key)
                return cached
        built = self._build(tool, key)
        with self._lock:
            if key not in self._specs:
                self._bytes += len(key)
            self._specs[key] = built
            while self._specs and (len(self._specs) > self._max or self._bytes > self._max_bytes):
                evicted, _ = self._specs.popitem(last=False)
                self._bytes -= len(evicted)
        return built

    @property
    def cached_bytes(self) -> int:
        return self._bytes

    def _build(self, tool: dict[str, Any], key: str) -> ToolSpec | Observation:
        fn = tool_function(tool)
        name = str(fn.get("name"))
        parameters = fn.get("parameters", fn.get("input_schema"))
        if parameters is None:
            parameters = {"type": "object", "properties": {}}
        returns = tool_returns(tool)
        validators: dict[str, Any] = {}
        for part, schema in (("parameters", parameters), ("returns", returns)):
            if schema is None:
                validators[part] = None
                continue
            try:
                validators[part] = compile_validator(schema, part)
            except SchemaError as exc:
                return _schema_error(name, part, exc)
            except SchemaRefused as exc:
                return E.error_observation(E.INVALID_SCHEMA, _short(f"Tool {name!r} is refused: {exc}"), tool=name)
            except RecursionError:
                return E.error_observation(E.INVALID_SCHEMA, f"Tool {name!r} has a {part} schema nested too deeply")
        arguments_validator, returns_validator = validators["parameters"], validators["returns"]
        description = fn.get("description") if isinstance(fn.get("description"), str) else ""
        return ToolSpec(
            name=name,
            function=fn,
            parameters=parameters if isinstance(parameters, dict) else {},
            returns=returns if isinstance(returns, dict) else None,
            digest=digest(key),
            intent=read_intent(name, description),
            arguments_validator=arguments_validator,
            returns_validator=returns_validator,
        )

    @staticmethod
    def check_arguments(spec: ToolSpec, arguments: Any) -> ToolSpec | Observation:
        if not isinstance(arguments, dict):
            return E.error_observation(
                E.INVALID_ARGUMENTS,
                f"Arguments must be a JSON object, got {type(arguments).__name__}.",
                tool=spec.name,
                path="$",
            )
        required = spec.parameters.get("required")
        if isinstance(required, list):
            missing = [r for r in required if isinstance(r, str) and r not in arguments]
            if missing:
                return E.error_observation(
                    E.MISSING_REQUIRED,
                    f"Missing required parameter{'s' if len(missing) > 1 else ''}: {', '.join(missing)}.",
                    tool=spec.name,
                    missing=missing,
                )
        try:
            error = best_match(spec.arguments_validator.iter_errors(arguments))
        except Exception as exc:  # unresolvable $ref and the like: the schema's fault, not the call's
            return E.error_observation(
                E.INVALID_SCHEMA, _short(f"Tool schema cannot be applied: {exc}"), tool=spec.name
            )
        if error is not None:
            return E.error_observation(
                E.INVALID_ARGUMENTS,
                _short(f"Invalid arguments: {error.message}"),
                tool=spec.name,
                path=error.json_path,
                validator=str(error.validator),
            )
        return spec


def check_gold_calls(task: Task, checker: ToolChecker | None = None) -> None:
    """``TaskFormatError`` naming the first gold call that its own tool's schema refuses: the
    simulator would answer it with an error observation, while the gold-call oracle and R_tool
    would score it perfect."""
    checker = checker or ToolChecker()
    for i, step in enumerate(task.gold_calls):
        for j, call in enumerate(step):
            verdict = checker.check(call, task.tools)
            if isinstance(verdict, Observation):
                why = f"{verdict.error.kind}: {verdict.error.message}" if verdict.error else verdict.text
                raise TaskFormatError(f"gold_calls[{i}][{j}] ('{call.name}') does not fit its tool's schema ({why})")


def validate_value(validator: Any, value: Any) -> str | None:
    """The first validation problem of ``value`` (with its JSON path), or None when it is valid."""
    try:
        error = best_match(validator.iter_errors(value))
    except Exception as exc:
        return _short(f"schema cannot be applied: {exc}")
    if error is None:
        return None
    return _short(f"{error.json_path}: {error.message}")


def _schema_error(name: str, part: str, exc: SchemaError) -> Observation:
    where = "/".join(str(p) for p in exc.path)
    message = f"Tool {name!r} has an invalid {part} schema" + (f" at {where}" if where else "") + f": {exc.message}"
    return E.error_observation(E.INVALID_SCHEMA, _short(message), tool=name)


def _short(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."
