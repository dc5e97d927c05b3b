"""The pretraining corpus of the shipped "reader" model: documents where reading is what pays.

Every document is a ChatML conversation (the format the model will be used in), drawn from its own
``random.Random`` seeded by ``(seed, index)``, so document ``i`` is the same text in any process.
Every document that offers tools offers tools the model cannot have memorised
(:mod:`recipes.reader.invented_tools`), 2-5 of them as the evaluations do, so choosing a tool and
filling its arguments can only be learnt by reading the schema in the prompt:

- ``task``: a gold trajectory of a fresh *train-split* synthetic task (natural phrasings, the five
  task kinds) with its tools *disguised*: every tool renamed, mostly by words of its own description
  (``get_weather_forecast`` → ``get_daily_weather``), never to a name that holds a catalogue
  tool's, about half of the parameters too, descriptions kept, shown as prompts show tools (no
  ``returns`` schema). Its values are made fresh: strings from the suite's value
  pools become invented words, ids and codes get new characters of the same shape, all dates and
  times of the task are shifted together (so durations and check-out dates stay consistent).
- ``invented``: a request for invented tools (real-word nouns and names, descriptions, parameter
  labels and names, types, enums, nested objects, arrays, optional parameters): one call, two
  parallel calls, two steps where the second copies an id from the first one's response, or a
  polite refusal when no tool fits. Most requests say the tool's verb and noun in other words
  (:data:`PARAPHRASE`).
- ``drill``: several short exchanges that exercise copying on its own: repeat a value, pick one of
  several named values, fill a JSON object from a list, convert a spelt-out date or a 12-hour time.

Only the train split's tools, phrasings and value pools are used; the test split's never appear
(``recipes/reader/tests/test_corpus.py`` checks the text), so held-out evaluation stays held out.

This is corpus v6, the one corpus the recipe builds. Earlier corpora (v3-v5: other tool names,
catalogue names, tools' ``returns`` schemas, requests in the tools' own words; the near-miss
variant) were switches of ``CorpusConfig``; they are in git history.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
from dataclasses import dataclass
from typing import Any

from recipes.reader.invented_tools import (
    InventedTool,
    Param,
    disguise,
    fresh_code,
    invented_tool,
    invented_word,
    random_code,
    random_value,
)
from recipes.reader.words import NOUN_WORDS, request_words, snake
from slca_grpo.chat.formatter import prompt_tools
from slca_grpo.chat.template import render_chat
from slca_grpo.data.synthetic import DEFAULT_KIND_WEIGHTS, SuiteConfig, generate_tasks, gold_messages
from slca_grpo.data.synthetic.leaks import argument_strings, schema_enum_values
from slca_grpo.data.synthetic.values import MONTHS

KINDS = ("task", "drill", "invented")
# Corpus v6: half invented-tool documents, a quarter task documents (0.4 / 0.35 in v5): the task
# documents keep the train catalogue's descriptions and phrasings, and a build learnt to recall
# which request goes with which description rather than to read (docs/models.md).
DEFAULT_MIX = {"task": 0.25, "drill": 0.25, "invented": 0.5}
# The first documents lean on drills: copying is learnt first, on short copy-dense text, and the
# tasks' long tool schemas come after (a curriculum for the induction circuit).
# By tokens (task ~1,040, invented ~730, drill ~350 a document) this warm-up is 79 % drills, as the
# shipped build's was (~80 %); at drill 0.75 / invented 0.2 it was 57 %, and copying did not form
# by step 800 (docs/models.md).
WARMUP_MIX = {"task": 0.03, "drill": 0.9, "invented": 0.07}
# Five tools make the longest documents (~1,800 tokens); more would not fit a 2,048-token row.
MAX_TOOLS_PER_DOCUMENT = 6
# The share of invented-tool requests that say the tool's verb and noun in other words ("call off
# the packet" for ``cancel_parcel``; :mod:`recipes.reader.words`), and of offered tools whose
# description also names their noun in other words, so that a request is matched to a tool by
# meaning, not by the name's own words.
PARAPHRASE = 0.7

_KEEP_WORDS = frozenset({"a", "an", "the", "of", "with", "and", "to", "in", "on", "at", "for", "my", "by", "from"})
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTH_NAMES = "|".join(MONTHS)
_LONG_DATE = re.compile(rf"\b({_MONTH_NAMES}) (\d{{1,2}}), (\d{{4}})\b")
_DAY_MONTH_DATE = re.compile(rf"\b(\d{{1,2}}) ({_MONTH_NAMES}) (\d{{4}})\b")
_CLOCK_12 = re.compile(r"\b(\d{1,2}):(\d{2}) (am|pm)\b")
_CLOCK_24 = re.compile(r"(?<![\d:])([01]\d|2[0-3]):([0-5]\d)(?![\d:])")
_ANY_DATE_OR_TIME = re.compile(
    "|".join(p.pattern for p in (_ISO_DATE, _LONG_DATE, _DAY_MONTH_DATE, _CLOCK_12, _CLOCK_24))
)


@dataclass(frozen=True)
class CorpusConfig:
    """What the corpus holds: the mix of document kinds and the synthetic tasks' shape."""

    seed: int = 0
    mix: tuple[tuple[str, float], ...] = tuple(DEFAULT_MIX.items())
    warmup_mix: tuple[tuple[str, float], ...] = tuple(WARMUP_MIX.items())
    warmup_docs: int = 30000
    tools_per_task: tuple[int, int] = (2, 5)

    def __post_init__(self) -> None:
        for name in ("mix", "warmup_mix"):
            mix = getattr(self, name)
            mix = tuple((str(k), float(w)) for k, w in (mix.items() if isinstance(mix, dict) else mix))
            object.__setattr__(self, name, mix)
            unknown = sorted({kind for kind, _ in mix} - set(KINDS))
            if unknown:
                raise ValueError(f"unknown corpus document kind(s) {unknown} in {name}; kinds are {list(KINDS)}")
            if any(weight < 0 for _, weight in mix) or sum(weight for _, weight in mix) <= 0:
                raise ValueError(f"corpus {name} weights must be non-negative with a positive sum, got {dict(mix)}")
        object.__setattr__(self, "tools_per_task", tuple(self.tools_per_task))
        low, high = self.tools_per_task
        if not 1 <= low <= high <= MAX_TOOLS_PER_DOCUMENT:
            raise ValueError(
                f"corpus tools_per_task must satisfy 1 <= low <= high <= {MAX_TOOLS_PER_DOCUMENT} "
                f"(documents must fit a 2,048-token row), got {self.tools_per_task}"
            )


