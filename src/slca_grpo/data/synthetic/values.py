"""Slot values for the synthetic suite: cities, people, dates, money, products, and their surface forms.

Everything here is plain data plus small samplers that take an explicit ``random.Random`` so that
generation is reproducible (no global random state, no set iteration).

Held-out means new: every list that a request, a gold argument or a fabricated response draws
names, places or free text from is a :class:`ValuePool`, split into a train part and a disjoint
test part. ``generate_tasks`` builds each task inside :func:`value_split`, so a test task only ever
sees test values; outside any split (a simulator fabricating a response later) a pool reads as the
whole list. Values a tool schema lists as an ``enum`` (cabins, currencies, cuisines, ...) are plain
tuples shared by both splits: the model reads them in the schema. The simulator fabricates
answers from its own pools (``slca_grpo.simulator.answer_pools``), some of the same name: these are
the enum values and records the suite's tools and gold calls are written around, those are display
values for any tool's answers, and sharing one set would change every seeded task or answer.
"""

from __future__ import annotations

import datetime as dt
import random
import string
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar, overload

T = TypeVar("T")

DATE_PATTERN = r"^\d{4}-\d{2}-\d{2}$"
TIME_PATTERN = r"^\d{2}:\d{2}$"

VALUE_SPLITS = ("train", "test")
_ACTIVE_SPLIT: ContextVar[str | None] = ContextVar("synthetic_value_split", default=None)


@contextmanager
def value_split(split: str | None) -> Iterator[None]:
    """Within the block every :class:`ValuePool` reads as ``split``'s part (``None``: the whole list)."""
    if split is not None and split not in VALUE_SPLITS:
        raise ValueError(f"value split must be one of {VALUE_SPLITS} or None, got {split!r}")
    token = _ACTIVE_SPLIT.set(split)
    try:
        yield
    finally:
        _ACTIVE_SPLIT.reset(token)


class ValuePool(Sequence[T]):
    """A list of slot values in two disjoint parts: every third item (by position) is the test split's.

    Reads (indexing, ``len``, iteration, ``in``) see the active split's part (:func:`value_split`),
    or the whole list outside any split. ``all``, ``train`` and ``test`` are the parts themselves,
    for look-ups by key that must find any value. Two pools built from lists of the same length
    split the same positions, so parallel lists (a company and its ticker) stay paired.

    ``shared`` values are in both parts: values that some tool schema also lists as an ``enum``
    (the model reads those in the schema, so a split cannot hold them out).
    """

    TEST_EVERY = 3

    def __init__(self, items: Iterable[T], *, shared: Iterable[T] = ()) -> None:
        self.all: tuple[T, ...] = tuple(items)
        self.shared: tuple[T, ...] = tuple(shared)
        unknown = [value for value in self.shared if value not in self.all]
        if unknown:
            raise ValueError(f"shared values {unknown!r} are not in the pool")
        in_test = [i % self.TEST_EVERY == self.TEST_EVERY - 1 for i in range(len(self.all))]
        self.train: tuple[T, ...] = tuple(x for x, test in zip(self.all, in_test) if not test or x in self.shared)
        self.test: tuple[T, ...] = tuple(x for x, test in zip(self.all, in_test) if test or x in self.shared)

    def part(self, split: str | None) -> tuple[T, ...]:
        """The items of ``split`` (``None``: all of them)."""
        if split is None:
            return self.all
        if split == "train":
            return self.train
        if split == "test":
            return self.test
        raise ValueError(f"value split must be one of {VALUE_SPLITS} or None, got {split!r}")

    @property
    def active(self) -> tuple[T, ...]:
        return self.part(_ACTIVE_SPLIT.get())

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        return self.active[index]

    def __len__(self) -> int:
        return len(self.active)

    def __iter__(self) -> Iterator[T]:
        return iter(self.active)

    def __contains__(self, value: object) -> bool:
        return value in self.active

    def __repr__(self) -> str:
        return f"ValuePool({len(self.train)} train + {len(self.test)} test)"


@dataclass(frozen=True)
class City:
    name: str
    country: str
    airport: str
    timezone: str
    utc_offset: float  # hours, standard time; enough for a plausible local clock


