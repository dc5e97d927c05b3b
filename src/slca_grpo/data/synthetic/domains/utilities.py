"""Utility tools: translation, world clock and timers."""

from __future__ import annotations

import random

from slca_grpo.data.synthetic.spec import (
    INT,
    STR,
    Args,
    CatalogueTool,
    ChainSpec,
    Response,
    closed,
    integer,
    maybe,
    obj,
    string,
)
from slca_grpo.data.synthetic.values import CITY_BY_NAME, CITY_NAMES, ValuePool, make_id, pick, pick_distinct

LANGUAGES = ("English", "French", "Spanish", "German", "Italian", "Portuguese")
# Real translations, so the fabricated responses are correct ones.
TRANSLATIONS: dict[str, dict[str, str]] = {
    "Where is the train station?": {
        "French": "Où est la gare ?",
        "Spanish": "¿Dónde está la estación de tren?",
        "German": "Wo ist der Bahnhof?",
        "Italian": "Dov'è la stazione dei treni?",
        "Portuguese": "Onde fica a estação de trem?",
    },
    "Thank you very much": {
        "French": "Merci beaucoup",
        "Spanish": "Muchas gracias",
        "German": "Vielen Dank",
        "Italian": "Grazie mille",
        "Portuguese": "Muito obrigado",
    },
    "I would like a coffee, please": {
        "French": "Je voudrais un café, s'il vous plaît",
        "Spanish": "Quisiera un café, por favor",
        "German": "Ich hätte gern einen Kaffee, bitte",
        "Italian": "Vorrei un caffè, per favore",
        "Portuguese": "Eu gostaria de um café, por favor",
    },
    "How much does this cost?": {
        "French": "Combien ça coûte ?",
        "Spanish": "¿Cuánto cuesta esto?",
        "German": "Wie viel kostet das?",
        "Italian": "Quanto costa questo?",
        "Portuguese": "Quanto custa isso?",
    },
    "Good morning": {
        "French": "Bonjour",
        "Spanish": "Buenos días",
        "German": "Guten Morgen",
        "Italian": "Buongiorno",
        "Portuguese": "Bom dia",
    },
    "The meeting starts at noon": {
        "French": "La réunion commence à midi",
        "Spanish": "La reunión empieza al mediodía",
        "German": "Das Meeting beginnt um zwölf Uhr",
        "Italian": "La riunione inizia a mezzogiorno",
        "Portuguese": "A reunião começa ao meio-dia",
    },
    "Can I have the bill, please?": {
        "French": "Puis-je avoir l'addition, s'il vous plaît ?",
        "Spanish": "¿Me trae la cuenta, por favor?",
        "German": "Kann ich bitte die Rechnung haben?",
        "Italian": "Posso avere il conto, per favore?",
        "Portuguese": "Pode me trazer a conta, por favor?",
    },
    "Where is the nearest pharmacy?": {
        "French": "Où est la pharmacie la plus proche ?",
        "Spanish": "¿Dónde está la farmacia más cercana?",
        "German": "Wo ist die nächste Apotheke?",
        "Italian": "Dov'è la farmacia più vicina?",
        "Portuguese": "Onde fica a farmácia mais próxima?",
    },
    "I don't understand": {
        "French": "Je ne comprends pas",
        "Spanish": "No entiendo",
        "German": "Ich verstehe nicht",
        "Italian": "Non capisco",
        "Portuguese": "Eu não entendo",
    },
    "Do you speak English?": {
        "French": "Parlez-vous anglais ?",
        "Spanish": "¿Habla usted inglés?",
        "German": "Sprechen Sie Englisch?",
        "Italian": "Parla inglese?",
        "Portuguese": "Você fala inglês?",
    },
    "I have a reservation": {
        "French": "J'ai une réservation",
        "Spanish": "Tengo una reserva",
        "German": "Ich habe eine Reservierung",
        "Italian": "Ho una prenotazione",
        "Portuguese": "Eu tenho uma reserva",
    },
    "What time does the museum open?": {
        "French": "À quelle heure ouvre le musée ?",
        "Spanish": "¿A qué hora abre el museo?",
        "German": "Wann öffnet das Museum?",
        "Italian": "A che ora apre il museo?",
        "Portuguese": "A que horas abre o museu?",
    },
}
# The phrases a request asks for, split by position; the phrase book above answers any of them.
PHRASES: ValuePool[str] = ValuePool(TRANSLATIONS)
TIMER_LABELS: ValuePool[str] = ValuePool(
    (
        "pasta",
        "laundry",
        "tea",
        "break",
        "oven",
        "parking meter",
        "bread dough",
        "homework",
        "nap",
        "pizza",
        "meditation",
        "cookies",
    )
)


# --- translate_text ---


def _translate_args(rng: random.Random) -> Args:
    text = pick(rng, PHRASES)
    args: Args = {"text": text, "target_language": pick(rng, LANGUAGES[1:])}
    if maybe(rng, 0.25):
        args["source_language"] = "English"
    return args


