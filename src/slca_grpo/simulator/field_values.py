"""Plausible values from field names: ``price`` → 129.99, ``check_in`` → a date, ``email`` → an address.

``field_value(name, ctx, want)`` classifies the field name with ordered regular-expression rules,
draws a value from the matching generator and converts it to the JSON type the caller wants (or
returns ``MISSING`` when no rule fits or the type cannot be met). Values that belong together in
one record (a person's name and email, a city and its country) come from memos on the context.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from slca_grpo.simulator import answer_pools as pools
from slca_grpo.simulator.fieldnames import classify
from slca_grpo.simulator.idshapes import shaped_like
from slca_grpo.simulator.intent import PERSON_ENTITIES, Intent
from slca_grpo.simulator.words import DetRng, singular, snake, split_words

MISSING: Any = object()
BASE_DATE = date(2025, 6, 2)  # fixed, never today(): answers must not depend on the clock
_ISO_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")


@dataclass
class ValueContext:
    """What the generators may draw on: a seeded rng, the call's arguments, its intent."""

    rng: DetRng
    args: dict[str, Any]
    intent: Intent
    today: date = BASE_DATE  # the simulated world's "now": fixed per seed, so a session's dates agree
    memo: dict[str, Any] = field(default_factory=dict)
    id_examples: dict[str, str] = field(default_factory=dict)  # field → an id of the shape to make (idshapes.py)

    def __post_init__(self) -> None:
        given = _anchor_date(self.args)
        self.anchored = given is not None  # an argument named the day: dates stay on it
        self.anchor = given or self.today
        units = " ".join(str(v).lower() for v in self.args.values() if isinstance(v, str))
        self.fahrenheit = bool(re.search(r"\b(fahrenheit|imperial|°f|f)\b", units))

    def new_id(self, name: str, stem: str) -> str:
        """A fresh id for field ``name``: in the shape of a known example of that field, else ``ORD-482913``."""
        example = self.id_examples.get(name)
        return shaped_like(example, self.rng) if example else fabricated_id(stem, self.rng)

    def new_record(self) -> None:
        """Forget per-record memos so the next record gets its own person, place and times."""
        self.memo.clear()

    def _memo(self, key: str, make: Callable[[], Any]) -> Any:
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]

    def person(self) -> tuple[str, str]:
        return self._memo("person", lambda: (self.rng.choice(pools.FIRST_NAMES), self.rng.choice(pools.LAST_NAMES)))

    def place(self) -> tuple[Any, ...]:
        return self._memo("place", self._pick_place)

    def _pick_place(self) -> tuple[Any, ...]:
        for key, value in self.args.items():
            if isinstance(value, str) and classify(key) in ("city", "address", "country"):
                for row in pools.CITIES:
                    if row[0].lower() in value.lower():
                        self.memo["place_from_args"] = True
                        return row
                if classify(key) == "city":
                    return (value, *self.rng.choice(pools.CITIES)[1:])
        return self.rng.choice(pools.CITIES)

    def currency(self) -> str:
        place = self.place()
        if self.memo.get("place_from_args"):
            return str(place[6])
        return self._memo("currency", lambda: self.rng.choice(("USD", "USD", "USD", "EUR", "GBP")))

    def base_time(self) -> datetime:
        def make() -> datetime:
            day = self.anchor + timedelta(days=0 if self.anchored else self.rng.randint(1, 30))
            return datetime(day.year, day.month, day.day, self.rng.randint(6, 20), 5 * self.rng.randint(0, 11))

        return self._memo("time", make)


def _anchor_date(args: dict[str, Any]) -> date | None:
    for value in args.values():
        if isinstance(value, str) and (m := _ISO_DATE.match(value)):
            try:
                return date(int(m[1]), int(m[2]), int(m[3]))
            except ValueError:
                continue
    return None


def fabricated_id(stem: str, rng: DetRng) -> str:
    """An id for a record of kind ``stem``: a prefix named after it and six digits (``ORD-482913``)."""
    prefix = _ID_PREFIXES.get(stem) or (stem[:3].upper() if stem else "ID")
    return f"{prefix}-{rng.randint(100000, 999999)}"