CITIES: tuple[City, ...] = (
    City("Paris", "France", "CDG", "Europe/Paris", 1),
    City("London", "United Kingdom", "LHR", "Europe/London", 0),
    City("Rome", "Italy", "FCO", "Europe/Rome", 1),
    City("Berlin", "Germany", "BER", "Europe/Berlin", 1),
    City("Madrid", "Spain", "MAD", "Europe/Madrid", 1),
    City("Lisbon", "Portugal", "LIS", "Europe/Lisbon", 0),
    City("Amsterdam", "Netherlands", "AMS", "Europe/Amsterdam", 1),
    City("Vienna", "Austria", "VIE", "Europe/Vienna", 1),
    City("Prague", "Czechia", "PRG", "Europe/Prague", 1),
    City("Oslo", "Norway", "OSL", "Europe/Oslo", 1),
    City("Stockholm", "Sweden", "ARN", "Europe/Stockholm", 1),
    City("Copenhagen", "Denmark", "CPH", "Europe/Copenhagen", 1),
    City("Dublin", "Ireland", "DUB", "Europe/Dublin", 0),
    City("Athens", "Greece", "ATH", "Europe/Athens", 2),
    City("Zürich", "Switzerland", "ZRH", "Europe/Zurich", 1),
    City("Reykjavík", "Iceland", "KEF", "Atlantic/Reykjavik", 0),
    City("Istanbul", "Türkiye", "IST", "Europe/Istanbul", 3),
    City("Cairo", "Egypt", "CAI", "Africa/Cairo", 2),
    City("Nairobi", "Kenya", "NBO", "Africa/Nairobi", 3),
    City("Cape Town", "South Africa", "CPT", "Africa/Johannesburg", 2),
    City("Dubai", "United Arab Emirates", "DXB", "Asia/Dubai", 4),
    City("Mumbai", "India", "BOM", "Asia/Kolkata", 5.5),
    City("Bangkok", "Thailand", "BKK", "Asia/Bangkok", 7),
    City("Singapore", "Singapore", "SIN", "Asia/Singapore", 8),
    City("Tokyo", "Japan", "HND", "Asia/Tokyo", 9),
    City("Seoul", "South Korea", "ICN", "Asia/Seoul", 9),
    City("Sydney", "Australia", "SYD", "Australia/Sydney", 10),
    City("Auckland", "New Zealand", "AKL", "Pacific/Auckland", 12),
    City("Toronto", "Canada", "YYZ", "America/Toronto", -5),
    City("Vancouver", "Canada", "YVR", "America/Vancouver", -8),
    City("New York", "United States", "JFK", "America/New_York", -5),
    City("Chicago", "United States", "ORD", "America/Chicago", -6),
    City("Los Angeles", "United States", "LAX", "America/Los_Angeles", -8),
    City("San Francisco", "United States", "SFO", "America/Los_Angeles", -8),
    City("Miami", "United States", "MIA", "America/New_York", -5),
    City("Mexico City", "Mexico", "MEX", "America/Mexico_City", -6),
    City("São Paulo", "Brazil", "GRU", "America/Sao_Paulo", -3),
    City("Buenos Aires", "Argentina", "EZE", "America/Argentina/Buenos_Aires", -3),
    City("Warsaw", "Poland", "WAW", "Europe/Warsaw", 1),
    City("Budapest", "Hungary", "BUD", "Europe/Budapest", 1),
    City("Helsinki", "Finland", "HEL", "Europe/Helsinki", 2),
    City("Brussels", "Belgium", "BRU", "Europe/Brussels", 1),
    City("Edinburgh", "United Kingdom", "EDI", "Europe/London", 0),
    City("Barcelona", "Spain", "BCN", "Europe/Madrid", 1),
    City("Marrakesh", "Morocco", "RAK", "Africa/Casablanca", 1),
    City("Lagos", "Nigeria", "LOS", "Africa/Lagos", 1),
    City("Doha", "Qatar", "DOH", "Asia/Qatar", 3),
    City("Kathmandu", "Nepal", "KTM", "Asia/Kathmandu", 5.75),
    City("Hanoi", "Vietnam", "HAN", "Asia/Ho_Chi_Minh", 7),
    City("Kuala Lumpur", "Malaysia", "KUL", "Asia/Kuala_Lumpur", 8),
    City("Manila", "Philippines", "MNL", "Asia/Manila", 8),
    City("Melbourne", "Australia", "MEL", "Australia/Melbourne", 10),
    City("Montreal", "Canada", "YUL", "America/Toronto", -5),
    City("Seattle", "United States", "SEA", "America/Los_Angeles", -8),
    City("Denver", "United States", "DEN", "America/Denver", -7),
    City("Lima", "Peru", "LIM", "America/Lima", -5),
)
CITY_BY_NAME = {city.name: city for city in CITIES}  # look-ups by name find any city
CITY_NAMES: ValuePool[str] = ValuePool(city.name for city in CITIES)

