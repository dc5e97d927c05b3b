"""The assembled catalogue: every tool spec and chain, sibling groups, held-out defaults, look-ups."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

from slca_grpo.data.synthetic.domains import DOMAIN_MODULES
from slca_grpo.data.synthetic.spec import Args, CatalogueTool, ChainSpec, Response

TOOL_SPECS: tuple[CatalogueTool, ...] = tuple(spec for module in DOMAIN_MODULES for spec in module.TOOLS)
CHAIN_SPECS: tuple[ChainSpec, ...] = tuple(chain for module in DOMAIN_MODULES for chain in module.CHAINS)
SPEC_BY_NAME: dict[str, CatalogueTool] = {spec.name: spec for spec in TOOL_SPECS}

# Tools with similar names or descriptions; offered together in "distractor" tasks and never
# offered as the "cannot help" tools of an irrelevant request for one another.
SIBLING_GROUPS: tuple[tuple[str, ...], ...] = (
    ("get_current_weather", "get_weather_forecast", "get_air_quality", "get_sunrise_sunset"),
    ("search_flights", "search_hotels", "search_products", "search_restaurants"),
    ("search_flights", "get_flight_status"),
    ("book_flight", "book_hotel", "make_reservation"),
    ("get_order_status", "track_package", "cancel_order"),
    ("add_to_cart", "cancel_order"),
    ("create_event", "set_reminder", "set_timer"),
    ("list_events", "find_free_slot", "delete_event", "create_event"),
    ("get_stock_price", "lookup_stock_symbol", "get_exchange_rate", "convert_currency"),
    ("get_account_balance", "transfer_money"),
    ("send_email", "send_sms", "read_inbox", "find_contact"),
    ("get_recipe", "search_restaurants"),
    ("set_thermostat", "control_lights", "lock_door"),
    ("get_local_time", "get_sunrise_sunset"),
    ("translate_text", "send_sms"),
)

# Tools kept out of the training split entirely (one in each of six domains), so the test split asks for
# schemas the model has never seen next to familiar ones. ``send_sms`` also holds one chain out.
DEFAULT_HELDOUT_TOOLS: tuple[str, ...] = (
    "get_sunrise_sunset",
    "track_package",
    "set_reminder",
    "get_exchange_rate",
    "send_sms",
    "lock_door",
)


def _siblings() -> dict[str, tuple[str, ...]]:
    found: dict[str, list[str]] = {spec.name: [] for spec in TOOL_SPECS}
    for group in SIBLING_GROUPS:
        for name in group:
            found[name].extend(other for other in group if other != name and other not in found[name])
    return {name: tuple(others) for name, others in found.items()}


SIBLINGS: dict[str, tuple[str, ...]] = _siblings()


def get_spec(name: str) -> CatalogueTool:
    """The spec of a catalogue tool; a clear ``KeyError`` for unknown names."""
    try:
        return SPEC_BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown synthetic tool {name!r}; known tools: {', '.join(sorted(SPEC_BY_NAME))}") from None


def all_tools(domain: str | None = None) -> list[dict[str, Any]]:
    """OpenAI-format schemas (with ``returns``) of every catalogue tool, or of one domain's tools."""
    if domain is not None and domain not in domains():
        raise ValueError(f"unknown domain {domain!r}; known domains: {', '.join(domains())}")
    return [copy.deepcopy(spec.schema()) for spec in TOOL_SPECS if domain is None or spec.domain == domain]


def domains() -> list[str]:
    """Domain names in catalogue order."""
    return list(dict.fromkeys(spec.domain for spec in TOOL_SPECS))


def tools_by_domain() -> dict[str, list[str]]:
    """Tool names per domain."""
    grouped: dict[str, list[str]] = {domain: [] for domain in domains()}
    for spec in TOOL_SPECS:
        grouped[spec.domain].append(spec.name)
    return grouped


def fabricate_response(name: str, arguments: Args, seed: int | str = 0) -> Response:
    """A response of catalogue tool ``name`` for ``arguments`` (valid against its ``returns``).

    Deterministic in (name, arguments, seed). Meant for arguments that validate against the tool's
    ``parameters``; a simulator for off-gold calls can use it after checking them.
    """
    spec = get_spec(name)
    key = json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
    rng = random.Random(f"{name}|{key}|{seed}")
    try:
        return spec.respond(dict(arguments), rng)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        required = spec.parameters.get("required", [])
        raise ValueError(f"arguments {arguments!r} do not fit tool {name!r} (required: {required}): {exc!r}") from None
