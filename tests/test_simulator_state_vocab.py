"""The schema backend's reading of τ²-style tools (the gaps recipes/sim_fidelity found): writes named by
their record, status vocabularies from names and descriptions, conflicts, id shapes, and echoing
under a returns schema."""

from __future__ import annotations

import json

import pytest
from simulator_helpers import STRING, tool

from slca_grpo.datatypes import ToolCall
from slca_grpo.simulator import Simulator, SimulatorConfig
from slca_grpo.simulator.idshapes import argument_examples, described_examples, shaped_like
from slca_grpo.simulator.intent import described_status, read_intent
from slca_grpo.simulator.words import DetRng

ORDER_ID = {"type": "string", "description": "The order id, such as '#W0000000'."}
ORDERS = [
    tool("get_order_details", {"order_id": ORDER_ID}, ["order_id"], description="Get the status of an order."),
    tool(
        "cancel_pending_order",
        {"order_id": ORDER_ID, "reason": STRING},
        ["order_id", "reason"],
        description="Cancel a pending order. If the user confirms, the order status will be changed to 'cancelled'.",
    ),
    tool(
        "return_delivered_order_items",
        {"order_id": ORDER_ID, "item_ids": {"type": "array", "items": STRING}, "payment_method_id": STRING},
        ["order_id", "item_ids", "payment_method_id"],
        description="Return some items of a delivered order. The order status will be changed to 'return requested'.",
    ),
    tool(
        "modify_pending_order_address",
        {"order_id": ORDER_ID, "city": STRING, "payment_method_id": STRING},
        ["order_id", "city"],
    ),
]
RESERVATIONS = [
    tool("get_reservation_details", {"reservation_id": STRING}, ["reservation_id"]),
    tool(
        "update_reservation_flights",
        {"reservation_id": STRING, "cabin": STRING, "payment_id": STRING},
        ["reservation_id", "cabin", "payment_id"],
    ),
    tool("cancel_reservation", {"reservation_id": STRING}, ["reservation_id"]),
]


def answer(sim: Simulator, name: str, args: dict, tools: list, session: str = "ep") -> tuple[dict, str | None]:
    obs = sim.simulate(ToolCall(name, args), tools, session)
    return json.loads(obs.text), obs.error.kind if obs.error else None


@pytest.mark.parametrize(
    ("name", "description", "verb", "before", "after"),
    [
        ("exchange_delivered_order_items", "", "update", "delivered", ""),
        (
            "return_delivered_order_items",
            "The order status will be changed to 'return requested'.",
            "update",
            "delivered",
            "return requested",
        ),  # noqa: E501
        ("cancel_pending_order", "", "cancel", "pending", ""),
        ("suspend_line", "Logic: Sets line status to Suspended, records the date.", "update", "", "Suspended"),
        ("exchange_currency", "", "compute", "", ""),
        ("stock_share_price", "", "get", "", ""),  # "share" names a stock here, it sends nothing
        ("get_order_status", "", "get", "", ""),
    ],
)
def test_intent_reads_write_verbs_and_status_words(name, description, verb, before, after):
    intent = read_intent(name, description)
    assert (intent.verb, intent.status_before, intent.status_after) == (verb, before, after)


def test_described_status_needs_quotes_or_a_capitalised_word():
    assert described_status("Check the status to see progress.") == ""
    assert described_status("Sets bill status to AWAITING_PAYMENT and notifies.") == "AWAITING_PAYMENT"


def test_a_write_named_by_its_record_updates_that_record():
    sim = Simulator(SimulatorConfig(seed=5))
    read, _ = answer(sim, "get_reservation_details", {"reservation_id": "XEHM4B"}, RESERVATIONS)
    updated, _ = answer(
        sim,
        "update_reservation_flights",
        {"reservation_id": "XEHM4B", "cabin": "economy", "payment_id": "credit_card_1"},
        RESERVATIONS,
    )
    # The answer is the reservation (its id first, its fields kept), not a made-up flight.
    assert next(iter(updated)) == "reservation_id" and updated["reservation_id"] == "XEHM4B"
    assert "flight_id" not in updated and updated["created_at"] == read["created_at"]
    again, _ = answer(sim, "get_reservation_details", {"reservation_id": "XEHM4B"}, RESERVATIONS)
    assert again["cabin"] == "economy"
    assert all(again[k] == v for k, v in updated.items() if not isinstance(v, (dict, list)))


RETURN = {"order_id": "#W1", "item_ids": ["1"], "payment_method_id": "p"}


def test_statuses_from_descriptions_stick_and_conflict():
    sim = Simulator(SimulatorConfig(seed=6))
    answer(sim, "get_order_details", {"order_id": "#W1"}, ORDERS)
    returned, _ = answer(sim, "return_delivered_order_items", RETURN, ORDERS)
    assert returned["order_id"] == "#W1" and returned["status"] == "return requested"
    assert answer(sim, "get_order_details", {"order_id": "#W1"}, ORDERS)[0]["status"] == "return requested"
    # Returning again needs a delivered order: this session made it "return requested".
    body, kind = answer(sim, "return_delivered_order_items", RETURN, ORDERS)
    assert kind == "conflict" and body["error"]["status"] == 409
    assert (
        body["error"]["message"] == "Order #W1 is return requested, not delivered: it cannot be changed by this call."
    )