FIRST_NAMES: ValuePool[str] = ValuePool(
    (
        "Alice",
        "Bruno",
        "Chen",
        "Daria",
        "Emeka",
        "Fatima",
        "Gabriel",
        "Hana",
        "Ivan",
        "Julia",
        "Kofi",
        "Leila",
        "Mateo",
        "Nina",
        "Omar",
        "Priya",
        "Quentin",
        "Rosa",
        "Sven",
        "Tomoko",
        "Umar",
        "Valentina",
        "Wei",
        "Ximena",
        "Yusuf",
        "Zoe",
        "Lars",
        "Amara",
        "Diego",
        "Ingrid",
        "Aiko",
        "Bilal",
        "Camila",
        "Dmitri",
        "Esther",
        "Farid",
        "Greta",
        "Hugo",
        "Ines",
        "Jonas",
        "Keiko",
        "Luca",
        "Maya",
        "Nikolai",
        "Olga",
    )
)
LAST_NAMES: ValuePool[str] = ValuePool(
    (
        "Smith",
        "Garcia",
        "Nakamura",
        "Okafor",
        "Müller",
        "Rossi",
        "Kowalski",
        "Haddad",
        "Johansson",
        "Silva",
        "Patel",
        "Dubois",
        "Kim",
        "Novak",
        "Andersen",
        "Moreau",
        "Schmidt",
        "Costa",
        "Ivanova",
        "Mensah",
        "Tanaka",
        "Lopez",
        "Fischer",
        "Ahmed",
        "Larsen",
        "Romano",
        "Walsh",
        "Sato",
        "Bianchi",
        "Chowdhury",
        "Eriksson",
        "Fernandes",
        "Horvat",
        "Jansen",
        "Kaplan",
        "Lindqvist",
        "Mwangi",
        "Nguyen",
        "Petrov",
        "Reyes",
        "Yilmaz",
        "Zhou",
    )
)
EMAIL_DOMAINS: ValuePool[str] = ValuePool(
    (
        "example.com",
        "mail.example.org",
        "corp.example.net",
        "inbox.example.com",
        "post.example.org",
        "webmail.example.net",
    )
)
# Last two digits of the fictional 555-01xx phone numbers.
PHONE_SUFFIXES: ValuePool[int] = ValuePool(range(100))

