"""The reader's word banks: the real words invented tools are named from, and other words for them.

Names (``VERBS``, ``NOUNS``, ``ATTRIBUTES``). The corpus names its invented and disguised tools
with real English words (``fetch_parcel_status``), not invented syllables: a model trained on
syllable names learnt what such names look like and wrote one of its own (``search_Galsh``)
instead of copying the offered name. Names made of real words look like the names the evaluations
offer, and there are too many of them to guess, so the one offered has to be read and copied.

Other words (``VERB_WORDS``, ``NOUN_WORDS``). When a request always says a tool's own verb and noun
("book the parcel" for ``book_parcel``), choosing the tool is matching a request word to a name
word, and a build learns exactly that: it chooses well on its own corpus and no better than
counting shared words on the evaluations' requests, which say what they want in other words
("what did that hotel charge me" for ``get_invoice``). So a small thesaurus of the verbs and nouns,
written as everyday English, lets a request "call off the packet" of a tool named
``cancel_parcel``. The corpus uses it two ways (:func:`recipes.reader.corpus.invented_document`):
the request says other words and the description says them too ("Use this to cancel a parcel
(a packet).": the choice is read off the schema), or only the request does (the model must know
that a packet is a parcel). :func:`request_words` picks words that tell the wanted tool from every
other offered one.

Left out on purpose: the words of the unseen-domains task file (a veterinary clinic, a library, a
lab's equipment), so that file stays a domain the corpus has never shown; no generated name may
contain a held-out tool's name (:func:`allowed_name`), and no other word is a word of a held-out
tool's name (``track``, ``package``, ``lock``, ...), so what the corpus teaches never names a tool
the evaluations hold out.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable

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


# Each verb of VERBS: verb phrases a request says instead, each fitting "Please {v} the
# parcel" and "I need to {v} my parcel".
VERB_WORDS: dict[str, tuple[str, ...]] = {
    "get": ("pull up", "bring up", "obtain"),
    "find": ("look for", "seek out", "locate", "hunt down"),
    "check": ("look over", "inspect", "go over", "examine"),
    "create": ("make", "set up", "put together", "draw up"),
    "update": ("change", "edit", "modify", "revise", "amend"),
    "list": ("enumerate", "go through", "run through", "itemize"),
    "cancel": ("call off", "scrap", "abort", "scrub"),
    "book": ("secure", "line up", "take"),
    "send": ("mail", "dispatch", "forward", "post off"),
    "search": ("browse", "scan", "look through", "comb through"),
    "set": ("adjust", "configure", "fix", "put"),
    "add": ("include", "append", "insert", "put in"),
    "fetch": ("retrieve", "grab", "download"),
    "remove": ("take away", "take out", "drop", "clear"),
    "delete": ("erase", "wipe", "get rid of", "discard"),
    "schedule": ("plan", "arrange", "slot in", "pencil in"),
    "submit": ("hand in", "file", "turn in", "lodge"),
    "open": ("unfold", "unseal", "crack open"),
    "close": ("shut", "wrap up", "seal"),
    "start": ("begin", "kick off", "fire up", "launch"),
    "stop": ("halt", "pause", "end", "freeze"),
    "assign": ("allocate", "hand over", "give out", "delegate"),
    "approve": ("accept", "sign off on", "authorize", "okay"),
    "reject": ("decline", "turn down", "refuse", "deny"),
    "archive": ("store away", "file away", "shelve", "put away"),
    "rename": ("retitle", "relabel", "give a new name to"),
    "move": ("relocate", "shift", "carry over"),
    "register": ("sign up", "enrol", "enter", "record"),
    "view": ("see", "display", "look at", "peek at"),
    "lookup": ("look up", "consult", "query", "dig up"),
    "calculate": ("compute", "work out", "figure out", "tally"),
    "estimate": ("approximate", "guess", "gauge", "ballpark"),
    "request": ("ask for", "apply for", "put in for", "seek"),
    "confirm": ("reconfirm", "make sure of", "affirm", "validate"),
    "share": ("pass on", "send around", "circulate", "distribute"),
    "reserve": ("hold", "save", "put aside", "earmark"),
    "order": ("buy", "purchase", "get hold of", "pick up"),
    "rate": ("score", "judge", "evaluate"),
    "count": ("tally up", "total", "add up", "number"),
    "export": ("save out", "output", "dump", "extract"),
}

# Nouns of NOUNS a request may name otherwise; a noun not here is always said as itself.
NOUN_WORDS: dict[str, tuple[str, ...]] = {
    "parcel": ("packet", "parcel post item"),
    "shipment": ("freight", "cargo"),
    "invoice": ("statement of charges", "billing statement"),
    "receipt": ("proof of purchase", "sales slip"),
    "ticket": ("pass", "stub"),
    "project": ("undertaking", "initiative"),
    "task": ("chore", "to-do", "job"),
    "meeting": ("get-together", "sync", "call"),
    "contract": ("agreement", "deal"),
    "employee": ("staff member", "worker", "hire"),
    "candidate": ("applicant", "nominee"),
    "interview": ("screening", "hiring talk"),
    "shift": ("rota slot", "work period"),
    "payslip": ("pay stub", "salary slip"),
    "expense": ("outlay", "spending"),
    "budget": ("spending plan", "allowance"),
    "subscription": ("membership plan", "recurring plan"),
    "playlist": ("mix", "song list"),
    "song": ("tune", "number"),
    "album": ("record", "LP"),
    "podcast": ("audio show", "talk show"),
    "episode": ("instalment", "installment"),
    "movie": ("film", "picture"),
    "channel": ("station", "stream"),
    "post": ("entry", "posting"),
    "comment": ("remark", "reply"),
    "photo": ("picture", "snapshot", "pic"),
    "garden": ("yard", "plot"),
    "plant": ("shrub", "flower"),
    "seed": ("kernel", "seedling"),
    "harvest": ("crop", "yield"),
    "field": ("paddock", "meadow"),
    "vehicle": ("car", "motor"),
    "tire": ("tyre", "wheel"),
    "parking": ("parking spot", "parking space"),
    "route": ("path", "itinerary", "way"),
    "trip": ("journey", "outing", "excursion"),
    "ride": ("lift", "pickup"),
    "driver": ("chauffeur", "motorist"),
    "bike": ("bicycle", "cycle"),
    "cabin": ("cottage", "hut", "lodge"),
    "apartment": ("flat", "unit"),
    "lease": ("rental agreement", "tenancy"),
    "tenant": ("renter", "occupant", "lodger"),
    "property": ("real estate", "premises"),
    "listing": ("advert", "ad"),
    "mortgage": ("home financing", "house debt"),
    "policy": ("insurance cover", "coverage"),
    "claim": ("insurance claim", "compensation request"),
    "quote": ("estimate of cost", "price offer"),
    "course": ("class", "programme", "module"),
    "lesson": ("session", "tutorial"),
    "exam": ("test", "assessment"),
    "grade": ("mark", "result"),
    "student": ("pupil", "learner"),
    "teacher": ("instructor", "tutor"),
    "homework": ("assignment", "coursework"),
    "workshop": ("seminar", "hands-on class"),
    "match": ("fixture", "game day"),
    "team": ("squad", "crew", "side"),
    "player": ("athlete", "competitor"),
    "league": ("division", "conference"),
    "tournament": ("championship", "cup"),
    "workout": ("exercise session", "training session"),
    "gym": ("fitness centre", "health club"),
    "coach": ("trainer", "mentor"),
    "race": ("sprint", "run"),
    "server": ("host", "machine"),
    "deployment": ("rollout", "release"),
    "repository": ("repo", "codebase"),
    "alert": ("warning", "notification"),
    "incident": ("outage", "problem"),
    "backup": ("snapshot copy", "restore point"),
    "certificate": ("cert", "credential"),
    "password": ("passcode", "login secret"),
    "device": ("gadget", "appliance"),
    "router": ("wifi hub", "modem"),
    "sensor": ("detector", "probe"),
    "meter": ("gauge", "counter"),
    "battery": ("cell", "power pack"),
    "warehouse": ("depot", "storehouse"),
    "supplier": ("vendor", "provider"),
    "inventory": ("stock list", "stockroom count"),
    "product": ("item", "article", "merchandise"),
    "discount": ("markdown", "price cut"),
    "coupon": ("voucher", "promo code"),
    "gift": ("present", "gift item"),
    "donation": ("contribution", "gift of money"),
    "campaign": ("drive", "push"),
    "newsletter": ("bulletin", "mailing"),
    "survey": ("questionnaire", "poll"),
    "feedback": ("input", "opinions"),
    "review": ("write-up", "critique"),
    "badge": ("pin", "emblem"),
    "member": ("subscriber", "participant"),
    "guest": ("visitor", "attendee"),
    "venue": ("hall", "location for events"),
    "concert": ("gig", "show"),
    "festival": ("fair", "carnival"),
    "exhibit": ("display", "showcase"),
    "gallery": ("art space", "showroom"),
    "tour": ("guided visit", "sightseeing trip"),
    "trail": ("footpath", "hiking path"),
    "campsite": ("campground", "pitch"),
    "boat": ("vessel", "yacht"),
    "marina": ("yacht basin", "boat harbour"),
    "dock": ("pier", "jetty", "wharf"),
    "harbor": ("port", "harbour"),
    "flight": ("plane trip", "air ticket"),
    "hotel": ("inn", "lodging", "place to stay"),
    "room": ("chamber", "suite"),
    "table": ("seating", "spot to eat"),
    "menu": ("bill of fare", "food list"),
    "dish": ("meal", "plate"),
    "order": ("purchase", "purchase order"),
    "delivery": ("drop-off", "dropoff"),
    "courier": ("messenger", "delivery rider"),
    "mailbox": ("postbox", "letterbox"),
    "letter": ("mail", "written message"),
    "document": ("paper", "doc"),
    "folder": ("directory", "binder"),
    "file": ("attachment", "upload"),
    "spreadsheet": ("sheet", "workbook"),
    "chart": ("graph", "diagram", "plot"),
    "dashboard": ("overview screen", "control panel"),
    "metric": ("measure", "indicator", "KPI"),
    "goal": ("target", "objective", "aim"),
    "habit": ("routine", "practice"),
    "journal": ("diary", "log"),
    "note": ("memo", "jotting"),
    "recipe": ("cooking instructions", "how-to for a dish"),
    "grocery": ("food shopping", "supermarket item"),
    "pantry": ("larder", "cupboard"),
    "fridge": ("refrigerator", "cooler"),
    "heater": ("radiator", "space heater"),
    "fan": ("ventilator", "air blower"),
    "camera": ("cam", "webcam"),
    "doorbell": ("bell", "buzzer"),
    "alarm": ("siren", "wake-up call"),
    "account": ("profile", "login"),
    "wallet": ("purse", "e-wallet"),
    "donor": ("benefactor", "contributor"),
    "payment": ("remittance", "settlement"),
    "transfer": ("wire", "bank move"),
    "refund": ("reimbursement", "money back"),
    "charge": ("fee", "debit"),
    "bill": ("statement", "tab"),
    "tax": ("levy", "duty"),
    "pension": ("retirement fund", "retirement plan"),
    "vote": ("ballot", "poll vote"),
    "petition": ("appeal", "signature drive"),
    "permit": ("authorisation", "pass"),
    "license": ("licence", "certification"),
    "passport": ("travel document", "travel ID"),
    "visa": ("entry permit", "travel permit"),
    "agenda": ("schedule of items", "running order"),
    "calendar": ("planner", "diary of dates"),
    "checklist": ("to-do list", "tick list"),
    "timer": ("countdown", "stopwatch"),
    "clock": ("watch", "time display"),
    "forecast": ("outlook", "prediction"),
    "storm": ("gale", "tempest"),
    "river": ("stream", "creek"),
    "lake": ("pond", "reservoir"),
    "forest": ("woods", "woodland"),
    "satellite": ("orbiter", "space probe"),
    "robot": ("bot", "android"),
    "drone": ("quadcopter", "UAV"),
    "game": ("match-up", "play session"),
    "puzzle": ("riddle", "brain teaser"),
    "quiz": ("trivia", "test of knowledge"),
    "lottery": ("raffle", "draw"),
    "auction": ("sale by bidding", "bidding sale"),
    "bid": ("offer", "tender"),
    "artwork": ("piece of art", "painting"),
    "sculpture": ("statue", "carving"),
    "poem": ("verse", "rhyme"),
    "story": ("tale", "narrative"),
    "chapter": ("section", "part"),
    "script": ("screenplay", "lines"),
    "recording": ("audio clip", "tape"),
    "translation": ("rendering in another language", "version in another language"),
    "glossary": ("word list", "vocabulary"),
    "dictionary": ("lexicon", "wordbook"),
    "keyword": ("search term", "key phrase"),
    "tag": ("hashtag", "marker"),
    "label": ("name tag", "tag line"),
    "sticker": ("decal", "adhesive label"),
    "poster": ("placard", "wall print"),
    "banner": ("streamer", "header image"),
}


def say_noun(noun: str, rng: random.Random) -> str:
    """Another word for a noun phrase's head noun (``"budget parcel"`` → ``"budget packet"``),
    or the phrase itself when the lexicon has none."""
    *before, head = noun.split()
    others = NOUN_WORDS.get(head)
    return " ".join([*before, rng.choice(others)]) if others else noun


def _meanings(phrase: str, of_verb: bool) -> set[str]:
    """Every corpus word ``phrase`` may stand for: itself, its head noun, and each word it is
    another word for (a noun phrase by its ending: ``"status header image"`` is a banner)."""
    if of_verb:
        return {phrase, *(verb for verb, others in VERB_WORDS.items() if phrase in others)}
    ends = {" ".join(phrase.split()[start:]) for start in range(len(phrase.split()))}
    return {phrase, phrase.split()[-1], *(noun for noun, others in NOUN_WORDS.items() if ends & set(others))}


def names_tool(verb_said: str, noun_said: str, verb: str, noun: str) -> bool:
    """Whether a request saying ``verb_said`` and ``noun_said`` could mean a tool that ``verb``s a ``noun``."""
    noun_head = noun.split()[-1]
    nouns = _meanings(noun_said, of_verb=False)
    return (noun in nouns or noun_head in nouns) and verb in _meanings(verb_said, of_verb=True)


def noun_could_mean(noun_said: str, noun: str) -> bool:
    """Whether a request's ``noun_said`` could stand for ``noun`` (either head noun, any of its other words)."""
    return bool(_meanings(noun_said, of_verb=False) & {noun, noun.split()[-1]})


def request_words(
    verb: str, noun: str, others: Iterable[tuple[str, str]], rng: random.Random, tries: int = 8
) -> tuple[str, str]:
    """``(verb phrase, noun phrase)`` in other words for a tool that ``verb``s a ``noun``, chosen so
    that no tool of ``others`` (their ``(verb, noun)``) could be meant by them: the noun alone tells
    the tool where it can; where a sibling acts on the same noun (a near miss), the verb tells it.
    Words the lexicon lacks, or that would be ambiguous, are said as themselves."""
    others = [pair for pair in others if pair != (verb, noun)]

    def noun_tells(noun_said: str) -> bool:
        return not any(noun_could_mean(noun_said, other) for _, other in others)

    def pair_tells(verb_said: str, noun_said: str) -> bool:
        return not any(names_tool(verb_said, noun_said, v, n) for v, n in others)

    verb_said = rng.choice(VERB_WORDS.get(verb, (verb,)))
    for _ in range(tries):
        noun_said = say_noun(noun, rng)
        if noun_tells(noun_said):
            return verb_said, noun_said
    if noun_tells(noun):
        return verb_said, noun
    return (verb_said, noun) if pair_tells(verb_said, noun) else (verb, noun)
