"""What a tool does, read from its name and description: a verb class and an entity.

``cancel_booking`` → (cancel, booking); ``searchHotels`` → (search, hotel); ``get_current_weather``
→ (get, weather). The schema backend shapes its answers by it and the session store uses it to
decide which calls change state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from slca_grpo.simulator.words import singular, split_words

CREATE, CANCEL, DELETE, UPDATE, GET, SEARCH, SEND, COMPUTE = (
    "create",
    "cancel",
    "delete",
    "update",
    "get",
    "search",
    "send",
    "compute",
)

VERB_WORDS: dict[str, frozenset[str]] = {
    CANCEL: frozenset("cancel revoke void abort terminate unbook".split()),
    DELETE: frozenset("delete remove erase destroy drop purge unsubscribe deactivate".split()),
    UPDATE: frozenset(
        "update edit modify change set rename reschedule patch upgrade assign mark adjust replace move toggle"
        " exchange return".split()
    ),
    CREATE: frozenset(
        "create add book make place register schedule reserve submit insert new open start"
        " generate issue enroll subscribe apply upload save purchase buy order rent hire".split()
    ),
    SEND: frozenset("send notify email message sms text share publish reply forward invite post tweet".split()),
    SEARCH: frozenset(
        "search list find query browse filter recommend discover explore scan suggest lookup_all autocomplete".split()
    ),
    COMPUTE: frozenset(
        "calculate compute convert estimate translate analyze analyse predict evaluate sum"
        " solve summarize summarise detect classify measure".split()
    ),
    GET: frozenset(
        "get fetch retrieve lookup check show read view describe obtain load download track"
        " verify validate current display see inspect query_one".split()
    ),
}
# When no word comes first, the strongest verb anywhere in the name wins, in this order.
_VERB_PRIORITY = (CANCEL, DELETE, UPDATE, CREATE, SEND, SEARCH, COMPUTE, GET)
_ALL_VERBS = frozenset().union(*VERB_WORDS.values())

# Entities with a field template (see values.TEMPLATES); aliases point at one of them.
ENTITY_ALIASES: dict[str, str] = {
    "reservation": "booking",
    "appointment": "appointment",
    "meeting": "appointment",
    "film": "movie",
    "show": "movie",
    "series": "movie",
    "article": "news",
    "headline": "news",
    "story": "news",
    "customer": "user",
    "account": "user",
    "profile": "user",
    "member": "user",
    "employee": "user",
    "contact": "user",
    "person": "user",
    "patient": "user",
    "student": "user",
    "passenger": "user",
    "guest": "user",
    "client": "user",
    "item": "product",
    "good": "product",
    "listing": "product",
    "deal": "product",
    "transaction": "payment",
    "invoice": "payment",
    "bill": "payment",
    "charge": "payment",
    "refund": "payment",
    "transfer": "payment",
    "email": "message",
    "sms": "message",
    "notification": "message",
    "chat": "message",
    "mail": "message",
    "text": "message",
    "place": "location",
    "address": "location",
    "geocode": "location",
    "coordinate": "location",
    "poi": "location",
    "venue": "location",
    "attraction": "location",
    "exchange": "currency",
    "rate": "currency",
    "forex": "currency",
    "share": "stock",
    "quote": "stock",
    "ticker": "stock",
    "crypto": "stock",
    "coin": "stock",
    "forecast": "weather",
    "temperature": "weather",
    "climate": "weather",
    "song": "track",
    "music": "track",
    "album": "track",
    "playlist": "track",
    "podcast": "track",
    "issue": "ticket",
    "task": "ticket",
    "todo": "ticket",
    "bug": "ticket",
    "reminder": "ticket",
    "document": "file",
    "folder": "file",
    "attachment": "file",
    "image": "file",
    "photo": "file",
    "vehicle": "car",
    "rental": "car",
    "ride": "car",
    "taxi": "car",
    "direction": "route",
    "distance": "route",
    "commute": "route",
    "trip": "route",
    "timezone": "time",
    "clock": "time",
    "date": "time",
    "cart": "order",
    "purchase": "order",
    "shipment": "order",
    "package": "order",
    "delivery": "order",
    "vacancy": "job",
    "position": "job",
    "career": "job",
    "dish": "recipe",
    "meal": "recipe",
    "food": "recipe",
    "nutrition": "recipe",
    "concert": "event",
    "game": "event",
    "match": "event",
    "festival": "event",
    "review": "review",
    "comment": "review",
    "rating": "review",
    "feedback": "review",
    "translation": "translation",
    "language": "translation",
    "subscription": "subscription",
    "plan": "subscription",
    "membership": "subscription",
}
TEMPLATE_ENTITIES = frozenset(
    "weather stock flight hotel restaurant order booking user product movie book news event payment"
    " message location currency translation track ticket file appointment car route time job recipe"
    " review subscription".split()
)
# Entities that are readings, not records: no id of their own.
NO_ID_ENTITIES = frozenset("weather stock currency translation route time location news".split())
PERSON_ENTITIES = frozenset(
    "user customer account profile member employee contact person patient student passenger guest"
    " client author artist driver doctor owner".split()
)
_FILLER = frozenset(
    "by for of the a an to in on at from with and or info information detail details data all my"
    " api v1 v2 tool function current latest new top best nearby near available real time id ids"
    " list".split()
)

# Plural words that name one reading, not a list of records.
_PLURAL_READINGS = frozenset(
    "news directions details settings stats statistics analytics metrics lyrics credentials"
    " preferences coordinates conditions".split()
)


# Status words a tool name can put before its entity: cancel_pending_order acts on pending orders.
STATUS_WORDS = frozenset(
    "pending delivered active inactive suspended processed processing shipped confirmed completed open closed"
    " draft paid unpaid overdue expired scheduled archived published approved rejected locked".split()
)
# "the order status will be changed to 'cancelled'", "Sets line status to Suspended"
_DESCRIBED_STATUS = re.compile(
    r"\bstatus\s+(?:will\s+be\s+|is\s+|gets\s+)?(?:changed\s+|set\s+|updated\s+|moved\s+)?to\s+"
    r"(?:['\"‘“]([^'\"’”]{1,40})['\"’”]|([A-Z][A-Za-z_]*))"
)


@dataclass(frozen=True)
class Intent:
    """The verb class of a tool and the entity it acts on (template entity when recognised)."""

    verb: str
    entity: str  # the word from the name, singular: "booking", "hotel", "widget"
    template: str  # the entity whose field template applies ("booking" for "reservation")
    status_before: str = ""  # the status the name says the record is in ("pending": cancel_pending_order)
    status_after: str = ""  # the status the description says the call leaves it in ('return requested')

    @property
    def has_id(self) -> bool:
        return self.template not in NO_ID_ENTITIES


def template_of(word: str) -> str | None:
    """The template entity a word names (``reservation`` → booking), or None."""
    word = singular(word)
    if word in TEMPLATE_ENTITIES:
        return word
    return ENTITY_ALIASES.get(word)


@lru_cache(maxsize=4096)
def read_intent(name: str, description: str = "") -> Intent:
    """Classify a tool by its name (and, when the name says little, its description)."""
    words = split_words(name)
    verb = next((v for v in _VERB_PRIORITY if words and words[0] in VERB_WORDS[v]), None)
    if verb is None:
        # A verb word that names a known entity before another word is a noun: the "order" of
        # return_delivered_order_items places no order.
        verbs = [w for i, w in enumerate(words) if i == len(words) - 1 or template_of(w) is None]
        verb = next((v for v in _VERB_PRIORITY if any(w in VERB_WORDS[v] for w in verbs)), GET)
    # The first word is the verb; later verb words ("order", "book") count as nouns only when
    # they name a known entity (get_order_status, search_books).
    nouns = [
        w
        for i, w in enumerate(words)
        if not (i == 0 and w in _ALL_VERBS)
        and w not in _FILLER
        and not w.isdigit()
        and (w not in _ALL_VERBS or template_of(w) is not None)
    ]
    template = None
    entity = None
    for word in reversed(nouns):
        template = template_of(word)
        if template:
            entity = singular(word)
            break
    if template is None and description:
        for word in split_words(description):
            template = template_of(word) if len(word) > 3 else None
            if template:
                break
    if entity is None:
        entity = singular(nouns[-1]) if nouns else (template or "item")
    # "plural" tools that search read as searches: list_orders, get_hotels.
    if "translate" in words or "translation" in words:
        template = "translation"
    last = words[-1] if words else ""
    if verb == GET and last not in _FILLER and last not in _PLURAL_READINGS and last != singular(last):
        verb = SEARCH
    if verb == UPDATE and "exchange" in words and template == "currency":
        verb = COMPUTE  # exchange_currency converts money, it changes no record
    status_before = next((w for w in words[:-1] if w in STATUS_WORDS), "")
    status_after = described_status(description)
    if status_after and verb in (GET, SEARCH, COMPUTE):
        verb = UPDATE  # a tool whose description says it changes a status is a write
    return Intent(verb, entity, template or "generic", status_before, status_after)


def described_status(description: str) -> str:
    """The status a tool's description says the call sets, e.g. 'return requested'; "" if none."""
    match = _DESCRIBED_STATUS.search(description or "")
    return (match[1] or match[2]).strip() if match else ""


# "<entity>_number" keys that name a record (order_number), unlike phone_number or card_number.
_NUMBER_ID_STEMS = frozenset(
    "order booking reservation confirmation ticket invoice tracking account case reference transaction".split()
)


@lru_cache(maxsize=8192)
def is_id_key(name: str) -> bool:
    """Whether a field holds a record's identifier: ``id``, ``order_id``, ``userId``, ``order_number``."""
    words = split_words(name)
    if not words:
        return False
    if words[-1] in ("id", "uuid", "guid"):
        return True
    return len(words) >= 2 and words[-1] == "number" and words[-2] in _NUMBER_ID_STEMS


@lru_cache(maxsize=8192)
def id_stem(name: str, default: str) -> str:
    """The entity an id field names: ``hotel_booking_id`` → booking; plain ``id`` → ``default``."""
    words = [w for w in split_words(name) if w not in ("id", "uuid", "guid", "number")]
    return singular(words[-1]) if words else default