CURRENCIES = ("USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "SEK", "INR", "BRL")
# Units of each currency per US dollar: fixed so conversions are consistent across tasks.
USD_RATES = {
    "USD": 1.0,
    "EUR": 0.92,
    "GBP": 0.79,
    "JPY": 151.2,
    "CHF": 0.88,
    "CAD": 1.36,
    "AUD": 1.52,
    "SEK": 10.6,
    "INR": 83.4,
    "BRL": 5.05,
}

# (airline, two-letter code of its flight numbers)
_AIRLINES = (
    ("SkyWays", "SW"),
    ("AeroNova", "AN"),
    ("BlueJet", "BJ"),
    ("Polar Air", "PA"),
    ("Meridian", "MR"),
    ("Coastline Airlines", "CL"),
    ("Northstar Airways", "NS"),
    ("Alpine Wings", "AW"),
    ("Sahara Sky", "SS"),
    ("Pacific Crest", "PC"),
    ("Lakeside Air", "LK"),
    ("Aurora Airlines", "AU"),
)
AIRLINES: ValuePool[str] = ValuePool(name for name, _ in _AIRLINES)
AIRLINE_CODES: ValuePool[str] = ValuePool(code for _, code in _AIRLINES)  # paired with AIRLINES by position
CABINS = ("economy", "premium_economy", "business", "first")
SEATS = ("window", "aisle", "any")
HOTEL_WORDS: tuple[ValuePool[str], ValuePool[str]] = (
    ValuePool(
        (
            "Grand",
            "Harbor",
            "Old Town",
            "Riverside",
            "Garden",
            "Central",
            "Skyline",
            "Royal",
            "Lakeview",
            "Park",
            "Seaside",
            "Maple",
        )
    ),
    ValuePool(("Hotel", "Suites", "Inn", "Residence", "Lodge", "Palace", "House", "Retreat")),
)

# Fictional listed companies, so that a ticker can only be known by looking it up.
COMPANIES: ValuePool[tuple[str, str]] = ValuePool(
    (
        ("Northwind Traders", "NWTR"),
        ("Bluefin Robotics", "BFRB"),
        ("Helios Solar", "HLSO"),
        ("Quartz Analytics", "QRTZ"),
        ("Maple Grove Foods", "MPGF"),
        ("Orbital Freight", "ORBF"),
        ("Cedar Health", "CDRH"),
        ("Lumen Textiles", "LUMT"),
        ("Tidewater Energy", "TDWE"),
        ("Granite Bank", "GRNB"),
        ("Vireo Games", "VIRG"),
        ("Atlas Mining", "ATLM"),
        ("Nimbus Cloud", "NMBC"),
        ("Copperleaf Pharma", "CPLF"),
        ("Saffron Motors", "SFMT"),
        ("Silverline Logistics", "SLVL"),
        ("Redwood Insurance", "RDWI"),
        ("Harborview Hotels", "HBVH"),
        ("Pinnacle Semiconductors", "PNSC"),
        ("Evergreen Water", "EVGW"),
        ("Brightpath Education", "BRPE"),
        ("Ironclad Security", "IRCS"),
        ("Meadowlark Media", "MDLM"),
        ("Crescent Biotech", "CRSB"),
    )
)
EXCHANGES = ("NYSE", "NASDAQ", "LSE", "XETRA")
ACCOUNT_TYPES = ("checking", "savings", "credit")

PRODUCT_CATEGORIES = ("electronics", "home", "sports", "books", "clothing", "toys")
# (search query, category, typical price): a product's price goes to its split with it.
PRODUCTS: ValuePool[tuple[str, str, float]] = ValuePool(
    (
        ("wireless headphones", "electronics", 89.0),
        ("mechanical keyboard", "electronics", 75.0),
        ("phone charger", "electronics", 19.0),
        ("smart watch", "electronics", 199.0),
        ("coffee grinder", "home", 45.0),
        ("desk lamp", "home", 32.0),
        ("air purifier", "home", 129.0),
        ("cast iron pan", "home", 39.0),
        ("yoga mat", "sports", 25.0),
        ("running shoes", "sports", 110.0),
        ("tennis racket", "sports", 95.0),
        ("camping tent", "sports", 160.0),
        ("science fiction novel", "books", 14.0),
        ("cookbook", "books", 28.0),
        ("rain jacket", "clothing", 85.0),
        ("wool scarf", "clothing", 30.0),
        ("board game", "toys", 35.0),
        ("building blocks set", "toys", 49.0),
        ("bluetooth speaker", "electronics", 59.0),
        ("electric kettle", "home", 42.0),
        ("travel guidebook", "books", 22.0),
        ("hiking backpack", "sports", 79.0),
        ("denim jacket", "clothing", 68.0),
        ("jigsaw puzzle", "toys", 18.0),
        ("portable power bank", "electronics", 35.0),
        ("winter gloves", "clothing", 24.0),
        ("bath towel set", "home", 36.0),
    )
)
BRANDS: ValuePool[str] = ValuePool(
    (
        "Acme",
        "Nordic",
        "Vertex",
        "Pinecrest",
        "Zenith",
        "Kestrel",
        "Lumina",
        "Solace",
        "Orion",
        "Trailhead",
        "Copperline",
        "Bramble",
    )
)
CARRIERS = ("UPS", "FedEx", "DHL", "USPS")
ORDER_STATUSES = ("processing", "shipped", "out_for_delivery", "delivered")

EVENT_TITLES: ValuePool[str] = ValuePool(
    (
        "Team standup",
        "Project review",
        "Dentist appointment",
        "Lunch with Sam",
        "Budget meeting",
        "Yoga class",
        "Quarterly planning",
        "Call with the landlord",
        "Design workshop",
        "Parent-teacher meeting",
        "Book club",
        "One-on-one with my manager",
        "Car service",
        "Interview debrief",
        "Sprint retrospective",
        "Piano lesson",
        "Coffee with Maria",
        "Vet appointment for the dog",
        "Board presentation",
        "Team lunch",
        "Physiotherapy session",
    )
)
CALENDARS = ("work", "personal", "all")
REMINDER_TEXTS: ValuePool[str] = ValuePool(
    (
        "call mom",
        "pay the electricity bill",
        "water the plants",
        "pick up the dry cleaning",
        "renew my passport",
        "book a haircut",
        "send the report to Priya",
        "take out the recycling",
        "buy milk on the way home",
        "cancel the gym trial",
        "check the tyre pressure",
        "return the library books",
        "submit the expense report",
        "feed the neighbour's cat",
        "charge the camera batteries",
    )
)

EMAIL_SUBJECTS: ValuePool[str] = ValuePool(
    (
        "Meeting notes",
        "Quick question",
        "Weekend plans",
        "Invoice",
        "Project update",
        "Thank you",
        "Travel itinerary",
        "Contract draft",
        "Birthday party",
        "Updated schedule",
        "Question about the budget",
        "Lunch on Thursday",
    )
)
EMAIL_BODIES: ValuePool[str] = ValuePool(
    (
        "Thanks for today, the notes are attached.",
        "Can we move our call to Friday?",
        "Are you free for dinner on Saturday?",
        "Please find the invoice for March attached.",
        "The prototype is ready for testing.",
        "Thank you for your help last week!",
        "I've attached the signed contract.",
        "Could you send me the slides from yesterday?",
        "The delivery is scheduled for Monday morning.",
        "Let's push the deadline to next Wednesday.",
        "Here is the itinerary for our trip.",
        "Happy to help with the move this weekend.",
    )
)
SMS_TEXTS: ValuePool[str] = ValuePool(
    (
        "Running 10 minutes late.",
        "I'm outside.",
        "Happy birthday!",
        "Can you call me back?",
        "Dinner is at 8.",
        "Don't forget the keys.",
        "On my way!",
        "Can you grab some bread?",
        "The train is delayed.",
        "See you at the station.",
        "Call me when you land.",
        "Left the package with the neighbour.",
    )
)
INBOX_FOLDERS = ("inbox", "work", "promotions", "archive")

CUISINES = ("italian", "japanese", "mexican", "indian", "thai", "french", "vegetarian")
PRICE_LEVELS = ("budget", "moderate", "expensive")
RESTAURANT_WORDS: tuple[ValuePool[str], ValuePool[str]] = (
    ValuePool(("The Golden", "Little", "Blue", "Casa", "Green", "Old", "The Silver", "Red", "Twin")),
    ValuePool(("Spoon", "Lantern", "Table", "Fig", "Olive", "Harbor", "Kitchen", "Pepper", "Oak", "Lemon")),
)
DISHES: ValuePool[str] = ValuePool(
    (
        "lasagna",
        "pad thai",
        "chicken curry",
        "mushroom risotto",
        "banana bread",
        "falafel",
        "ramen",
        "shakshuka",
        "ratatouille",
        "tacos al pastor",
        "paella",
        "beef stroganoff",
        "moussaka",
        "pumpkin soup",
        "gnocchi with pesto",
    )
)

ROOMS = ("living room", "bedroom", "kitchen", "office", "bathroom", "hallway")
DOORS = ("front", "back", "garage")
THERMOSTAT_MODES = ("heat", "cool", "auto")

LANGUAGES = ("French", "Spanish", "German", "Italian", "Japanese", "Portuguese", "Swahili", "Korean")

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)

