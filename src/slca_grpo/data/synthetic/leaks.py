"""Checks that the synthetic suite's test split is new: no test gold argument value was seen in training.

The test split draws its slot values from the test parts of disjoint value pools
(:class:`~slca_grpo.data.synthetic.values.ValuePool`); :func:`value_leaks` verifies the outcome on
generated tasks, and :func:`value_pools` lists the pools so tests can check each one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from slca_grpo.data.synthetic import values
from slca_grpo.data.synthetic.catalogue import all_tools
from slca_grpo.data.synthetic.domains import DOMAIN_MODULES
from slca_grpo.data.synthetic.values import ValuePool
from slca_grpo.datatypes import Task

# Shorter strings (``"on"``, a two-letter code) match by chance and name nothing.
MIN_LEAK_LENGTH = 3
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_CLOCK = re.compile(r"\d{2}:\d{2}")


def argument_strings(value: Any) -> Iterator[str]:
    """Every string in an argument value, through nested lists and dicts (dict values, not keys)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from argument_strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from argument_strings(item)


def schema_enum_values(tools: Iterable[Mapping[str, Any]]) -> set[str]:
    """The string ``enum`` values anywhere in these tool schemas (parameters and returns)."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            enum = node.get("enum")
            if isinstance(enum, list):
                found.update(item for item in enum if isinstance(item, str))
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    for tool in tools:
        walk(tool)
    return found


def _gold_strings(task: Task) -> Iterator[str]:
    for call in task.flat_gold_calls:
        yield from argument_strings(call.arguments)


def value_leaks(train: Iterable[Task], test: Iterable[Task]) -> dict[str, list[str]]:
    """Test gold-argument strings that are also train gold-argument strings, with the test task ids.

    Not counted: values of any schema ``enum`` (the model reads those in the tool list, so both
    splits share them), ISO dates, ``HH:MM`` times and strings shorter than ``MIN_LEAK_LENGTH``.
    Enums are collected from the catalogue and from every task's offered tools. An empty dict means
    every counted test value is new. Keys are sorted; ids keep the order of ``test``.
    """
    train, test = list(train), list(test)
    exempt = schema_enum_values(all_tools())
    exempt |= schema_enum_values(tool for task in (*train, *test) for tool in task.tools)
    seen = {text for task in train for text in _gold_strings(task)}
    leaks: dict[str, list[str]] = {}
    for task in test:
        for text in _gold_strings(task):
            if text not in seen or text in exempt or len(text) < MIN_LEAK_LENGTH:
                continue
            if _ISO_DATE.fullmatch(text) or _CLOCK.fullmatch(text):
                continue
            ids = leaks.setdefault(text, [])
            if task.id not in ids:
                ids.append(task.id)
    return dict(sorted(leaks.items()))


def value_pools() -> dict[str, ValuePool[Any]]:
    """Every value pool of the suite by name (``values.CITY_NAMES``, ``travel.HOTEL_WORDS[0]``, ...)."""
    found: dict[int, tuple[str, ValuePool[Any]]] = {}
    for module in (values, *DOMAIN_MODULES):
        short = module.__name__.rsplit(".", 1)[-1]
        for name, item in vars(module).items():
            if isinstance(item, ValuePool):
                found.setdefault(id(item), (f"{short}.{name}", item))
            elif isinstance(item, tuple):  # a tuple of pools (HOTEL_WORDS)
                for index, part in enumerate(item):
                    if isinstance(part, ValuePool):
                        found.setdefault(id(part), (f"{short}.{name}[{index}]", part))
    return dict(sorted(found.values(), key=lambda pair: pair[0]))