def _fresh_words(value: str, rng: random.Random) -> str:
    """The same words' shape with invented words: ``"Lunch with the landlord"`` → ``"Pemol with the tusavork"``."""

    def swap(match: re.Match[str]) -> str:
        word = match.group(0)
        if word.lower() in _KEEP_WORDS or len(word) < 2:
            return word
        return invented_word(rng, max(3, min(10, len(word) + rng.randint(-2, 2))), capital=word[0].isupper())

    return re.sub(r"[A-Za-zÀ-ÿ]+", swap, value)


def _is_code(value: str) -> bool:
    return bool(re.search(r"[\d@]", value)) or bool(re.fullmatch(r"[A-Z]{2,6}", value))


def _shift_dates_and_times(text: str, days: int, minutes: int) -> str:
    """Every date moved by ``days`` and every clock time by ``minutes``, each in its own written form."""

    def date(year: int, month: int, day: int) -> dt.date | None:
        try:
            return dt.date(year, month, day) + dt.timedelta(days=days)
        except (ValueError, OverflowError):
            return None

    def iso(match: re.Match[str]) -> str:
        moved = date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
        return moved.isoformat() if moved else match.group(0)

    def long(match: re.Match[str]) -> str:
        moved = date(int(match.group(3)), MONTHS.index(match.group(1)) + 1, int(match.group(2)))
        return f"{MONTHS[moved.month - 1]} {moved.day}, {moved.year}" if moved else match.group(0)

    def day_month(match: re.Match[str]) -> str:
        moved = date(int(match.group(3)), MONTHS.index(match.group(2)) + 1, int(match.group(1)))
        return f"{moved.day} {MONTHS[moved.month - 1]} {moved.year}" if moved else match.group(0)

    def clock(hours: int, mins: int) -> tuple[int, int]:
        total = (hours * 60 + mins + minutes) % (24 * 60)
        return total // 60, total % 60

    def twelve(match: re.Match[str]) -> str:
        hours = int(match.group(1)) % 12 + (12 if match.group(3) == "pm" else 0)
        h, m = clock(hours, int(match.group(2)))
        return f"{(h % 12) or 12}:{m:02d} {'am' if h < 12 else 'pm'}"

    def twenty_four(match: re.Match[str]) -> str:
        h, m = clock(int(match.group(1)), int(match.group(2)))
        return f"{h:02d}:{m:02d}"

    # One pass over every form, so a value rewritten in one form is never matched again in another
    # ("2:30 pm" becomes "3:30 pm", whose "3:30" must not move a second time).
    handlers = (
        (_ISO_DATE, iso),
        (_LONG_DATE, long),
        (_DAY_MONTH_DATE, day_month),
        (_CLOCK_12, twelve),
        (_CLOCK_24, twenty_four),
    )

    def any_form(match: re.Match[str]) -> str:
        for pattern, handler in handlers:
            found = pattern.fullmatch(match.group(0))
            if found:
                return handler(found)
        return match.group(0)

    return _ANY_DATE_OR_TIME.sub(any_form, text)


