"""Real English words that invented tools are named from: verbs, nouns and attributes.

The reader's corpus names its invented and disguised tools with these (``fetch_parcel_status``),
not with invented syllables: a model trained on syllable names learnt what such names look like
and wrote one of its own (``search_Galsh``) instead of copying the offered name. Names made of
real words look like the names the evaluations offer, and there are too many of them to guess,
so the one offered has to be read and copied.

Left out on purpose: the words of the unseen-domains task file (a veterinary clinic, a library, a
lab's equipment), so that file stays a domain the corpus has never shown, and no generated name
may contain a held-out tool's name (:func:`allowed_name`).
"""

from __future__ import annotations

import random
import re

VERBS = (
    "get", "find", "check", "create", "update", "list", "cancel", "book", "send", "search", "set", "add",
    "fetch", "remove", "delete", "schedule", "submit", "open", "close", "start", "stop", "assign", "approve",
    "reject", "archive", "rename", "move", "register", "view", "lookup", "calculate", "estimate", "request",
    "confirm", "share", "reserve", "order", "rate", "count", "export",
)  # fmt: skip

# Things a tool acts on, from many domains (shipping, work, home, sport, money, travel, media, ...).
NOUNS = (
    "parcel", "shipment", "invoice", "receipt", "ticket", "project", "task", "meeting", "contract",
    "employee", "candidate", "interview", "shift", "payslip", "expense", "budget", "subscription",
    "playlist", "song", "album", "podcast", "episode", "movie", "channel", "post", "comment", "photo",
    "garden", "plant", "seed", "harvest", "field", "tractor", "greenhouse", "vehicle", "tire", "garage",
    "parking", "route", "trip", "ride", "driver", "bike", "scooter", "train", "bus", "ferry", "cabin",
    "apartment", "lease", "tenant", "property", "listing", "mortgage", "policy", "claim", "quote",
    "course", "lesson", "exam", "grade", "student", "teacher", "classroom", "homework", "workshop",
    "match", "team", "player", "league", "tournament", "score", "workout", "gym", "coach", "race",
    "server", "deployment", "repository", "branch", "build", "alert", "incident", "backup", "cluster",
    "domain", "certificate", "password", "device", "printer", "router", "sensor", "meter", "battery",
    "warehouse", "pallet", "supplier", "inventory", "product", "discount", "coupon", "gift", "donation",
    "campaign", "newsletter", "survey", "feedback", "review", "rating", "badge", "member", "guest",
    "venue", "concert", "festival", "exhibit", "museum", "gallery", "tour", "guide", "map", "trail",
    "campsite", "boat", "marina", "dock", "harbor", "flight", "hotel", "room", "table", "menu", "dish",
    "order", "delivery", "courier", "locker", "mailbox", "letter", "document", "folder", "file", "report",
    "spreadsheet", "chart", "dashboard", "metric", "goal", "habit", "journal", "note", "recipe",
    "grocery", "pantry", "oven", "fridge", "window", "heater", "fan", "camera", "doorbell", "alarm",
    "account", "wallet", "donor", "payment", "transfer", "refund", "charge", "bill", "tax", "pension",
    "vote", "petition", "permit", "license", "passport", "visa", "agenda", "calendar",
    "checklist", "timer", "clock", "forecast", "tide", "storm", "river", "lake", "forest", "volcano",
    "planet", "satellite", "rocket", "telescope", "robot", "drone", "game", "puzzle", "quiz", "lottery",
    "auction", "bid", "artwork", "sculpture", "poem", "story", "chapter", "script", "recording",
    "translation", "glossary", "dictionary", "keyword", "tag", "label", "sticker", "poster", "banner",
)  # fmt: skip

