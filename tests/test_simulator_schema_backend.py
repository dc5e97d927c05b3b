"""The offline `schema` backend: valid, plausible, deterministic answers."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from simulator_helpers import (
    BOOKING_RETURNS,
    BOOKING_TOOLS,
    SEARCH_TOOL,
    STRING,
    WEATHER_RETURNS,
    WEATHER_TOOL,
    tool,
)

from slca_grpo.datatypes import ToolCall
from slca_grpo.simulator import Simulator, SimulatorConfig
from slca_grpo.simulator.intent import read_intent
from slca_grpo.simulator.regexgen import string_from_pattern
from slca_grpo.simulator.words import DetRng


def answer(sim: Simulator, name: str, args: dict, tools: list, session: str | None = None) -> dict:
    obs = sim.simulate(ToolCall(name, args), tools, session)
    assert obs.error is None, obs.text
    return json.loads(obs.text)


def test_same_seed_same_call_same_text_and_another_seed_differs():
    call = ToolCall("search_hotels", {"city": "Paris"})
    texts = [Simulator(SimulatorConfig(seed=7)).simulate(call, [SEARCH_TOOL]).text for _ in range(2)]
    other = Simulator(SimulatorConfig(seed=8)).simulate(call, [SEARCH_TOOL]).text
    assert texts[0] == texts[1]
    assert other != texts[0]


def test_answers_follow_the_returns_schema_and_echo_arguments():
    sim = Simulator(SimulatorConfig(seed=3))
    for city in ("Paris", "Lagos", "Springfield"):
        data = answer(sim, "get_weather", {"city": city, "unit": "celsius"}, [WEATHER_TOOL])
        jsonschema.validate(data, WEATHER_RETURNS, format_checker=jsonschema.FormatChecker())
        assert data["city"] == city
        assert data["condition"] in ("sunny", "cloudy", "rain", "snow")


def test_pattern_enum_and_format_constraints_hold_and_the_date_argument_is_echoed():
    sim = Simulator(SimulatorConfig(seed=1))
    data = answer(sim, "book_hotel", {"hotel": "Grand Plaza", "check_in": "2025-09-14", "nights": 3}, BOOKING_TOOLS)
    jsonschema.validate(data, BOOKING_RETURNS)
    assert re.fullmatch(r"BK-[0-9]{6}", data["booking_id"])
    assert data["status"] == "CONFIRMED"  # "confirmed" after a create, spelled as the enum spells it
    assert (data["hotel"], data["check_in"], data["nights"]) == ("Grand Plaza", "2025-09-14", 3)


def test_inferred_search_answer_is_a_list_of_records_bounded_by_the_arguments():
    sim = Simulator(SimulatorConfig(seed=5))
    data = answer(sim, "search_hotels", {"city": "Tokyo", "max_price": 150, "limit": 4}, [SEARCH_TOOL])
    hotels = data["hotels"]
    assert len(hotels) == 4 and data["total_results"] == 4
    assert len({h["hotel_id"] for h in hotels}) == 4
    for hotel in hotels:
        assert hotel["city"] == "Tokyo"
        assert 0 < hotel["price_per_night"] <= 150
        assert 1.0 <= hotel["rating"] <= 5.0
        assert isinstance(hotel["name"], str) and hotel["name"]
        assert "max_price" not in hotel and "limit" not in hotel


def test_field_name_heuristics_give_plausible_values():
    sim = Simulator(SimulatorConfig(seed=2))
    profile = tool("get_user_profile", {"user_id": STRING}, ["user_id"])
    data = answer(sim, "get_user_profile", {"user_id": "USR-1"}, [profile])
    assert data["user_id"] == "USR-1"
    assert re.fullmatch(r"[a-z]+\.[a-z]+@example\.com", data["email"])
    first, last = data["name"].lower().split()
    assert data["email"] == f"{first}.{last}@example.com"  # name and email belong to one person
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", data["created_at"])
    stock = answer(sim, "getStockPrice", {"symbol": "NVDA"}, [tool("getStockPrice", {"symbol": STRING})])
    assert stock["symbol"] == "NVDA" and isinstance(stock["price"], float) and stock["currency"] == "USD"


def test_currency_conversion_is_internally_consistent():
    sim = Simulator(SimulatorConfig())
    t = tool("convert_currency", {"amount": {"type": "number"}, "from_currency": STRING, "to_currency": STRING})
    data = answer(sim, "convert_currency", {"amount": 200, "from_currency": "USD", "to_currency": "EUR"}, [t])
    assert 0.85 < data["rate"] < 1.0
    assert data["converted_amount"] == round(200 * data["rate"], 2)


@pytest.mark.parametrize(
    ("name", "verb", "entity"),
    [
        ("get_weather", "get", "weather"),
        ("search_hotels", "search", "hotel"),
        ("cancel_booking", "cancel", "booking"),
        ("createHotelBooking", "create", "booking"),
        ("get_order_status", "get", "order"),
        ("list_orders", "search", "order"),
        ("delete_user", "delete", "user"),
        ("book_flight", "create", "flight"),
        ("convert_currency", "compute", "currency"),
    ],
)
def test_intent_is_read_from_the_tool_name(name, verb, entity):
    intent = read_intent(name)
    assert (intent.verb, intent.entity) == (verb, entity)


def test_composite_schemas_refs_and_nullable_types():
    schema = {
        "$defs": {
            "money": {
                "type": "object",
                "properties": {
                    "amount": {"type": "number", "minimum": 0},
                    "currency": {"type": "string", "enum": ["USD", "EUR"]},
                },
                "required": ["amount", "currency"],
                "additionalProperties": False,
            }
        },
        "type": "object",
        "allOf": [
            {"properties": {"total": {"$ref": "#/$defs/money"}}, "required": ["total"]},
            {"properties": {"note": {"type": ["string", "null"], "maxLength": 12}}},
        ],
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "tags": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 2,
                "maxItems": 2,
                "uniqueItems": True,
            },
            "code": {
                "oneOf": [
                    {"type": "integer", "multipleOf": 7, "minimum": 10, "maximum": 30},
                    {"type": "boolean"},
                ]
            },
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"const": "x"}], "items": False},
        },
        "required": ["id", "tags", "code", "pair"],
    }
    sim = Simulator(SimulatorConfig(seed=11))
    t = tool("get_invoice", {}, returns=schema)
    for i in range(5):
        data = answer(sim, "get_invoice", {"n": i}, [t])
        jsonschema.validate(data, schema, format_checker=jsonschema.FormatChecker())
    assert sim.backend.invalid_answers == 0


def test_an_unsatisfiable_returns_schema_is_counted_not_fatal():
    sim = Simulator(SimulatorConfig())
    t = tool("f", {}, returns={"type": "string", "minLength": 5, "maxLength": 2})
    obs = sim.simulate(ToolCall("f", {}), [t])
    assert obs.error is None and isinstance(json.loads(obs.text), str)
    assert sim.backend.invalid_answers == 1


def test_regex_generation_matches_common_patterns():
    rng = DetRng(0)
    for pattern in (
        r"^[A-Z]{3}-\d{4}$",
        r"^(foo|bar)+baz$",
        r"^\+?[0-9]{10,12}$",
        r"[^abc]x",
        r"(a|b)\1c",
        r"^[\w.-]+@[a-z]+\.(com|org)$",
    ):
        text = string_from_pattern(pattern, rng)
        assert text is not None and re.search(pattern, text), pattern
    assert string_from_pattern("(unclosed", rng) is None


# -- property: whatever the schema, the answer validates ---------------------------------------

FIELD_NAMES = [
    "id",
    "price",
    "email",
    "city",
    "status",
    "created_at",
    "name",
    "count",
    "rating",
    "url",
    "misc_value",
    "temperature",
    "is_active",
    "date",
    "items",
    "description",
]
_formats = st.sampled_from([None, "date", "date-time", "email", "uuid", "uri", "ipv4", "hostname"])


@st.composite
def string_schema(draw):  # type: ignore[no-untyped-def]
    schema: dict = {"type": "string"}
    choice = draw(st.integers(0, 3))
    if choice == 0:
        fmt = draw(_formats)
        if fmt:
            schema["format"] = fmt
    elif choice == 1:
        schema["pattern"] = draw(st.sampled_from([r"^[A-Z]{2}\d{3}$", r"^(red|green|blue)$", r"^\d+(\.\d{2})?$"]))
    elif choice == 2:
        low = draw(st.integers(0, 8))
        schema.update(minLength=low, maxLength=low + draw(st.integers(0, 20)))
    else:
        schema["enum"] = draw(st.lists(st.text(max_size=6), min_size=1, max_size=4, unique=True))
    return schema


@st.composite
def number_schema(draw):  # type: ignore[no-untyped-def]
    kind = draw(st.sampled_from(["integer", "number"]))
    low = draw(st.integers(-1000, 1000))
    width = draw(st.integers(10, 500))
    schema = {"type": kind}
    if draw(st.booleans()):
        schema["minimum"] = low
    if draw(st.booleans()):
        schema["maximum"] = low + width
    if draw(st.booleans()):
        schema["exclusiveMinimum"] = low - 1
    if kind == "integer" and draw(st.booleans()):
        schema["multipleOf"] = draw(st.integers(1, 9))
    return schema


leaf = st.one_of(
    string_schema(),
    number_schema(),
    st.just({"type": "boolean"}),
    st.just({"type": "null"}),
    st.builds(lambda v: {"const": v}, st.integers()),
    st.just({}),
)


def compound(children):  # type: ignore[no-untyped-def]
    def obj(props, required_flags, closed):  # type: ignore[no-untyped-def]
        schema = {"type": "object", "properties": props, "additionalProperties": not closed}
        schema["required"] = [k for k, flag in zip(props, required_flags[: len(props)], strict=True) if flag]
        return schema

    objects = st.builds(
        obj,
        st.dictionaries(st.sampled_from(FIELD_NAMES), children, max_size=5),
        st.lists(st.booleans(), min_size=5, max_size=5),
        st.booleans(),
    )
    arrays = st.builds(
        lambda items, low, extra: {"type": "array", "items": items, "minItems": low, "maxItems": low + extra},
        children,
        st.integers(0, 3),
        st.integers(0, 3),
    )
    unions = st.builds(lambda a, b: {"anyOf": [a, b]}, children, children)
    return st.one_of(objects, arrays, unions)


schemas = st.recursive(leaf, compound, max_leaves=12)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=schemas, seed=st.integers(0, 3))
def test_fabricated_answers_validate_against_any_returns_schema(schema, seed):
    sim = Simulator(SimulatorConfig(seed=seed))
    t = tool("get_record", {"record_id": STRING}, returns=schema)
    obs = sim.simulate(ToolCall("get_record", {"record_id": "R-1"}), [t])
    assert obs.error is None
    jsonschema.validate(json.loads(obs.text), schema, format_checker=jsonschema.FormatChecker())
    again = Simulator(SimulatorConfig(seed=seed)).simulate(ToolCall("get_record", {"record_id": "R-1"}), [t])
    assert again.text == obs.text


def test_records_are_internally_consistent():
    from datetime import datetime

    sim = Simulator(SimulatorConfig(seed=6))
    flights = tool("search_flights", {"origin": STRING, "destination": STRING, "date": STRING})
    data = answer(sim, "search_flights", {"origin": "Paris", "destination": "Rome", "date": "2025-07-04"}, [flights])
    for flight in data["flights"]:
        departure = datetime.fromisoformat(flight["departure_time"].rstrip("Z"))
        arrival = datetime.fromisoformat(flight["arrival_time"].rstrip("Z"))
        assert departure.date().isoformat() == "2025-07-04"
        assert (arrival - departure).total_seconds() / 60 == flight["duration_minutes"] > 0
        assert (flight["origin"], flight["destination"]) == ("Paris", "Rome")
    order = answer(sim, "create_order", {"customer_id": "C"}, [tool("create_order", {"customer_id": STRING})])
    assert order["total"] == round(sum(i["quantity"] * i["unit_price"] for i in order["items"]), 2)