def test_a_status_word_in_the_name_is_kept_by_the_write_but_not_enforced():
    sim = Simulator(SimulatorConfig(seed=6))
    moved, _ = answer(sim, "modify_pending_order_address", {"order_id": "#W1", "city": "Lyon"}, ORDERS)
    assert moved["status"] == "pending" and moved["city"] == "Lyon"
    assert answer(sim, "get_order_details", {"order_id": "#W1"}, ORDERS)[0]["status"] == "pending"
    # "pending" was assumed from the name, not set: a later call that needs another status may go on.
    returned, kind = answer(sim, "return_delivered_order_items", RETURN, ORDERS)
    assert kind is None and returned["status"] == "return requested"
    _, kind = answer(sim, "cancel_pending_order", {"order_id": "#W1", "reason": "x"}, ORDERS)
    assert kind == "conflict"  # "return requested" was set by the return


def test_a_status_the_session_only_made_up_never_conflicts():
    sim = Simulator(SimulatorConfig(seed=7))
    for seed_session in ("a", "b", "c", "d"):  # whatever status the read fabricated
        answer(sim, "get_order_details", {"order_id": "#W2"}, ORDERS, seed_session)
        _, kind = answer(sim, "cancel_pending_order", {"order_id": "#W2", "reason": "x"}, ORDERS, seed_session)
        assert kind is None
        _, kind = answer(sim, "cancel_pending_order", {"order_id": "#W2", "reason": "x"}, ORDERS, seed_session)
        assert kind == "conflict"  # but cancelling it twice does


def test_a_cancel_without_a_status_word_may_repeat():
    sim = Simulator(SimulatorConfig(seed=8))
    for _ in range(2):
        body, kind = answer(sim, "cancel_reservation", {"reservation_id": "Q69X3R"}, RESERVATIONS)
        assert kind is None and body["status"] == "cancelled"


def test_new_ids_take_the_shape_of_described_and_earlier_ids():
    assert described_examples({"properties": {"order_id": ORDER_ID, "city": {"description": "such as 'Paris'"}}}) == {
        "order_id": "#W0000000"
    }
    calls = [{"arguments": {"user_id": "sara_doe_496", "amount": 3}}, {"arguments": {"user_id": "noah_li_7"}}]
    assert argument_examples(calls) == {"user_id": "noah_li_7"}
    made = shaped_like("credit_card_7815826", DetRng(1))
    assert made.startswith("credit_card_") and len(made) == 19 and made[12:].isdigit()
    assert shaped_like("ZFA04Y", DetRng(1)) == shaped_like("ZFA04Y", DetRng(1))
    mixed = shaped_like("ZFA04Y", DetRng(2))
    assert [c.isdigit() for c in mixed] == [False, False, False, True, True, False] and mixed.isupper()
    sim = Simulator(SimulatorConfig(seed=9))
    tools = [
        tool("get_user_details", {"user_id": STRING}, ["user_id"]),
        tool("create_reservation", {"user_id": STRING, "reservation_id": {"description": "such as 'ZFA04Y'"}}),
    ]
    answer(sim, "get_user_details", {"user_id": "sara_doe_496"}, tools)
    created, _ = answer(sim, "create_reservation", {"user_id": "sara_doe_496"}, tools)
    assert created["reservation_id"] != "ZFA04Y" and len(created["reservation_id"]) == 6


def test_returns_schema_keeps_scalar_echoes_and_picks_the_fitting_alternative():
    returns = {
        "type": "object",
        "properties": {
            "reservation_id": STRING,
            "cabin": STRING,
            "status": {"anyOf": [{"const": "cancelled", "type": "string"}, {"type": "null"}]},
            "flights": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"number": STRING, "price": {"type": "integer"}},
                    "required": ["number", "price"],
                },  # noqa: E501
            },
        },
        "required": ["reservation_id", "cabin", "status", "flights"],
    }
    tools = [
        tool("cancel_reservation", {"reservation_id": STRING}, ["reservation_id"], returns=returns),
        tool(
            "update_reservation",
            {"reservation_id": STRING, "cabin": STRING, "flights": {"type": "array"}},
            returns=returns,
        ),
    ]
    sim = Simulator(SimulatorConfig(seed=10))
    for session in ("s1", "s2", "s3"):
        cancelled, _ = answer(sim, "cancel_reservation", {"reservation_id": "R1"}, tools, session)
        assert cancelled["status"] == "cancelled"
        # The flights argument lacks the required price: it cannot be echoed, the scalars still are.
        updated, _ = answer(
            sim,
            "update_reservation",
            {"reservation_id": "R2", "cabin": "economy", "flights": [{"number": "H1"}]},
            tools,
            session,
        )
        assert (updated["reservation_id"], updated["cabin"]) == ("R2", "economy")
        assert all("price" in f for f in updated["flights"])
    assert sim.backend.invalid_answers == 0