# What a parameter may be about (its label in a request and, often, its name).
ATTRIBUTES = (
    "color", "size", "quantity", "amount", "price", "currency", "date", "time", "deadline", "duration",
    "status", "priority", "category", "kind", "title", "name", "code", "number", "count", "limit",
    "language", "region", "country", "city", "address", "zip", "phone", "email", "owner", "author",
    "recipient", "sender", "message", "reason", "comment", "description", "level", "mode", "format",
    "version", "width", "height", "length", "depth", "temperature", "speed", "distance", "volume",
    "budget", "rating", "score", "rank", "tier", "plan", "channel", "topic", "theme", "style", "material",
    "brand", "model", "serial", "batch", "shelf", "aisle", "floor", "gate", "seat", "platform", "lane",
    "zone", "sector", "route", "origin", "destination", "start", "end", "frequency", "interval",
    "threshold", "margin", "discount", "fee", "deposit", "balance", "weight", "capacity", "guests",
    "nights", "adults", "children", "notes", "tags", "keywords", "query", "filter", "sort", "page",
    "radius", "latitude", "longitude", "unit", "label", "nickname", "contact", "manager", "team",
)  # fmt: skip

FORBIDDEN_WORDS = frozenset(
    # The unseen-domains task file's words: a veterinary clinic, a library, a lab's equipment.
    {"vet", "pet", "instrument", "reagent", "library", "loan", "prescription", "equipment", "catalog", "species"}
)


def allowed_name(name: str, forbidden_names: tuple[str, ...] = ()) -> bool:
    """True when ``name`` contains none of ``forbidden_names`` (held-out tools) as a substring."""
    return not any(forbidden in name for forbidden in forbidden_names)


def noun_phrase(rng: random.Random) -> str:
    """A thing a tool acts on: a noun, sometimes with an attribute before it (``"parcel"``, ``"budget report"``)."""
    noun = rng.choice(NOUNS)
    return f"{rng.choice(ATTRIBUTES)} {noun}" if rng.random() < 0.25 else noun


def snake(words: str) -> str:
    return "_".join(words.split())


def real_tool_name(rng: random.Random, verb: str | None = None, noun: str | None = None) -> str:
    """``verb_noun`` or ``verb_noun_attribute`` from real words (a fresh noun unless one is given)."""
    name = f"{verb or rng.choice(VERBS)}_{snake(noun or noun_phrase(rng))}"
    return f"{name}_{rng.choice(ATTRIBUTES)}" if rng.random() < 0.3 else name


def real_param_name(rng: random.Random, noun: str | None = None) -> str:
    """A parameter name of real words: ``color``, ``parcel_color``, ``color_code``."""
    word = rng.choice(ATTRIBUTES)
    roll = rng.random()
    if roll < 0.5:
        return word
    if roll < 0.75 and noun:
        return f"{snake(noun)}_{word}"
    return f"{word}_{rng.choice(('id', 'name', 'code', 'value', 'text', 'type', 'count', 'date'))}"


# Words a readable name is never made of: grammar, and description boilerplate.
_NOT_NAME_WORDS = frozenset(
    """the and for with from into that this these its your you our their own one given what which when how
    many much by of in on at to or as is are be can will not has have was default optionally best first
    order only more most than other another all any each per via e g yyyy mm dd hh been out off turn coming
    between two latest recent available cheapest earliest rated match delivered listed main whole""".split()
)


def words_of(text: str) -> list[str]:
    """The content words of a description, in order, lower case (an example after ``e.g.`` left out)."""
    text = re.split(r"\be\.g\.|\(", text, maxsplit=1)[0]
    text = re.sub(r"\w+_\w+", " ", text)  # another name ("from search_hotels") is not this one's words
    words = [w for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= 3 and w not in _NOT_NAME_WORDS]
    return list(dict.fromkeys(words))  # once each, in order ("a hotel by its hotel_id": hotel once)


def readable_name(rng: random.Random, description: str, prefix: str | None = None) -> str | None:
    """A name said by the description's own words (``"Get the latest share price of a stock"`` →
    ``get_share_price``, ``get_stock``): fresh each time, and readable off the schema, as the names
    the evaluations offer are. ``None`` when the description has no content word."""
    words = [w for w in words_of(description) if w != prefix]
    if not words:
        return None
    length = min(len(words), rng.choice((1, 2, 2)))
    start = rng.randrange(len(words) - length + 1)
    return "_".join(([prefix] if prefix else []) + words[start : start + length])
