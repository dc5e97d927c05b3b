"""The building blocks of the catalogue: tool specs, two-step chains and JSON-Schema helpers.

A :class:`CatalogueTool` bundles everything the generator needs about one tool: its OpenAI schema
(``parameters`` and ``returns``), an argument sampler, a response fabricator (values consistent with
the arguments), a one-sentence summary of a response, and user phrasings split into train and test
templates. Templates use ``{slot}`` for an argument's surface form and ``[ ... ]`` for a fragment
that is kept only when every slot inside it has a value (optional arguments).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from slca_grpo.data.synthetic.values import (
    DATE_PATTERN,
    TIME_PATTERN,
    date_surface,
    number_surface,
    time_surface,
)

Args = dict[str, Any]
Response = dict[str, Any]
ArgSampler = Callable[[random.Random], Args]
Fabricator = Callable[[Args, random.Random], Response]
Summarizer = Callable[[Args, Response], str]


# --- JSON-Schema helpers -------------------------------------------------------------------------


def string(description: str, *, enum: tuple[str, ...] | None = None, pattern: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "description": description}
    if enum is not None:
        schema["enum"] = list(enum)
    if pattern is not None:
        schema["pattern"] = pattern
    return schema


def date_param(description: str = "Date as YYYY-MM-DD") -> dict[str, Any]:
    return string(description, pattern=DATE_PATTERN)


def time_param(description: str = "Time as HH:MM (24-hour)") -> dict[str, Any]:
    return string(description, pattern=TIME_PATTERN)


def integer(description: str, *, minimum: int | None = None, maximum: int | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer", "description": description}
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    return schema


def number(description: str, *, minimum: float | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "number", "description": description}
    if minimum is not None:
        schema["minimum"] = minimum
    return schema


def boolean(description: str) -> dict[str, Any]:
    return {"type": "boolean", "description": description}


def obj(properties: Mapping[str, dict[str, Any]], required: tuple[str, ...] | list[str] = ()) -> dict[str, Any]:
    """An object schema; ``required`` lists the mandatory keys."""
    schema: dict[str, Any] = {"type": "object", "properties": dict(properties)}
    if required:
        schema["required"] = list(required)
    return schema


def closed(properties: Mapping[str, dict[str, Any]], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """A response object: every property but ``optional`` required, nothing else allowed."""
    return {
        "type": "object",
        "properties": dict(properties),
        "required": [key for key in properties if key not in optional],
        "additionalProperties": False,
    }


def array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


# Bare type schemas for ``returns`` (descriptions there would only lengthen prompts).
STR = {"type": "string"}
INT = {"type": "integer"}
NUM = {"type": "number"}
BOOL = {"type": "boolean"}
DATE = {"type": "string", "pattern": DATE_PATTERN}
TIME = {"type": "string", "pattern": TIME_PATTERN}


def enum_of(values: tuple[str, ...]) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


def maybe(rng: random.Random, probability: float) -> bool:
    """Whether to include an optional argument."""
    return rng.random() < probability


# --- templates ----------------------------------------------------------------------------------

_OPTIONAL = re.compile(r"\[([^\[\]]*)\]")
_SLOT = re.compile(r"\{([a-z_0-9]+)\}")
_DOUBLE_STOP = re.compile(r"([.!?])(\"?)\.")


class TemplateError(ValueError):
    """A phrasing template asks for a slot that has no value (a bug in the catalogue)."""


def fill(template: str, slots: Mapping[str, str]) -> str:
    """Fill ``{slot}``s; drop each ``[ ... ]`` fragment that names a slot without a value."""

    def optional(match: re.Match[str]) -> str:
        fragment = match.group(1)
        return fragment if all(name in slots for name in _SLOT.findall(fragment)) else ""

    text = _OPTIONAL.sub(optional, template)
    missing = [name for name in _SLOT.findall(text) if name not in slots]
    if missing:
        raise TemplateError(f"template {template!r} needs slot(s) {missing} that have no value")
    text = _SLOT.sub(lambda m: slots[m.group(1)], text)
    text = _DOUBLE_STOP.sub(r"\1\2", text)  # 'says "Hi."' not 'says "Hi.".'
    return re.sub(r"  +", " ", text).strip()


# --- specs --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CatalogueTool:
    """One tool of the catalogue with what the generator needs to use it."""

    name: str
    domain: str
    description: str
    parameters: dict[str, Any]
    returns: dict[str, Any]
    capability: str  # completes "I can ...": used in refusals and tool listings
    sample_args: ArgSampler
    respond: Fabricator
    summarize: Summarizer
    train_phrasings: tuple[str, ...]
    test_phrasings: tuple[str, ...]
    parallel_slot: str | None = None  # an argument a request can list several values of
    # (rng, count, base arguments) -> ``count`` distinct values for ``parallel_slot``
    parallel_values: Callable[[random.Random, int, Args], list[Any]] | None = None
    surface_overrides: Mapping[str, Callable[[Any], str]] = field(default_factory=dict)

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-format schema, with ``returns``."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
                "returns": self.returns,
            },
        }

    def phrasings(self, split: str) -> tuple[str, ...]:
        return self.train_phrasings if split == "train" else self.test_phrasings

    def surface(self, args: Args, rng: random.Random) -> dict[str, str]:
        """How the user writes each argument value (dates and times vary in form)."""
        properties = self.parameters.get("properties", {})
        slots: dict[str, str] = {}
        for key, value in args.items():
            if key in self.surface_overrides:
                slots[key] = self.surface_overrides[key](value)
                continue
            prop = properties.get(key, {})
            if prop.get("pattern") == DATE_PATTERN:
                slots[key] = date_surface(value, rng)
            elif prop.get("pattern") == TIME_PATTERN:
                slots[key] = time_surface(value, rng)
            elif "enum" in prop:
                slots[key] = str(value).replace("_", " ")
            elif isinstance(value, (int, float)):
                slots[key] = number_surface(value)
            else:
                slots[key] = str(value)
        return slots


@dataclass(frozen=True)
class ChainSpec:
    """Two calls where the second uses a value that the first one returned.

    ``link(first_args, first_response, rng)`` returns the second call's arguments and the names of
    the arguments copied from the first response; the other second-call arguments come from the
    request and are phrased by the templates (slots of both calls' surface forms).
    """

    first: str
    second: str
    link: Callable[[Args, Response, random.Random], tuple[Args, list[str]]]
    train_phrasings: tuple[str, ...]
    test_phrasings: tuple[str, ...]
    first_args: ArgSampler | None = None  # defaults to the first tool's own sampler

    @property
    def name(self) -> str:
        return f"{self.first}->{self.second}"

    def phrasings(self, split: str) -> tuple[str, ...]:
        return self.train_phrasings if split == "train" else self.test_phrasings