_ID_PREFIXES = {
    "booking": "BK",
    "reservation": "RES",
    "order": "ORD",
    "user": "USR",
    "customer": "CUS",
    "product": "PRD",
    "hotel": "HTL",
    "flight": "FLT",
    "payment": "PAY",
    "transaction": "TXN",
    "ticket": "TCK",
    "message": "MSG",
    "event": "EVT",
    "file": "FILE",
    "appointment": "APT",
    "invoice": "INV",
    "account": "ACC",
    "item": "ITM",
    "restaurant": "RST",
}


_HEADLINE_ENDINGS = (
    "outlook improves",
    "faces new questions",
    "sees record growth",
    "draws global attention",
)
_EVENT_KINDS = ("Jazz Festival", "Tech Summit", "Marathon", "Food Fair", "Film Week")


def _sentence(ctx: ValueContext) -> str:
    return f"{ctx.rng.choice(pools.SENTENCE_OPENERS)} {ctx.rng.choice(pools.SENTENCE_ENDINGS)}"


def _title(ctx: ValueContext) -> str:
    t = ctx.intent.template
    rng = ctx.rng
    if t == "news":
        return f"{rng.choice(pools.TOPICS).capitalize()} {rng.choice(_HEADLINE_ENDINGS)}"
    if t == "job":
        return rng.choice(pools.JOB_TITLES)
    if t == "ticket":
        area = rng.choice(("sync", "login", "display", "export"))
        return f"Fix {rng.choice(pools.PRODUCT_NOUNS).lower()} {area} issue"
    if t == "appointment":
        return rng.choice(("Quarterly review", "Team sync", "Dental check-up", "Project kickoff"))
    return f"The {rng.choice(pools.TITLE_ADJECTIVES)} {rng.choice(pools.TITLE_NOUNS)}"


def _name(ctx: ValueContext, name: str) -> str:
    rng = ctx.rng
    words = split_words(name)
    owner = singular(words[-2]) if len(words) >= 2 else ctx.intent.template
    owner = {"customer": "user", "item": "product"}.get(owner, owner)
    if owner in PERSON_ENTITIES or (owner == ctx.intent.template and ctx.intent.template == "user"):
        first, last = ctx.person()
        return f"{first} {last}"
    if owner == "hotel":
        return f"{rng.choice(pools.HOTEL_WORDS)} {ctx.place()[0]} {rng.choice(pools.HOTEL_KINDS)}"
    if owner == "restaurant":
        return f"{rng.choice(pools.RESTAURANT_WORDS)} {rng.choice(pools.RESTAURANT_KINDS)}"
    if owner == "product":
        return f"{rng.choice(pools.PRODUCT_ADJECTIVES)} {rng.choice(pools.PRODUCT_NOUNS)}"
    if owner in ("movie", "book", "track", "news", "job", "ticket", "appointment"):
        return _title(ctx)
    if owner in ("company", "organization", "brand"):
        return rng.choice(pools.COMPANIES)
    if owner in ("city", "location"):
        return str(ctx.place()[0])
    if owner == "event":
        return f"{ctx.place()[0]} {rng.choice(_EVENT_KINDS)}"
    if owner == "file":
        return f"{rng.choice(('report', 'invoice', 'notes', 'summary', 'budget'))}_{ctx.anchor.year}.pdf"
    return f"{owner.replace('_', ' ').title()} {rng.choice(pools.TITLE_NOUNS)}"


def _text(ctx: ValueContext, name: str) -> str:
    intent = ctx.intent
    key = snake(name)
    if "translat" in key:
        source = next((v for k, v in ctx.args.items() if isinstance(v, str) and classify(k) == "text"), "")
        target = next((v for k, v in ctx.args.items() if classify(k) in ("language", "language_code")), "es")
        return f"[{target}] {source}" if source else _sentence(ctx)
    if key in ("message", "result_message") and intent.verb in pools.VERB_STATUS:
        return f"{intent.entity.replace('_', ' ').capitalize()} {pools.VERB_STATUS[intent.verb]} successfully."
    if key == "reason":
        return ctx.rng.choice(("Requested by customer", "Schedule change", "Duplicate request"))
    return _sentence(ctx)