_FIRST_DATE = dt.date(2025, 1, 6)
_DATE_SPAN_DAYS = 700


def pick(rng: random.Random, items: Sequence[T]) -> T:
    return items[rng.randrange(len(items))]


def pick_distinct(rng: random.Random, items: Sequence[T], count: int) -> list[T]:
    """``count`` different items in random order (order of ``items`` is what makes it reproducible)."""
    return rng.sample(list(items), count)


def person_name(rng: random.Random) -> str:
    return f"{pick(rng, FIRST_NAMES)} {pick(rng, LAST_NAMES)}"


def email_for(name: str, rng: random.Random) -> str:
    local = ".".join(name.lower().split())
    # E-mail local parts stay ASCII: strip accents the way most providers' sign-up forms do.
    local = unicodedata.normalize("NFKD", local).encode("ascii", "ignore").decode("ascii")
    return f"{local}@{pick(rng, EMAIL_DOMAINS)}"


def phone_number(rng: random.Random) -> str:
    # The 555-01xx range is reserved for fiction; its last two digits are split like any pool.
    return f"+1-555-01{pick(rng, PHONE_SUFFIXES):02d}"


def make_id(prefix: str, rng: random.Random, length: int = 6) -> str:
    alphabet = string.ascii_uppercase + string.digits
    return prefix + "".join(rng.choice(alphabet) for _ in range(length))