def freshen_task_text(text: str, request: str, values: list[str], enums: set[str], rng: random.Random) -> str:
    """The conversation after the system prompt with the request's values made fresh (see module doc)."""
    replacements: dict[str, str] = {}
    # Longest first (a value inside a longer one is replaced with it); ties in text order, never
    # in set order, which changes with the hash seed of the process.
    for value in sorted(set(values), key=lambda v: (-len(v), v)):
        if value in enums or len(value) < 3 or value not in request:
            continue
        if _ISO_DATE.fullmatch(value) or _CLOCK_24.fullmatch(value):
            continue  # dates and times move with the whole task below
        replacements[value] = fresh_code(value, rng) if _is_code(value) else _fresh_words(value, rng)
    if replacements:
        pattern = re.compile("|".join(rf"(?<!\w){re.escape(v)}(?!\w)" for v in replacements))
        text = pattern.sub(lambda match: replacements[match.group(0)], text)
    return _shift_dates_and_times(text, rng.randint(-2000, 2000), rng.randrange(-48, 48) * 15)


def task_document(rng: random.Random, config: CorpusConfig, split: str = "train") -> str:
    """A gold trajectory of one fresh task of the synthetic suite's ``split`` (the corpus: always
    train), its tools disguised and its values fresh."""
    # One task per call: the kind is drawn here (a one-task schedule would always be the same kind).
    kinds, weights = zip(*DEFAULT_KIND_WEIGHTS.items())
    suite = SuiteConfig(
        kind_weights={rng.choices(kinds, weights=weights)[0]: 1.0}, tools_per_task=config.tools_per_task
    )
    task = generate_tasks(rng.randrange(2**31), 1, split, suite)[0]
    messages, tools = disguise(gold_messages(task), task.tools, rng, readable=True, catalogue_names=False)
    text = render_chat(messages, prompt_tools(tools), add_generation_prompt=False)
    cut = text.index("<|im_start|>user")
    values = [v for call in task.flat_gold_calls for v in argument_strings(call.arguments)]
    return text[:cut] + freshen_task_text(text[cut:], task.question, values, schema_enum_values(task.tools), rng)


# --- drills ---

_KEYS = (
    "name", "city", "title", "code", "reference", "label", "account", "contact", "place", "item", "topic",
    "owner", "venue", "destination", "product", "note", "tag", "subject", "recipient", "location",
)  # fmt: skip


def _exchange(user: str, assistant: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]


def _repeat(rng: random.Random) -> list[dict[str, str]]:
    # One to four values: a long copied span gives the induction circuit a target at every token.
    value = rng.choice((" ", ", ", " / ")).join(random_value(rng) for _ in range(rng.randint(1, 4)))
    ask = rng.choice(("Repeat exactly: {v}", "Say {v} back to me.", "Echo this: {v}", "Write down {v}"))
    return _exchange(ask.format(v=value), value)


def _named_values(rng: random.Random) -> dict[str, str]:
    keys = rng.sample(_KEYS, rng.randint(2, 5))
    return {key: random_value(rng) for key in keys}


def _recall(rng: random.Random) -> list[dict[str, str]]:
    values = _named_values(rng)
    listed = rng.choice(("; ", ", ", "\n")).join(
        f"{k} is {v}" if rng.random() < 0.5 else f"{k}: {v}" for k, v in values.items()
    )
    key = rng.choice(list(values))
    return _exchange(f"{listed}\nWhat is the {key}?", values[key])