def _status(ctx: ValueContext) -> str:
    intent = ctx.intent
    if intent.verb == "create":
        return pools.CREATED_STATUS.get(intent.template, "confirmed")
    if intent.verb in pools.VERB_STATUS:
        return pools.VERB_STATUS[intent.verb]
    if intent.template == "flight":
        return ctx.rng.choice(("scheduled", "on_time", "delayed", "boarding"))
    if intent.template == "order":
        return ctx.rng.choice(("processing", "shipped", "delivered"))
    if intent.template == "booking":
        return "confirmed"
    return ctx.rng.choice(pools.GENERIC_STATUSES)


def _duration(ctx: ValueContext, name: str) -> int:
    key = snake(name)
    span = ctx.memo.get("span")  # minutes between a record's start and end times, when drawn
    if "hour" in key or re.search(r"(^|_)hrs?$", key):
        return max(1, round(span / 60)) if span else ctx.rng.randint(1, 12)
    if "sec" in key:
        return span * 60 if span else ctx.rng.randint(30, 600)
    return span or ctx.rng.randint(15, 480)


def _datetime(ctx: ValueContext, name: str) -> str:
    key = snake(name)
    base = ctx.base_time()
    morning = datetime(ctx.today.year, ctx.today.month, ctx.today.day, 9)
    if re.search(r"creat|publish|post|observ|issu|regist|join", key):
        moment = morning - timedelta(days=ctx.rng.randint(1, 20), minutes=ctx.rng.randint(0, 600))
    elif re.search(r"updat|modif|cancel|delet|sent|last|as_of", key):
        moment = morning - timedelta(minutes=ctx.rng.randint(0, 120))
    elif re.search(r"arriv|end|finish|dropoff|return|check_?out|expir", key):
        moment = base + timedelta(minutes=ctx._memo("span", lambda: 5 * ctx.rng.randint(12, 120)))
    else:
        moment = base
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _date(ctx: ValueContext, name: str) -> str:
    key = snake(name)
    if "birth" in key or key == "dob":
        return date(ctx.rng.randint(1950, 2004), ctx.rng.randint(1, 12), ctx.rng.randint(1, 28)).isoformat()
    offset = ctx.rng.randint(1, 7) if re.search(r"out|end|return|due|deadline|expir|until|to_", key) else 0
    if not ctx.anchored:  # upcoming, not today
        offset += ctx._memo("days_ahead", lambda: ctx.rng.randint(1, 30))
    return (ctx.anchor + timedelta(days=offset)).isoformat()


def _rate(ctx: ValueContext) -> float:
    codes = [v.upper() for v in ctx.args.values() if isinstance(v, str) and v.upper() in pools.USD_RATES]
    if len(codes) >= 2:
        return round(pools.USD_RATES[codes[1]] / pools.USD_RATES[codes[0]] * ctx.rng.uniform(0.99, 1.01), 4)
    return round(ctx.rng.uniform(0.5, 1.5), 4)


def _temperature(ctx: ValueContext) -> float:
    celsius = ctx._memo("celsius", lambda: ctx.rng.uniform(-4.0, 31.0)) + ctx.rng.uniform(-2.0, 2.0)
    return round(celsius * 9 / 5 + 32 if ctx.fahrenheit else celsius, 1)


def _email(ctx: ValueContext) -> str:
    first, last = ctx.person()
    return f"{first.lower()}.{last.lower()}@example.com"


def _uuid(ctx: ValueContext) -> str:
    h = "".join(ctx.rng.choice("0123456789abcdef") for _ in range(32))
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


