"""Tools nobody has seen: new names, descriptions, parameters, types, enums and nesting.

The reader's corpus (:mod:`recipes.reader.corpus`) offers these tools, or disguises the synthetic
suite's tools with other names (:func:`disguise`), so that picking a tool and filling its
arguments can only be done by reading the schema in the prompt, never by recalling a catalogue.
Everything draws from an explicit ``random.Random``. The corpus calls both with ``readable=True``
and ``catalogue_names=False``; the defaults are an earlier corpus's (v3), which the tests also use.

Names are made of real words (:mod:`recipes.reader.words`: ``fetch_parcel_status``), like
the names real tools have; values are invented (``"Tovarim"``, ``"QX-83KD"``), so that no value
can be recalled either. An invented tool acts on a *noun* (``"parcel"``). Each parameter has a
*label*, the word a request uses for it (``"the color"``): the parameter's name is the label
itself or other words, and its description always says the label, so the request's words lead to
the name only through the schema.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import random
import re
import string
from dataclasses import dataclass, field
from typing import Any

from recipes.reader.words import (
    ATTRIBUTES,
    VERBS,
    allowed_name,
    noun_phrase,
    readable_name,
    real_param_name,
    real_tool_name,
    snake,
)
from slca_grpo.data.synthetic import DEFAULT_HELDOUT_TOOLS
from slca_grpo.data.synthetic.catalogue import TOOL_SPECS

_CONSONANTS = "bcdfghjklmnprstvwz"
_VOWELS = "aeiou"
_PARAM_TYPES = ("string", "string", "string", "code", "integer", "number", "boolean", "enum", "object", "array")


def invented_word(rng: random.Random, length: int | None = None, capital: bool = False) -> str:
    """A pronounceable made-up word (``"tovarim"``): a value no word list holds."""
    length = length or rng.randint(4, 9)
    word = "".join(rng.choice(_VOWELS if position % 2 else _CONSONANTS) for position in range(length))
    return word.capitalize() if capital else word


def fresh_code(value: str, rng: random.Random) -> str:
    """Same shape, new characters: ``"ORD-CIV8ED"`` → ``"ORD-KQP2ZA"`` (a dash-separated prefix stays)."""
    prefix, dash, rest = value.partition("-")
    if not dash or not prefix.isalpha():
        prefix, dash, rest = "", "", value
    out = []
    for char in rest:
        if char.isdigit():
            out.append(rng.choice(string.digits))
        elif char.isupper():
            out.append(rng.choice(string.ascii_uppercase))
        elif char.islower():
            out.append(rng.choice(string.ascii_lowercase))
        else:
            out.append(char)
    return prefix + dash + "".join(out)


def random_code(rng: random.Random) -> str:
    prefix = "".join(rng.choice(string.ascii_uppercase) for _ in range(rng.randint(2, 4)))
    return fresh_code(prefix + "-" + "X9" * rng.randint(2, 4), rng)


def random_value(rng: random.Random) -> str:
    """A fresh string value: a word or two, a code, a number, a date or an e-mail address."""
    kind = rng.random()
    if kind < 0.3:
        return invented_word(rng, capital=True)
    if kind < 0.45:
        return f"{invented_word(rng, capital=True)} {invented_word(rng, capital=rng.random() < 0.5)}"
    if kind < 0.7:
        return random_code(rng)
    if kind < 0.85:
        return str(rng.randint(10, 99999))
    if kind < 0.95:
        return (dt.date(2020, 1, 1) + dt.timedelta(days=rng.randrange(4000))).isoformat()
    return f"{invented_word(rng)}.{invented_word(rng)}@{invented_word(rng)}.com"


@dataclass
class Param:
    """One parameter: its name in the schema, the label a request calls it by, its kind and schema."""

    name: str
    label: str
    kind: str
    schema: dict[str, Any]
    children: list[Param] = field(default_factory=list)

    def sample(self, rng: random.Random) -> Any:
        if self.kind == "integer":
            return rng.randint(self.schema.get("minimum", 1), self.schema.get("maximum", 500))
        if self.kind == "number":
            return round(rng.uniform(0.5, 999.0), 2)
        if self.kind == "boolean":
            return rng.random() < 0.5
        if self.kind == "enum":
            return rng.choice(self.schema["enum"])
        if self.kind == "code":
            return random_code(rng)
        if self.kind == "object":
            return {child.name: child.sample(rng) for child in self.children}
        if self.kind == "array":
            return [invented_word(rng, capital=True) for _ in range(rng.randint(2, 3))]
        return random_value(rng)

    def phrase(self, value: Any, rng: random.Random) -> str:
        """How a request says this parameter and its value: ``"pemol Zorat"``, ``"the vaki set to yes"``."""
        if self.kind == "object":
            return " and ".join(f"{self.label} {child.phrase(value[child.name], rng)}" for child in self.children)
        if self.kind == "boolean":
            return f"{self.label} {'yes' if value else 'no'}"
        if self.kind == "array":
            return f"{self.label} {', '.join(value[:-1])} and {value[-1]}"
        return rng.choice(("{l} {v}", "the {l} {v}", "{l} set to {v}", "{l} = {v}")).format(l=self.label, v=value)


def _unused(make: Any, taken: set[str]) -> str:
    word = make()
    while word in taken:
        word = make()
    taken.add(word)
    return word


def _param(rng: random.Random, noun: str, taken: set[str], depth: int = 0, readable: bool = False) -> Param:
    """A new parameter; ``taken`` holds the labels and names already used by the tool (it grows).
    ``readable``: its name says its label (``color``, ``parcel_color``), as real parameters' do."""
    label = _unused(lambda: rng.choice(ATTRIBUTES), taken)
    if readable:
        name = label if rng.random() < 0.8 else _unused(lambda: f"{snake(noun)}_{snake(label)}", taken)
    # The name is the label half the time; otherwise other words, and only the description connects them.
    else:
        name = label if rng.random() < 0.5 else _unused(lambda: real_param_name(rng, noun), taken)
    kind = rng.choice(_PARAM_TYPES[:-2] if depth else _PARAM_TYPES)
    what = rng.choice(("The {n}'s {l}", "{L} of the {n}", "Which {l} to use", "The {l} (as the user says it)"))
    description = what.format(n=noun, l=label, L=label.capitalize())
    schema: dict[str, Any] = {"type": "string", "description": description}
    children: list[Param] = []
    if kind == "integer":
        schema = {"type": "integer", "description": description}
        if rng.random() < 0.4:
            schema.update(minimum=1, maximum=rng.choice((9, 50, 500, 9999)))
    elif kind == "number":
        schema = {"type": "number", "description": description}
    elif kind == "boolean":
        schema = {"type": "boolean", "description": description}
    elif kind == "enum":
        schema["enum"] = [invented_word(rng, rng.randint(3, 7)) for _ in range(rng.randint(2, 5))]
    elif kind == "code":
        schema["description"] = description + rng.choice(("", " (an id)", ", e.g. 'AB-12CD'"))
    elif kind == "object":
        inner: set[str] = set(taken)
        children = [_param(rng, noun, inner, depth + 1, readable) for _ in range(2)]
        schema = {
            "type": "object",
            "description": description,
            "properties": {child.name: child.schema for child in children},
            "required": [child.name for child in children],
        }
    elif kind == "array":
        schema = {"type": "array", "description": description, "items": {"type": "string"}}
    return Param(name, label, kind, schema, children)


