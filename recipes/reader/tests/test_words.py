"""Other words for a tool's verb and noun: the lexicon stays clear of held-out words, and the words
a request says always mean the wanted tool and never another offered one."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from recipes.reader.invented_tools import invented_tool
from recipes.reader.words import (
    FORBIDDEN_WORDS,
    NOUN_WORDS,
    NOUNS,
    VERB_WORDS,
    VERBS,
    names_tool,
    noun_could_mean,
    request_words,
    say_noun,
)
from slca_grpo.data.synthetic import DEFAULT_HELDOUT_TOOLS


def test_every_verb_has_other_words_and_every_entry_is_a_corpus_noun() -> None:
    assert set(VERB_WORDS) == set(VERBS)
    assert set(NOUN_WORDS) <= set(NOUNS) and len(NOUN_WORDS) >= 0.8 * len(NOUNS)
    for word, others in (*VERB_WORDS.items(), *NOUN_WORDS.items()):
        assert others and word not in others and len(set(others)) == len(others), word


def test_the_lexicon_leaves_out_unseen_domain_and_held_out_tool_words() -> None:
    """What the corpus teaches about other words never reaches a held-out tool or the unseen domains."""
    held_out = {word for name in DEFAULT_HELDOUT_TOOLS for word in name.split("_")} - set(VERBS)
    assert {"package", "lock", "door", "sunrise", "reminder"} <= held_out
    words = {w for others in (*VERB_WORDS.values(), *NOUN_WORDS.values()) for p in others for w in p.lower().split()}
    assert not words & (held_out | FORBIDDEN_WORDS)


def test_say_noun_changes_only_the_head_noun() -> None:
    rng = random.Random(0)
    assert say_noun("budget parcel", rng).startswith("budget ")
    assert say_noun("budget parcel", rng).split(" ", 1)[1] in NOUN_WORDS["parcel"]
    assert say_noun("volcano", rng) == "volcano"  # no other words for it: said as itself


def test_meanings_by_hand() -> None:
    assert names_tool("call off", "packet", "cancel", "parcel")
    assert names_tool("cancel", "budget packet", "cancel", "budget parcel")
    assert not names_tool("call off", "packet", "book", "parcel")
    assert not names_tool("call off", "invoice", "cancel", "parcel")
    # "picture" is another word for a photo and for a movie: it could mean either.
    assert noun_could_mean("picture", "photo") and noun_could_mean("picture", "movie")
    assert not noun_could_mean("picture", "parcel")


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 2**31), st.integers(2, 6), st.booleans())
def test_the_words_mean_the_wanted_tool_and_no_other(seed: int, count: int, share_noun: bool) -> None:
    rng = random.Random(seed)
    taken: set[str] = set()
    tools = [invented_tool(rng, taken, readable=True)]
    while len(tools) < count:
        # Near misses too: a sibling on the same noun is told only by the verb.
        noun = tools[0].noun if share_noun and len(tools) == 1 else None
        verb = rng.choice([v for v in VERBS if v != tools[0].verb]) if noun else None
        tools.append(invented_tool(rng, taken, readable=True, noun=noun, verb=verb))
    pairs = [(t.verb, t.noun) for t in tools]
    for verb, noun in pairs:
        others = [(v, n) for v, n in pairs if (v, n) != (verb, noun)]
        verb_said, noun_said = request_words(verb, noun, pairs, rng)
        assert names_tool(verb_said, noun_said, verb, noun)
        if any(names_tool(verb, noun, v, n) for v, n in others):
            # Its own words already fit a sibling ("reserve the kind report" beside "reserve the
            # report"): no other words can do better, so it keeps its own.
            assert (verb_said, noun_said) == (verb, noun)
            continue
        assert not any(names_tool(verb_said, noun_said, v, n) for v, n in others)


def test_a_tool_whose_own_words_fit_a_sibling_keeps_them() -> None:
    pairs = [("reserve", "kind report"), ("reserve", "report")]
    for seed in range(20):
        assert request_words("reserve", "kind report", pairs, random.Random(seed)) == ("reserve", "kind report")