def _fill(rng: random.Random) -> list[dict[str, str]]:
    values = _named_values(rng)
    wanted = rng.sample(list(values), rng.randint(1, len(values)))
    listed = ", ".join(f"{k} = {v}" for k, v in values.items())
    answer = json.dumps({key: values[key] for key in wanted}, ensure_ascii=False)
    return _exchange(f"From {listed}, give a JSON object with {', '.join(wanted)}.", answer)


def _convert(rng: random.Random) -> list[dict[str, str]]:
    if rng.random() < 0.6:
        day = dt.date(2020, 1, 1) + dt.timedelta(days=rng.randrange(4000))
        spoken = (
            f"{MONTHS[day.month - 1]} {day.day}, {day.year}"
            if rng.random() < 0.5
            else f"{day.day} {MONTHS[day.month - 1]} {day.year}"
        )
        return _exchange(f"Write {spoken} as YYYY-MM-DD.", day.isoformat())
    hours, mins = rng.randrange(24), rng.randrange(0, 60, 5)
    spoken = f"{(hours % 12) or 12}:{mins:02d} {'am' if hours < 12 else 'pm'}"
    return _exchange(f"Write {spoken} in 24-hour form.", f"{hours:02d}:{mins:02d}")


# One exchange of each kind of drill (``drill(rng) -> [user, assistant]``), and how often each is drawn.
DRILLS = {"repeat": _repeat, "recall": _recall, "fill": _fill, "convert": _convert}
# Filling a JSON object is drawn most: at 0.3 a build copied single values (recall 92 %) and
# answered every fill request with one of them (0 %). That 0 was later traced to the "words"
# pre-tokeniser, which joined the prompt's last newline to the answer's '{' (see "words-nl").
_DRILL_WEIGHTS = (0.2, 0.3, 0.35, 0.15)


def drill_document(rng: random.Random, config: CorpusConfig) -> str:
    """Four to eight copy and conversion exchanges in one conversation."""
    messages: list[dict[str, Any]] = []
    for _ in range(rng.randint(4, 8)):
        messages += rng.choices(tuple(DRILLS.values()), weights=_DRILL_WEIGHTS)[0](rng)
    return render_chat(messages, (), add_generation_prompt=False)


# --- invented tools ---


def _call_turns(
    calls: list[tuple[InventedTool, dict[str, Any]]], rng: random.Random, start: int
) -> list[dict[str, Any]]:
    """One assistant turn making ``calls`` and their tool responses (each echoes its arguments and adds an id)."""
    turn = {"role": "assistant", "content": "", "tool_calls": []}
    responses = []
    for offset, (tool, arguments) in enumerate(calls):
        call_id = f"call_{start + offset}"
        turn["tool_calls"].append(
            {"id": call_id, "type": "function", "function": {"name": tool.name, "arguments": arguments}}
        )
        result = {"status": "ok", tool.noun: {**arguments, "id": random_code(rng)}}
        responses.append({"role": "tool", "tool_call_id": call_id, "name": tool.name, "content": json.dumps(result)})
    return [turn, *responses]


def _words_for_request(tool: InventedTool, offered: list[InventedTool], rng: random.Random) -> tuple[str, str]:
    """How a request says ``tool``'s verb and noun: its own words, or (:data:`PARAPHRASE` of the
    time) other words that no other offered tool could be meant by."""
    if not rng.random() < PARAPHRASE:
        return tool.verb, tool.noun
    return request_words(tool.verb, tool.noun, [(t.verb, t.noun) for t in offered if t is not tool], rng)


def _describe_in_other_words(tool: InventedTool, rng: random.Random) -> None:
    """Add another word for the tool's noun to its description (``"Use this to cancel a parcel
    (a packet)."``): a request that says that word is matched by reading the schema."""
    head = tool.noun.split()[-1]
    if head not in NOUN_WORDS:
        return
    other = rng.choice(NOUN_WORDS[head])
    if rng.random() < 0.5 and tool.noun in tool.description:
        tool.description = tool.description.replace(tool.noun, f"{tool.noun} (a {other})", 1)
    else:
        tool.description += rng.choice((" Also called a {w}.", " Any {w} will do.", " For a {w}.")).format(w=other)


def _ask(details: str, said: tuple[str, str], rng: random.Random) -> str:
    """A request that says a tool's verb and noun as ``said`` (``_words_for_request``)."""
    verb, noun = said
    template = rng.choice(
        (
            "Please {v} the {n} with {d}.",
            "{v} a {n}: {d}",
            "I need to {v} my {n}, {d}.",
            "Could you {v} a {n} for me? Use {d}.",
            "{d} -- {v} that {n}, please.",
        )
    )
    return template.format(v=verb, n=noun, d=details)