@dataclass
class InventedTool:
    """An invented tool: its noun and verb (what a request asks for), parameters and schema."""

    name: str
    verb: str
    noun: str
    required: list[Param]
    optional: list[Param]

    @property
    def params(self) -> list[Param]:
        return [*self.required, *self.optional]

    description: str = ""

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": {p.name: p.schema for p in self.params},
                    "required": [p.name for p in self.required],
                },
            },
        }

    def sample_arguments(self, rng: random.Random) -> dict[str, Any]:
        chosen = [*self.required, *(p for p in self.optional if rng.random() < 0.4)]
        return {p.name: p.sample(rng) for p in chosen}

    def request_details(self, arguments: dict[str, Any], rng: random.Random) -> str:
        by_name = {p.name: p for p in self.params}
        return " and ".join(by_name[name].phrase(value, rng) for name, value in arguments.items())


def invented_tool(
    rng: random.Random,
    taken: set[str] | None = None,
    readable: bool = False,
    catalogue_names: bool = True,
    noun: str | None = None,
    verb: str | None = None,
) -> InventedTool:
    """A new tool whose noun and name are not in ``taken`` (the nouns and names of the other tools
    of its document; both join it). ``readable``: its name and its parameters' names always say
    what they are (no name of other words). ``catalogue_names=False``: its name holds no catalogue
    tool's name (``book_flight_status`` is drawn again). ``noun`` / ``verb``: the tool acts on that
    noun or with that verb (a near miss of another tool of the document, which shares it)."""
    taken = taken if taken is not None else set()
    if noun is None:
        noun = _unused(lambda: noun_phrase(rng), taken)
    else:
        taken.add(noun)
    verb = verb if verb is not None else rng.choice(VERBS)
    roll = rng.random()
    # Most names say the verb and the noun, as real tools' do; the rest say other words, and only
    # the description tells what the tool does.
    if roll < (0.7 if readable else 0.45):
        name = f"{verb}_{snake(noun)}"
    elif readable or roll < 0.7:
        name = f"{verb}_{snake(noun)}_{rng.choice(ATTRIBUTES)}"
    else:
        name = real_tool_name(rng)
    # Another tool of the document may have taken it (an opaque name may say this tool's verb and noun).
    name = _free_name(name, lambda: real_tool_name(rng), taken, _forbidden_names(catalogue_names))
    taken_params: set[str] = set()
    required = [_param(rng, noun, taken_params, readable=readable) for _ in range(rng.randint(1, 3))]
    optional = [_param(rng, noun, taken_params, readable=readable) for _ in range(rng.choice((0, 0, 1, 2)))]
    labels = " and ".join(p.label for p in required)
    description = rng.choice(
        (
            "{V} a {n}.",
            "{V} a {n} by its {labels}.",
            "{V} the {n} that the user names; needs the {labels}.",
            "Use this to {v} a {n}.",
        )
    ).format(V=verb.capitalize(), v=verb, n=noun, labels=labels)
    return InventedTool(name, verb, noun, required, optional, description)


