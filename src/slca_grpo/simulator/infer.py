"""Fabricate a response for a tool with no ``returns`` schema, from its intent and arguments.

The shape follows the verb (a search returns a list of records, a create returns the new record
with a fresh id, a cancel returns the record with a cancelled status, a delete a confirmation),
the fields follow the entity's template (a hotel has a name, address, rating, nightly price …),
argument values are echoed where fields match, and ``max_price``-style arguments bound the values.
"""

from __future__ import annotations

import re
from typing import Any

from slca_grpo.simulator import intent as I
from slca_grpo.simulator.field_values import (
    MISSING,
    ValueContext,
    classify,
    field_value,
    generic_value,
)
from slca_grpo.simulator.words import plural, snake

TEMPLATES: dict[str, tuple[str, ...]] = {
    "weather": (
        "location",
        "temperature",
        "feels_like",
        "condition",
        "humidity",
        "wind_speed_kmh",
        "unit",
        "observed_at",
    ),
    "stock": ("symbol", "company_name", "price", "change", "change_percent", "currency", "volume", "as_of"),
    "flight": (
        "flight_number",
        "airline",
        "origin",
        "destination",
        "departure_time",
        "arrival_time",
        "duration_minutes",
        "price",
        "currency",
        "seats_available",
        "status",
    ),
    "hotel": (
        "name",
        "address",
        "city",
        "rating",
        "price_per_night",
        "currency",
        "available_rooms",
        "amenities",
    ),
    "restaurant": ("name", "cuisine", "address", "rating", "phone", "open_now"),
    "order": (
        "items",
        "total",
        "currency",
        "status",
        "created_at",
        "shipping_address",
        "estimated_delivery_date",
    ),
    "booking": ("status", "date", "guests", "total_price", "currency", "created_at"),
    "user": ("name", "email", "phone", "city", "created_at", "status"),
    "product": ("name", "price", "currency", "category", "in_stock", "rating"),
    "movie": ("title", "year", "genre", "rating", "director", "duration_minutes"),
    "book": ("title", "author", "isbn", "published_year", "genre", "rating"),
    "news": ("title", "source", "author", "published_at", "url", "summary"),
    "event": ("name", "date", "venue", "city", "price", "currency", "tickets_available"),
    "payment": ("amount", "currency", "status", "method", "created_at"),
    "message": ("recipient", "subject", "status", "sent_at"),
    "location": ("name", "address", "city", "country", "latitude", "longitude"),
    "currency": ("base_currency", "target_currency", "rate", "as_of"),
    "translation": ("translated_text", "source_language", "target_language"),
    "track": ("title", "artist", "album", "duration_seconds", "genre", "release_year"),
    "ticket": ("title", "status", "priority", "assignee", "created_at", "due_date"),
    "file": ("name", "size_bytes", "mime_type", "created_at", "url"),
    "appointment": ("title", "date", "start_time", "end_time", "location", "attendees", "status"),
    "car": ("make", "model", "year", "price_per_day", "currency", "available"),
    "route": ("origin", "destination", "distance_km", "duration_minutes", "mode"),
    "time": ("timezone", "local_time", "date"),
    "job": ("title", "company", "location", "salary", "posted_at"),
    "recipe": ("title", "cuisine", "prep_time_minutes", "servings", "ingredients", "calories"),
    "review": ("rating", "title", "comment", "author", "created_at"),
    "subscription": ("status", "price", "currency", "renewal_date"),
    "generic": ("name", "description", "status", "created_at"),
}
# Arguments that steer a query rather than describe a record: not echoed into records.
_CONTROL = re.compile(
    r"^(limit|offset|page|page_size|per_page|sort|sort_by|order_by|sort_order|max_results|top_k|top_n"
    r"|num_results|fields|format|verbose|api_key|token|cursor|include_.*|query|q|keywords?|search"
    r"|term|search_term|text|max_.*|min_.*|.*_max|.*_min)$"
)
_QUERY_ARGS = ("query", "q", "keyword", "keywords", "search", "term", "search_term")
_LIMIT_ARGS = ("limit", "max_results", "top_k", "top_n", "num_results", "count", "per_page", "page_size")
_ALIASES = {
    "recipient": ("to", "email", "recipient_email", "phone", "phone_number", "recipients"),
    "location": ("city", "address", "place", "query", "q"),
}
META_KEYS = frozenset({"message", "success", "deleted", "ok", "error", "total_results", "count"})