def _id_of(message: dict[str, Any], noun: str) -> str:
    return json.loads(message["content"])[noun]["id"]


def invented_document(rng: random.Random, config: CorpusConfig) -> str:
    """A request for invented tools, read off their schemas: one call, parallel calls, two steps or none."""
    taken: set[str] = set()
    low, high = config.tools_per_task
    count = max(2, rng.randint(low, high))
    tools = [invented_tool(rng, taken, readable=True, catalogue_names=False) for _ in range(count)]
    for tool in tools:
        if rng.random() < PARAPHRASE:
            _describe_in_other_words(tool, rng)
    weights = (0.4, 0.2, 0.25, 0.15)
    variant = rng.choices(("single", "parallel", "two_step", "irrelevant"), weights=weights)[0]
    first, second = rng.sample(tools, 2)
    if variant == "irrelevant":
        stranger = invented_tool(rng, taken, readable=True, catalogue_names=False)
        verb, noun = _words_for_request(stranger, tools, rng)
        request = _ask(stranger.request_details(stranger.sample_arguments(rng), rng), (verb, noun), rng)
        answer = rng.choice(
            (
                "Sorry, none of the available tools can {v} a {n}.",
                "I can't {v} a {n} with the tools I have.",
            )
        ).format(v=verb, n=noun)
        messages = [{"role": "user", "content": request}, {"role": "assistant", "content": answer}]
        return render_chat(messages, [t.schema() for t in tools], add_generation_prompt=False)
    arguments = first.sample_arguments(rng)
    first_said = _words_for_request(first, tools, rng)
    request = _ask(first.request_details(arguments, rng), first_said, rng)
    if variant == "single":
        turns = _call_turns([(first, arguments)], rng, 0)
        answer = f"Done: the {first.noun} is {_id_of(turns[1], first.noun)}."
    elif variant == "parallel":
        others = second.sample_arguments(rng)
        request += rng.choice((" Also, ", " And ", " Then also ")) + _ask(
            second.request_details(others, rng), _words_for_request(second, tools, rng), rng
        )
        turns = _call_turns([(first, arguments), (second, others)], rng, 0)
        answer = f"Done: {first.noun} {_id_of(turns[1], first.noun)} and {second.noun} {_id_of(turns[2], second.noun)}."
    else:
        # The second call needs the first one's id: an argument copied from a tool response.
        link = f"{snake(first.noun)}_id"
        second.required.insert(
            0, Param(link, f"{first.noun} id", "code", {"type": "string", "description": f"Id of the {first.noun}"})
        )
        others = second.sample_arguments(rng)
        follow = second.request_details({k: v for k, v in others.items() if k != link}, rng) or "it"
        verb, noun = _words_for_request(second, tools, rng)
        request += f" Then {verb} a {noun} for that {first_said[1]} with {follow}."
        turns = _call_turns([(first, arguments)], rng, 0)
        others[link] = _id_of(turns[1], first.noun)
        turns += _call_turns([(second, others)], rng, 1)
        answer = f"Done: {first.noun} {others[link]}, then {second.noun} {_id_of(turns[3], second.noun)}."
    messages = [
        {"role": "user", "content": request[0].upper() + request[1:]},
        *turns,
        {"role": "assistant", "content": answer},
    ]
    return render_chat(messages, [t.schema() for t in tools], add_generation_prompt=False)


_BUILDERS = {"task": task_document, "drill": drill_document, "invented": invented_document}


def document(index: int, config: CorpusConfig) -> tuple[str, str]:
    """Document ``index`` of the corpus as ``(kind, text)``; the same in any process."""
    rng = random.Random(f"reader-corpus|{config.seed}|{index}")
    kinds, weights = zip(*(config.warmup_mix if index < config.warmup_docs else config.mix))
    kind = rng.choices(kinds, weights=weights)[0]
    return kind, _BUILDERS[kind](rng, config)


def heldout_task_document(index: int, config: CorpusConfig) -> str:
    """A task document as the corpus writes them, of the suite's *test* split: phrasings and
    tools the corpus never shows (never trained on; a probe of reading, not of recall)."""
    return task_document(random.Random(f"reader-heldout|{config.seed}|{index}"), config, split="test")