# Every catalogue tool's name, train and test: a corpus without them (``catalogue_names=False``)
# never rewards writing a name from memory.
CATALOGUE_NAMES: tuple[str, ...] = tuple(sorted(spec.name for spec in TOOL_SPECS))


def _forbidden_names(catalogue_names: bool) -> tuple[str, ...]:
    """Names a new tool name may not hold: the held-out tools', or every catalogue tool's."""
    return DEFAULT_HELDOUT_TOOLS if catalogue_names else CATALOGUE_NAMES


def _free_name(name: str, redraw: Any, taken: set[str], forbidden: Any = DEFAULT_HELDOUT_TOOLS) -> str:
    """``name``, or ``redraw()`` until a name is neither in ``taken`` nor holds a name of
    ``forbidden`` (the held-out tools'); the name joins ``taken``."""
    while name in taken or not allowed_name(name, forbidden):
        name = redraw()
    taken.add(name)
    return name


# --- disguising the synthetic suite's tools ---


def disguise(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    rng: random.Random,
    rename_params: float = 0.5,
    keep_name: float = 0.25,
    readable: bool = False,
    catalogue_names: bool = True,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The same conversation with most tools renamed (and some parameters) to other real words:
    a catalogue name cannot be recalled, since a quarter keep theirs (``keep_name``) and the rest
    are called anything (``get_weather_forecast`` → ``get_parcel_status``), or, ``readable``,
    by words of their own description (``get_weather_forecast`` → ``get_daily_weather``,
    a parameter ``days`` → ``forecast``).

    Descriptions stay, so the request still leads to the right tool and argument, but only through
    the schema. ``catalogue_names=False``: no tool keeps its name, and no new name holds any
    catalogue tool's name, so a name recalled from memory is never the one offered. Returns new
    ``(messages, tools)``; the inputs are not changed.
    """
    forbidden = _forbidden_names(catalogue_names)
    keep_name = keep_name if catalogue_names else 0.0
    tools = copy.deepcopy(tools)
    names: dict[str, str] = {}
    params: dict[str, dict[str, str]] = {}
    used = {tool["function"]["name"] for tool in tools}
    for tool in tools:
        function = tool["function"]
        old = function["name"]
        if rng.random() < keep_name:
            new = old
        elif readable:
            verb = old.split("_", 1)[0] if rng.random() < 0.85 else rng.choice(VERBS)
            text = function.get("description", "")

            def redraw(verb: str = verb, text: str = text) -> str:  # a sibling took it: other words may say it
                said = readable_name(rng, text, prefix=verb) if rng.random() < 0.5 else None
                return said or real_tool_name(rng, verb=verb)

            first = readable_name(rng, text, prefix=verb) or real_tool_name(rng, verb=verb)
            # A description may say the catalogue name itself (``send_email``): it is then kept.
            new = first if first == old and catalogue_names else _free_name(first, redraw, used, forbidden)
        else:
            verb = old.split("_", 1)[0] if rng.random() < 0.5 else None
            new = _free_name(
                real_tool_name(rng, verb=verb), lambda verb=verb: real_tool_name(rng, verb=verb), used, forbidden
            )
        names[old] = function["name"] = new
        properties = function.get("parameters", {}).get("properties", {})
        if readable:
            renamed = {
                key: readable_name(rng, value.get("description", "")) or key if rng.random() < rename_params else key
                for key, value in properties.items()
            }
        else:
            renamed = {key: real_param_name(rng) if rng.random() < rename_params else key for key in properties}
        if len(set(renamed.values())) < len(renamed):
            renamed = {key: key for key in properties}
        params[new] = renamed
        function["parameters"]["properties"] = {renamed[k]: v for k, v in properties.items()}
        if "required" in function["parameters"]:
            function["parameters"]["required"] = [renamed.get(k, k) for k in function["parameters"]["required"]]
    # Descriptions that name another tool ("Restaurant identifier from search_restaurants") name it as renamed.
    renames = {old: new for old, new in names.items() if old != new}
    if renames:
        pattern = re.compile(
            "|".join(rf"(?<!\w){re.escape(old)}(?!\w)" for old in sorted(renames, key=len, reverse=True))
        )
        tools = json.loads(pattern.sub(lambda match: renames[match.group(0)], json.dumps(tools)))
    out = []
    for message in copy.deepcopy(messages):
        if message.get("role") == "assistant" and message.get("tool_calls"):
            for call in message["tool_calls"]:
                function = call.get("function", call)
                function["name"] = names.get(function["name"], function["name"])
                mapping = params.get(function["name"], {})
                arguments = function.get("arguments")
                if isinstance(arguments, str):
                    arguments = json.loads(arguments)
                function["arguments"] = {mapping.get(k, k): v for k, v in (arguments or {}).items()}
        elif message.get("role") == "tool" and message.get("name") in names:
            message["name"] = names[message["name"]]
        out.append(message)
    return out, tools