def infer_response(
    intent: I.Intent,
    args: dict[str, Any],
    ctx: ValueContext,
    primary: tuple[str, Any] | None,
    stored: dict[str, Any] | None,
) -> Any:
    """The JSON value a plausible API would return for this call."""
    verb = intent.verb
    entity_label = intent.entity.replace("_", " ").capitalize()
    if verb == I.SEARCH:
        count = _result_count(args, ctx)
        records = [_record(intent, args, ctx, None, None, in_list=True) for _ in range(count)]
        response: dict[str, Any] = {}
        query = next((args[k] for k in _QUERY_ARGS if k in args), None)
        if query is not None:
            response["query"] = query
        response[plural(snake(intent.entity)) or "results"] = records
        response["total_results"] = count
        return response
    if verb == I.DELETE:
        key, value = primary or (f"{intent.entity}_id", ctx.new_id(f"{intent.entity}_id", intent.entity))
        return {key: value, "deleted": True, "message": f"{entity_label} {value} has been deleted."}
    if verb == I.COMPUTE and intent.template == "generic":
        result = {k: v for k, v in args.items() if not _CONTROL.match(snake(k))}
        name = snake(intent.entity) if intent.entity not in args else "result"
        value = field_value(name, ctx, "number")
        result[name or "result"] = round(ctx.rng.uniform(1, 100), 2) if value is MISSING else value
        return result
    record = _record(intent, args, ctx, primary, stored, in_list=False)
    if verb == I.CANCEL:
        record[_status_key(record)] = "cancelled"
        record["cancelled_at"] = field_value("cancelled_at", ctx)
        record["message"] = f"{entity_label} {_id_of(record, primary)} has been cancelled."
    elif verb == I.UPDATE:
        record["updated_at"] = field_value("updated_at", ctx)
    elif verb == I.CREATE:
        record[_status_key(record)] = field_value("status", ctx)
        record.setdefault("created_at", field_value("created_at", ctx))
    elif verb == I.COMPUTE and intent.template == "currency":
        _convert(record, args)
    return record


def _record(
    intent: I.Intent,
    args: dict[str, Any],
    ctx: ValueContext,
    primary: tuple[str, Any] | None,
    stored: dict[str, Any] | None,
    *,
    in_list: bool,
) -> dict[str, Any]:
    ctx.new_record()
    record: dict[str, Any] = {}
    if primary is not None and not in_list and intent.verb != I.CREATE:
        record[primary[0]] = primary[1]
    elif intent.has_id:
        stem = snake(intent.entity)
        record[f"{stem}_id"] = ctx.new_id(f"{stem}_id", stem)
    if stored and not in_list:
        for key, value in stored.items():
            record.setdefault(key, value)
    for key, value in args.items():
        if _CONTROL.match(snake(key)) or (in_list and I.is_id_key(key)):
            continue
        if intent.verb == I.UPDATE:
            target = key.removeprefix("new_")
            record[target] = value
        else:
            record.setdefault(key, value)
    for name in TEMPLATES.get(intent.template, TEMPLATES["generic"]):
        if name not in record and not _has_equivalent(record, name):
            value = field_value(name, ctx)
            record[name] = generic_value(name, ctx, "string") if value is MISSING else value
    _apply_bounds(record, args, ctx)
    _total_items(record, args)
    return record


def _total_items(record: dict[str, Any], args: dict[str, Any]) -> None:
    """An order's total is the sum of its line items."""
    items = record.get("items")
    if "total" in args or not isinstance(items, list) or not isinstance(record.get("total"), (int, float)):
        return
    try:
        record["total"] = round(sum(i["quantity"] * i["unit_price"] for i in items), 2)
    except (KeyError, TypeError):
        return


def _has_equivalent(record: dict[str, Any], name: str) -> bool:
    """Skip a template field when an echoed argument already says the same (``city`` vs ``location``)."""
    if name in _ALIASES:
        return any(key in record for key in _ALIASES[name])
    category = classify(name)
    if category not in ("city", "date", "currency"):
        return False
    return any(classify(key) == category for key in record if key != name)


def _apply_bounds(record: dict[str, Any], args: dict[str, Any], ctx: ValueContext) -> None:
    """Respect ``max_price=200`` / ``min_rating=4`` style arguments in the fabricated fields."""
    for key, limit in args.items():
        if isinstance(limit, bool) or not isinstance(limit, (int, float)):
            continue
        m = re.match(r"^(max|min)_(.+)$|^(.+)_(max|min)$", snake(key))
        if not m:
            continue
        kind = m[1] or m[4]
        base = m[2] or m[3]
        for name, value in record.items():
            if name in args or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if not (name == base or (classify(name) is not None and classify(name) == classify(base))):
                continue
            if kind == "max" and value > limit:
                new = ctx.rng.uniform(limit * 0.6, limit)
            elif kind == "min" and value < limit:
                ceiling = 5.0 if classify(name) == "rating" and limit <= 5 else limit * 1.5 + 1
                new = ctx.rng.uniform(limit, ceiling)
            else:
                continue
            record[name] = int(new) if isinstance(value, int) else round(new, 2 if classify(name) != "rating" else 1)


def _result_count(args: dict[str, Any], ctx: ValueContext) -> int:
    for key in _LIMIT_ARGS:
        value = args.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return max(0, min(value, 5))
    return ctx.rng.randint(2, 4)


def _status_key(record: dict[str, Any]) -> str:
    return next((k for k in record if k == "status" or k.endswith("_status")), "status")


def _id_of(record: dict[str, Any], primary: tuple[str, Any] | None) -> Any:
    if primary is not None:
        return primary[1]
    return next((v for k, v in record.items() if I.is_id_key(k)), "")


def _convert(record: dict[str, Any], args: dict[str, Any]) -> None:
    amount = next(
        (
            v
            for k, v in args.items()
            if classify(k) == "money" and isinstance(v, (int, float)) and not isinstance(v, bool)
        ),
        None,
    )
    rate = record.get("rate")
    if amount is not None and isinstance(rate, (int, float)):
        record["amount"] = amount
        record["converted_amount"] = round(amount * rate, 2)