def _line_items(ctx: ValueContext) -> list[dict[str, Any]]:
    items = []
    for _ in range(ctx.rng.randint(1, 3)):
        items.append(
            {
                "product_id": fabricated_id("product", ctx.rng),
                "name": f"{ctx.rng.choice(pools.PRODUCT_ADJECTIVES)} {ctx.rng.choice(pools.PRODUCT_NOUNS)}",
                "quantity": ctx.rng.randint(1, 3),
                "unit_price": round(ctx.rng.uniform(5, 200), 2),
            }
        )
    return items


def _category(ctx: ValueContext) -> str:
    t = ctx.intent.template
    if t in ("movie", "book"):
        return ctx.rng.choice(pools.GENRES)
    if t == "track":
        return ctx.rng.choice(pools.MUSIC_GENRES)
    if t == "restaurant":
        return ctx.rng.choice(pools.CUISINES)
    if t == "user":
        return ctx.rng.choice(pools.DEPARTMENTS)
    return ctx.rng.choice(pools.PRODUCT_CATEGORIES)


_Gen = Callable[[ValueContext, str], Any]
_GENERATORS: dict[str, _Gen] = {
    "uuid": lambda c, n: _uuid(c),
    "email": lambda c, n: _email(c),
    "phone": lambda c, n: f"+1-555-{c.rng.randint(100, 999)}-{c.rng.randint(1000, 9999)}",
    "image_url": lambda c, n: f"https://images.example.com/{c.intent.entity}/{c.rng.randint(10000, 99999)}.jpg",
    "url": lambda c, n: f"https://www.example.com/{c.intent.entity}/{c.rng.randint(1000, 99999)}",
    "ip": lambda c, n: f"203.0.113.{c.rng.randint(1, 254)}",
    "id": lambda c, n: c.new_id(n, _id_stem(n, c.intent.entity)),
    "first_name": lambda c, n: c.person()[0],
    "last_name": lambda c, n: c.person()[1],
    "username": lambda c, n: f"{c.person()[0].lower()}{c.person()[1][0].lower()}{c.rng.randint(1, 99)}",
    "timezone": lambda c, n: c.place()[5],
    "flight_number": lambda c, n: (
        f"{c._memo('airline', lambda: c.rng.choice(pools.AIRLINES))[1]}{c.rng.randint(100, 2999)}"
    ),
    "zip": lambda c, n: f"{c.rng.randint(10000, 99999)}",
    "country_code": lambda c, n: c.place()[2],
    "currency": lambda c, n: c.currency() if c.intent.template not in ("currency", "stock") else "USD",
    "language_code": lambda c, n: c.rng.choice(pools.LANGUAGES)[1],
    "language": lambda c, n: c.rng.choice(pools.LANGUAGES)[0],
    "datetime": _datetime,
    "date": _date,
    "time": lambda c, n: f"{c.rng.randint(6, 21):02d}:{5 * c.rng.randint(0, 11):02d}",
    "year": lambda c, n: c.rng.randint(1985, c.anchor.year),
    "month": lambda c, n: c.rng.randint(1, 12),
    "weekday": lambda c, n: c.rng.choice(pools.WEEKDAYS),
    "duration": _duration,
    "temperature": lambda c, n: _temperature(c),
    "humidity": lambda c, n: c.rng.randint(25, 95),
    "wind": lambda c, n: round(c.rng.uniform(0, 35), 1),
    "pressure": lambda c, n: c.rng.randint(990, 1035),
    "visibility": lambda c, n: round(c.rng.uniform(2, 16), 1),
    "uv": lambda c, n: c.rng.randint(0, 10),
    "precipitation": lambda c, n: round(c.rng.uniform(0, 12), 1),
    "latitude": lambda c, n: round(c.place()[3] + c.rng.uniform(-0.05, 0.05), 4),
    "longitude": lambda c, n: round(c.place()[4] + c.rng.uniform(-0.05, 0.05), 4),
    "change_percent": lambda c, n: round(c.rng.uniform(-4, 4), 2),
    "percent": lambda c, n: round(c.rng.uniform(0, 100), 1),
    "rate": lambda c, n: _rate(c),
    "count": lambda c, n: c.rng.randint(1, 24),
    "page": lambda c, n: 1,
    "limit": lambda c, n: 10,
    "salary": lambda c, n: c.rng.randint(40, 180) * 1000,
    "balance": lambda c, n: round(c.rng.uniform(100, 25000), 2),
    "big_money": lambda c, n: c.rng.randint(5, 3000) * 1_000_000_000,
    "small_money": lambda c, n: round(c.rng.uniform(1, 40), 2),
    "money": lambda c, n: round(c.rng.uniform(12, 480), 2),
    "volume": lambda c, n: c.rng.randint(100_000, 90_000_000),
    "change": lambda c, n: round(c.rng.uniform(-8, 8), 2),
    "rating": lambda c, n: round(c.rng.uniform(3.0, 5.0), 1),
    "score": lambda c, n: c.rng.randint(50, 100),
    "age": lambda c, n: c.rng.randint(18, 80),
    "population": lambda c, n: c.rng.randint(50_000, 12_000_000),
    "distance": lambda c, n: round(c.rng.uniform(1, 1200), 1),
    "weight": lambda c, n: round(c.rng.uniform(0.2, 25), 2),
    "dimension": lambda c, n: round(c.rng.uniform(5, 200), 1),
    "elevation": lambda c, n: c.rng.randint(0, 3500),
    "speed": lambda c, n: round(c.rng.uniform(10, 120), 1),
    "size_bytes": lambda c, n: c.rng.randint(2_000, 40_000_000),
    "calories": lambda c, n: c.rng.randint(120, 900),
    "true": lambda c, n: True,
    "boolean": lambda c, n: c.rng.chance(0.7),
    "status": lambda c, n: _status(c),
    "priority": lambda c, n: c.rng.choice(pools.PRIORITIES),
    "role": lambda c, n: c.rng.choice(pools.ROLES),
    "travel_mode": lambda c, n: c.rng.choice(pools.TRAVEL_MODES),
    "payment_method": lambda c, n: c.rng.choice(pools.PAYMENT_METHODS),
    "color": lambda c, n: c.rng.choice(pools.COLORS),
    "unit": lambda c, n: "fahrenheit" if c.fahrenheit else ("celsius" if c.intent.template == "weather" else "metric"),
    "cuisine": lambda c, n: c.rng.choice(pools.CUISINES),
    "genre": lambda c, n: c.rng.choice(pools.MUSIC_GENRES if c.intent.template == "track" else pools.GENRES),
    "category": lambda c, n: _category(c),
    "tags": lambda c, n: c.rng.sample(pools.TOPICS, c.rng.randint(1, 3)),
    "amenities": lambda c, n: c.rng.sample(pools.AMENITIES, c.rng.randint(2, 5)),
    "ingredients": lambda c, n: c.rng.sample(pools.INGREDIENTS, c.rng.randint(3, 6)),
    "topic": lambda c, n: c.rng.choice(pools.TOPICS),
    "job_title": lambda c, n: c.rng.choice(pools.JOB_TITLES),
    "airline": lambda c, n: c._memo("airline", lambda: c.rng.choice(pools.AIRLINES))[0],
    "airport": lambda c, n: c.rng.choice(pools.AIRPORTS),
    "company": lambda c, n: c.rng.choice(pools.COMPANIES),
    "ticker": lambda c, n: c._memo("ticker", lambda: c.rng.choice(pools.TICKERS))[0],
    "city": lambda c, n: c.place()[0],
    "country": lambda c, n: c.place()[1],
    "region": lambda c, n: c.rng.choice(
        ("California", "Ontario", "Bavaria", "Île-de-France", "New South Wales", "Texas")
    ),
    "address": lambda c, n: f"{c.rng.randint(1, 980)} {c.rng.choice(pools.STREETS)}, {c.place()[0]}",
    "person": lambda c, n: " ".join(c.person()),
    "name": _name,
    "title": lambda c, n: _title(c),
    "venue": lambda c, n: f"{c.place()[0]} {c.rng.choice(('Arena', 'Convention Center', 'Concert Hall', 'Stadium'))}",
    "car_make": lambda c, n: c._memo("car", lambda: c.rng.choice(pools.CAR_MAKES))[0],
    "car_model": lambda c, n: c._memo("car", lambda: c.rng.choice(pools.CAR_MAKES))[1],
    "news_source": lambda c, n: c.rng.choice(pools.NEWS_SOURCES),
    "seat": lambda c, n: f"{c.rng.randint(1, 40)}{c.rng.choice('ABCDEF')}",
    "gate": lambda c, n: f"{c.rng.choice('ABCDE')}{c.rng.randint(1, 40)}",
    "terminal": lambda c, n: str(c.rng.randint(1, 5)),
    "room_type": lambda c, n: c.rng.choice(pools.ROOM_TYPES),
    "seat_class": lambda c, n: c.rng.choice(pools.SEAT_CLASSES),
    "mime": lambda c, n: c.rng.choice(pools.MIME_TYPES)[1],
    "file_name": lambda c, n: (
        f"{c.rng.choice(('report', 'notes', 'summary'))}_{c.anchor.isoformat()}.{c.rng.choice(pools.MIME_TYPES)[0]}"
    ),
    "isbn": lambda c, n: (
        f"978-{c.rng.randint(0, 9)}-{c.rng.randint(1000, 9999)}-{c.rng.randint(1000, 9999)}-{c.rng.randint(0, 9)}"
    ),
    "sku": lambda c, n: f"SKU-{c.rng.randint(10000, 99999)}",
    "version": lambda c, n: f"{c.rng.randint(1, 5)}.{c.rng.randint(0, 20)}.{c.rng.randint(0, 9)}",
    "token": lambda c, n: "".join(c.rng.choice("0123456789abcdef") for _ in range(32)),
    "code": lambda c, n: "".join(c.rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(6)),
    "condition": lambda c, n: c._memo("condition", lambda: c.rng.choice(pools.WEATHER_CONDITIONS)),
    "text": _text,
    "line_items": lambda c, n: _line_items(c),
    "email_list": lambda c, n: [
        f"{c.rng.choice(pools.FIRST_NAMES).lower()}@example.com" for _ in range(c.rng.randint(1, 3))
    ],
}


