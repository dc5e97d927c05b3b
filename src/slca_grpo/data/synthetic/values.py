"""Slot values for the synthetic suite: cities, people, dates, money, products, and their surface forms.

Everything here is plain data plus small samplers that take an explicit ``random.Random`` so that
generation is reproducible (no global random state, no set iteration). The simulator fabricates
answers from its own pools (``slca_grpo.simulator.answer_pools``), some of the same name: these are
the enum values and records the suite's tools and gold calls are written around, those are display
values for any tool's answers, and sharing one set would change every seeded task or answer.
"""

from __future__ import annotations

import datetime as dt
import random
import string
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

DATE_PATTERN = r"^\d{4}-\d{2}-\d{2}$"
TIME_PATTERN = r"^\d{2}:\d{2}$"


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
)
CITY_BY_NAME = {city.name: city for city in CITIES}
CITY_NAMES = tuple(city.name for city in CITIES)

FIRST_NAMES = (
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
)
LAST_NAMES = (
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
)
EMAIL_DOMAINS = ("example.com", "mail.example.org", "corp.example.net", "inbox.example.com")

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

AIRLINES = ("SkyWays", "AeroNova", "BlueJet", "Polar Air", "Meridian", "Coastline Airlines")
CABINS = ("economy", "premium_economy", "business", "first")
SEATS = ("window", "aisle", "any")
HOTEL_WORDS = (
    ("Grand", "Harbor", "Old Town", "Riverside", "Garden", "Central", "Skyline"),
    ("Hotel", "Suites", "Inn", "Residence", "Lodge"),
)

# Fictional listed companies, so that a ticker can only be known by looking it up.
COMPANIES = (
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
)
EXCHANGES = ("NYSE", "NASDAQ", "LSE", "XETRA")
ACCOUNT_TYPES = ("checking", "savings", "credit")

PRODUCT_CATEGORIES = ("electronics", "home", "sports", "books", "clothing", "toys")
# (search query, category, typical price)
PRODUCTS = (
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
)
BRANDS = ("Acme", "Nordic", "Vertex", "Pinecrest", "Zenith", "Kestrel")
CARRIERS = ("UPS", "FedEx", "DHL", "USPS")
ORDER_STATUSES = ("processing", "shipped", "out_for_delivery", "delivered")

EVENT_TITLES = (
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
)
CALENDARS = ("work", "personal", "all")
REMINDER_TEXTS = (
    "call mom",
    "pay the electricity bill",
    "water the plants",
    "pick up the dry cleaning",
    "renew my passport",
    "book a haircut",
    "send the report to Priya",
    "take out the recycling",
)

EMAIL_SUBJECTS = ("Meeting notes", "Quick question", "Weekend plans", "Invoice", "Project update", "Thank you")
EMAIL_BODIES = (
    "Thanks for today, the notes are attached.",
    "Can we move our call to Friday?",
    "Are you free for dinner on Saturday?",
    "Please find the invoice for March attached.",
    "The prototype is ready for testing.",
    "Thank you for your help last week!",
)
SMS_TEXTS = (
    "Running 10 minutes late.",
    "I'm outside.",
    "Happy birthday!",
    "Can you call me back?",
    "Dinner is at 8.",
    "Don't forget the keys.",
)
INBOX_FOLDERS = ("inbox", "work", "promotions", "archive")

CUISINES = ("italian", "japanese", "mexican", "indian", "thai", "french", "vegetarian")
PRICE_LEVELS = ("budget", "moderate", "expensive")
RESTAURANT_WORDS = (
    ("The Golden", "Little", "Blue", "Casa", "Green", "Old"),
    ("Spoon", "Lantern", "Table", "Fig", "Olive", "Harbor", "Kitchen"),
)
DISHES = (
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
)

ROOMS = ("living room", "bedroom", "kitchen", "office", "bathroom", "hallway")
DOORS = ("front", "back", "garage")
THERMOSTAT_MODES = ("heat", "cool", "auto")

LANGUAGES = ("French", "Spanish", "German", "Italian", "Japanese", "Portuguese", "Swahili", "Korean")
PHRASES_TO_TRANSLATE = (
    "Where is the train station?",
    "Thank you very much",
    "I would like a coffee, please",
    "How much does this cost?",
    "Good morning",
    "The meeting starts at noon",
)

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
    # The 555-01xx range is reserved for fiction.
    return f"+1-555-01{rng.randrange(100):02d}"


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