def iso_date(rng: random.Random) -> str:
    return (_FIRST_DATE + dt.timedelta(days=rng.randrange(_DATE_SPAN_DAYS))).isoformat()


def distinct_dates(rng: random.Random, count: int) -> list[str]:
    """``count`` different ISO dates in increasing order."""
    offsets = sorted(rng.sample(range(_DATE_SPAN_DAYS), count))
    return [(_FIRST_DATE + dt.timedelta(days=offset)).isoformat() for offset in offsets]


def add_days(iso: str, days: int) -> str:
    return (dt.date.fromisoformat(iso) + dt.timedelta(days=days)).isoformat()


def days_between(start_iso: str, end_iso: str) -> int:
    return (dt.date.fromisoformat(end_iso) - dt.date.fromisoformat(start_iso)).days


def clock_time(rng: random.Random, first_hour: int = 7, last_hour: int = 20, step: int = 15) -> str:
    return f"{rng.randint(first_hour, last_hour):02d}:{rng.randrange(0, 60, step):02d}"


def add_minutes(hhmm: str, minutes: int) -> str:
    hours, mins = (int(part) for part in hhmm.split(":"))
    total = (hours * 60 + mins + minutes) % (24 * 60)
    return f"{total // 60:02d}:{total % 60:02d}"


def money(value: float) -> float:
    return round(value + 1e-9, 2)


def date_surface(iso: str, rng: random.Random) -> str:
    """How a user might write an ISO date: as is, or with the month spelt out."""
    day = dt.date.fromisoformat(iso)
    forms = (iso, f"{MONTHS[day.month - 1]} {day.day}, {day.year}", f"{day.day} {MONTHS[day.month - 1]} {day.year}")
    return forms[rng.choices(range(3), weights=(2, 1, 1))[0]]


def time_surface(hhmm: str, rng: random.Random) -> str:
    """``14:30`` as written by a user: ``14:30`` or ``2:30 pm``."""
    if rng.random() < 0.5:
        return hhmm
    hours, mins = (int(part) for part in hhmm.split(":"))
    suffix = "am" if hours < 12 else "pm"
    return f"{(hours % 12) or 12}:{mins:02d} {suffix}"


def number_surface(value: Any) -> str:
    """Numbers as people write them: no trailing ``.0``, two decimals for cents."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.2f}"
    if isinstance(value, float):
        return str(int(value))
    return str(value)


def spoken_list(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def price_str(amount: float, currency: str) -> str:
    return f"{amount:.2f} {currency}"