def _id_stem(name: str, default: str) -> str:
    words = [w for w in split_words(name) if w not in ("id", "uuid")]
    return singular(words[-1]) if words else default


def coerce(value: Any, want: str | None) -> Any:
    """``value`` as JSON type ``want`` (None = any), or MISSING when that makes no sense."""
    if want is None:
        return value
    if want == "string":
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        return MISSING
    if want in ("integer", "number"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return MISSING
        return round(value) if want == "integer" else value
    if want == "boolean":
        return value if isinstance(value, bool) else MISSING
    if want == "array":
        return value if isinstance(value, list) else MISSING
    if want == "object":
        return value if isinstance(value, dict) else MISSING
    if want == "null":
        return None
    return MISSING


def field_value(name: str, ctx: ValueContext, want: str | None = None) -> Any:
    """A plausible value for a field called ``name``, of JSON type ``want``; MISSING if unknown."""
    category = classify(name)
    if category is None:
        return MISSING
    return coerce(_GENERATORS[category](ctx, name), want)


def generic_value(name: str, ctx: ValueContext, want: str | None) -> Any:
    """The fallback for fields no rule knows: a value of the wanted type, labelled by the name."""
    if want == "integer":
        return ctx.rng.randint(1, 100)
    if want == "number":
        return round(ctx.rng.uniform(1, 100), 2)
    if want == "boolean":
        return ctx.rng.chance(0.5)
    if want == "null":
        return None
    label = " ".join(split_words(name)).capitalize() or "Value"
    return f"{label} {ctx.rng.randint(1, 99)}"