def _translate_respond(args: Args, rng: random.Random) -> Response:
    target = str(args["target_language"])
    known = TRANSLATIONS.get(str(args["text"]), {})
    # Text outside the phrase book (a simulated call) comes back tagged rather than invented.
    translated = known.get(target, f"[{target}] {args['text']}")
    return {
        "translated_text": translated,
        "source_language": args.get("source_language", "English"),
        "target_language": target,
    }


def _translate_summary(args: Args, r: Response) -> str:
    return f'In {r["target_language"]}, "{args["text"]}" is "{r["translated_text"]}".'


# --- get_local_time ---


def _time_args(rng: random.Random) -> Args:
    return {"city": pick(rng, CITY_NAMES)}


def _offset_text(hours: float) -> str:
    sign = "+" if hours >= 0 else "-"
    whole, minutes = divmod(round(abs(hours) * 60), 60)
    return f"{sign}{whole:02d}:{minutes:02d}"


def _time_respond(args: Args, rng: random.Random) -> Response:
    city = CITY_BY_NAME.get(str(args["city"]))
    timezone = city.timezone if city else "UTC"
    offset = city.utc_offset if city else 0.0
    return {
        "city": args["city"],
        "timezone": timezone,
        "utc_offset": _offset_text(offset),
        "local_time": f"{rng.randrange(24):02d}:{rng.randrange(60):02d}",
    }


def _time_summary(args: Args, r: Response) -> str:
    return f"It is {r['local_time']} in {r['city']} ({r['timezone']}, UTC{r['utc_offset']})."


# --- set_timer ---


def _timer_args(rng: random.Random) -> Args:
    args: Args = {"minutes": pick(rng, (3, 5, 10, 12, 15, 20, 25, 30, 45, 60, 90))}
    if maybe(rng, 0.5):
        args["label"] = pick(rng, TIMER_LABELS)
    return args


def _timer_respond(args: Args, rng: random.Random) -> Response:
    return {
        "timer_id": make_id("TM-", rng),
        "minutes": args["minutes"],
        "label": args.get("label", "timer"),
        "status": "running",
    }


def _timer_summary(args: Args, r: Response) -> str:
    return f'A {r["minutes"]}-minute timer "{r["label"]}" is running (timer {r["timer_id"]}).'


_LANGUAGE = {"type": "string", "enum": list(LANGUAGES)}

TOOLS = (
    CatalogueTool(
        name="translate_text",
        domain="utilities",
        description="Translate a short text into another language.",
        parameters=obj(
            {
                "text": string("Text to translate"),
                "target_language": dict(_LANGUAGE, description="Language to translate into"),
                "source_language": dict(_LANGUAGE, description="Language of the text (detected if omitted)"),
            },
            required=("text", "target_language"),
        ),
        returns=closed({"translated_text": STR, "source_language": STR, "target_language": STR}),
        capability="translate text",
        sample_args=_translate_args,
        respond=_translate_respond,
        summarize=_translate_summary,
        train_phrasings=(
            'How do you say "{text}" in {target_language}?',
            'Translate "{text}"[ from {source_language}] into {target_language}.',
            'What is "{text}" in {target_language}?',
            'Can you put "{text}" into {target_language}[ (it\'s {source_language})]?',
        ),
        test_phrasings=(
            'I\'m travelling and need to say "{text}" in {target_language}. Help?',
            'Render this[ {source_language}] phrase in {target_language}: "{text}"',
        ),
        parallel_slot="target_language",
        parallel_values=lambda rng, n, base: pick_distinct(rng, LANGUAGES[1:], n),
    ),
    CatalogueTool(
        name="get_local_time",
        domain="utilities",
        description="Get the current local time and time zone of a city.",
        parameters=obj({"city": string("City name")}, required=("city",)),
        returns=closed({"city": STR, "timezone": STR, "utc_offset": STR, "local_time": STR}),
        capability="tell the local time in a city",
        sample_args=_time_args,
        respond=_time_respond,
        summarize=_time_summary,
        train_phrasings=(
            "What time is it in {city}?",
            "Tell me the local time in {city}.",
            "What's the time zone and current time in {city}?",
        ),
        test_phrasings=(
            "Is it too late to call someone in {city} right now? What's the clock there?",
            "Current hour over in {city}, please.",
        ),
        parallel_slot="city",
        parallel_values=lambda rng, n, base: pick_distinct(rng, CITY_NAMES, n),
    ),
    CatalogueTool(
        name="set_timer",
        domain="utilities",
        description="Start a countdown timer.",
        parameters=obj(
            {"minutes": integer("Duration in minutes", minimum=1, maximum=720), "label": string("Name of the timer")},
            required=("minutes",),
        ),
        returns=closed({"timer_id": STR, "minutes": INT, "label": STR, "status": STR}),
        capability="set timers",
        sample_args=_timer_args,
        respond=_timer_respond,
        summarize=_timer_summary,
        train_phrasings=(
            "Set a timer for {minutes} minutes[ called {label}].",
            "Start a {minutes}-minute timer[ for the {label}].",
            "Timer, {minutes} minutes[, label it {label}].",
        ),
        test_phrasings=(
            "Count down {minutes} minutes for me[; it's for the {label}].",
            "Ring me in {minutes} minutes[ about the {label}].",
        ),
    ),
)

CHAINS: tuple[ChainSpec, ...] = ()
