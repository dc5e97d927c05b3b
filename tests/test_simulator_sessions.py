"""Session state: later calls see what earlier calls created, changed or deleted; expiry; reset."""

from __future__ import annotations

import json

from simulator_helpers import BOOKING_TOOLS, ORDER_TOOLS, SEARCH_TOOL, STRING, tool

from slca_grpo.datatypes import ToolCall
from slca_grpo.simulator import Simulator, SimulatorConfig


def call(sim: Simulator, name: str, args: dict, tools: list, session: str | None = "ep-1") -> dict:
    obs = sim.simulate(ToolCall(name, args), tools, session)
    return json.loads(obs.text)


def test_an_order_created_is_found_by_get_with_the_same_fields():
    sim = Simulator(SimulatorConfig(seed=4))
    created = call(sim, "create_order", {"customer_id": "CUS-9", "product_id": "PRD-1", "quantity": 2}, ORDER_TOOLS)
    order_id = created["order_id"]
    fetched = call(sim, "get_order", {"order_id": order_id}, ORDER_TOOLS)
    assert fetched == created
    assert fetched["customer_id"] == "CUS-9" and fetched["quantity"] == 2


def test_a_cancelled_booking_stays_cancelled_with_a_returns_schema():
    sim = Simulator(SimulatorConfig(seed=0))
    booked = call(sim, "book_hotel", {"hotel": "Harbor Inn", "check_in": "2025-10-01", "nights": 2}, BOOKING_TOOLS)
    booking_id = booked["booking_id"]
    assert booked["status"] == "CONFIRMED"
    cancelled = call(sim, "cancel_booking", {"booking_id": booking_id}, BOOKING_TOOLS)
    assert cancelled["booking_id"] == booking_id and cancelled["status"] == "CANCELED"
    for _ in range(2):
        again = call(sim, "get_booking", {"booking_id": booking_id}, BOOKING_TOOLS)
        assert again["status"] == "CANCELED"
        assert (again["hotel"], again["check_in"], again["nights"]) == ("Harbor Inn", "2025-10-01", 2)


def test_cancel_without_returns_schema_and_an_id_never_seen_before():
    sim = Simulator(SimulatorConfig(seed=1))
    cancelled = call(sim, "cancel_order", {"order_id": "ORD-777"}, ORDER_TOOLS)
    assert cancelled["order_id"] == "ORD-777" and cancelled["status"] == "cancelled"
    fetched = call(sim, "get_order", {"order_id": "ORD-777"}, ORDER_TOOLS)
    assert fetched["status"] == "cancelled"
    assert "message" not in fetched  # response chatter is not part of the record


def test_update_writes_new_values_and_delete_makes_lookups_fail():
    sim = Simulator(SimulatorConfig(seed=2))
    order_id = call(sim, "create_order", {"customer_id": "C", "product_id": "P"}, ORDER_TOOLS)["order_id"]
    call(sim, "update_order", {"order_id": order_id, "shipping_address": "1 New Road"}, ORDER_TOOLS)
    assert call(sim, "get_order", {"order_id": order_id}, ORDER_TOOLS)["shipping_address"] == "1 New Road"
    deleted = call(sim, "delete_order", {"order_id": order_id}, ORDER_TOOLS)
    assert deleted == {
        "order_id": order_id,
        "deleted": True,
        "message": f"Order {order_id} has been deleted.",
    }
    obs = sim.simulate(ToolCall("get_order", {"order_id": order_id}), ORDER_TOOLS, "ep-1")
    assert obs.error.kind == "not_found"
    assert json.loads(obs.text)["error"]["status"] == 404


def test_records_from_search_results_are_remembered():
    tools = [SEARCH_TOOL, tool("get_hotel", {"hotel_id": STRING}, ["hotel_id"])]
    sim = Simulator(SimulatorConfig(seed=3))
    hotels = call(sim, "search_hotels", {"city": "Rome"}, tools)["hotels"]
    detail = call(sim, "get_hotel", {"hotel_id": hotels[1]["hotel_id"]}, tools)
    assert detail["name"] == hotels[1]["name"] and detail["price_per_night"] == hotels[1]["price_per_night"]


def test_sessions_are_independent_and_reset_forgets():
    sim = Simulator(SimulatorConfig(seed=4))
    order_id = call(sim, "create_order", {"customer_id": "C", "product_id": "P"}, ORDER_TOOLS, "a")["order_id"]
    call(sim, "cancel_order", {"order_id": order_id}, ORDER_TOOLS, "a")
    assert call(sim, "get_order", {"order_id": order_id}, ORDER_TOOLS, "b").get("status") != "cancelled"
    assert sim.reset_session("a") is True
    assert sim.reset_session("a") is False
    assert call(sim, "get_order", {"order_id": order_id}, ORDER_TOOLS, "a").get("status") != "cancelled"


def test_the_same_episode_replays_identically_in_a_new_simulator():
    def episode(sim: Simulator) -> list[str]:
        texts = []
        order = call(sim, "create_order", {"customer_id": "C", "product_id": "P"}, ORDER_TOOLS, "e")
        texts.append(json.dumps(order))
        for name in ("get_order", "cancel_order", "get_order"):
            texts.append(sim.simulate(ToolCall(name, {"order_id": order["order_id"]}), ORDER_TOOLS, "e").text)
        return texts

    assert episode(Simulator(SimulatorConfig(seed=9))) == episode(Simulator(SimulatorConfig(seed=9)))


def test_sessions_expire_after_the_ttl_and_the_count_is_bounded():
    now = [0.0]
    sim = Simulator(SimulatorConfig(session_ttl_s=10, max_sessions=3), clock=lambda: now[0])
    order_id = call(sim, "create_order", {"customer_id": "C", "product_id": "P"}, ORDER_TOOLS, "old")["order_id"]
    call(sim, "cancel_order", {"order_id": order_id}, ORDER_TOOLS, "old")
    now[0] = 5.0
    assert call(sim, "get_order", {"order_id": order_id}, ORDER_TOOLS, "old")["status"] == "cancelled"
    now[0] = 16.0  # 11 s after the last use
    assert call(sim, "get_order", {"order_id": order_id}, ORDER_TOOLS, "old").get("status") != "cancelled"
    assert sim.sessions.expired == 1
    for name in ("s1", "s2", "s3", "s4"):
        call(sim, "get_order", {"order_id": "X"}, ORDER_TOOLS, name)
    assert len(sim.sessions) == 3
    assert "old" not in sim.sessions and "s1" not in sim.sessions and "s4" in sim.sessions
    assert sim.sessions.evicted == 2


def test_calls_without_a_session_keep_no_state():
    sim = Simulator(SimulatorConfig(seed=4))
    order_id = call(sim, "create_order", {"customer_id": "C", "product_id": "P"}, ORDER_TOOLS, None)["order_id"]
    call(sim, "cancel_order", {"order_id": order_id}, ORDER_TOOLS, None)
    assert call(sim, "get_order", {"order_id": order_id}, ORDER_TOOLS, None).get("status") != "cancelled"
    assert len(sim.sessions) == 0
