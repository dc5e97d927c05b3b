"""Id formats learned from a tool's schema and the session, so fabricated ids look like the real ones.

A parameter description often shows an id (``"The reservation ID, such as 'ZFA04Y'."``) and earlier
calls of the session pass real ids as arguments (``user_id="sara_doe_496"``). A new id for a field
of that name then takes the example's shape: the same characters up to its last separator, then
random characters of the same classes (``ZFA04Y`` → ``K8Q2MX``, ``credit_card_7815826`` →
``credit_card_3094417``), instead of the generic ``RES-482913``.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Mapping
from typing import Any

from slca_grpo.simulator.intent import is_id_key
from slca_grpo.simulator.words import DetRng

_EXAMPLE = re.compile(r"(?:such as|e\.g\.,?|for example,?|like)\s+['\"‘“]([^'\"’”\s]{2,40})['\"’”]", re.IGNORECASE)
_MAX_EXAMPLES = 64


def described_examples(parameters: Mapping[str, Any]) -> dict[str, str]:
    """``{id field: example}`` from the descriptions of a parameters schema's top-level properties."""
    properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
    found: dict[str, str] = {}
    for name, schema in (properties or {}).items():
        if not is_id_key(name) or not isinstance(schema, Mapping):
            continue
        match = _EXAMPLE.search(str(schema.get("description") or ""))
        if match:
            found[name] = match[1]
    return found


def argument_examples(calls: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """``{id field: value}`` from string id arguments of calls, later calls winning."""
    found: dict[str, str] = {}
    for call in calls:
        arguments = call.get("arguments") if isinstance(call, Mapping) else None
        for name, value in (arguments or {}).items() if isinstance(arguments, Mapping) else ():
            if is_id_key(name) and isinstance(value, str) and 2 <= len(value) <= 40:
                found.pop(name, None)
                found[name] = value
    while len(found) > _MAX_EXAMPLES:
        found.pop(next(iter(found)))
    return found


def shaped_like(example: str, rng: DetRng) -> str:
    """A fresh id with ``example``'s shape: its text up to the last separator kept, the rest drawn
    character by character from the same class (digit, upper-case, lower-case letter)."""
    cut = max((i + 1 for i, ch in enumerate(example) if not ch.isalnum()), default=0)
    out = [example[:cut]]
    for ch in example[cut:]:
        if ch.isdigit():
            out.append(rng.choice(string.digits))
        elif ch.isupper():
            out.append(rng.choice(string.ascii_uppercase))
        elif ch.islower():
            out.append(rng.choice(string.ascii_lowercase))
        else:
            out.append(ch)
    return "".join(out)
