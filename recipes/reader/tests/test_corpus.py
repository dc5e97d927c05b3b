"""The reader's pretraining corpus: deterministic, fresh values, and nothing from the test split."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import re
from pathlib import Path

import pytest

from recipes.reader.corpus import (
    CorpusConfig,
    _shift_dates_and_times,
    document,
    freshen_task_text,
)
from recipes.reader.invented_tools import fresh_code
from slca_grpo.data.synthetic import DEFAULT_HELDOUT_TOOLS, generate_tasks, render_gold, value_pools
from slca_grpo.data.synthetic import phrasings as shared_phrasings
from slca_grpo.data.synthetic.catalogue import CHAIN_SPECS, TOOL_SPECS
from slca_grpo.data.synthetic.values import CITY_NAMES, MONTHS

ROOT = Path(__file__).resolve().parents[3]
N_DOCS = 600


@pytest.fixture(scope="module")
def corpus() -> list[tuple[str, str]]:
    config = CorpusConfig(seed=0, warmup_docs=N_DOCS // 2)
    return [document(index, config) for index in range(N_DOCS)]


def _fragments(template: str) -> list[str]:
    """The fixed wording of a phrasing template: text between slots, at least three words long."""
    pieces = re.split(r"\{[^}]*\}|[\[\]]", template)
    return [p.strip(" ,.;:?!") for p in pieces if len(p.strip(" ,.;:?!").split()) >= 3]


def _test_only_fragments() -> set[str]:
    specs = (*TOOL_SPECS, *CHAIN_SPECS)
    train_text = "\n".join(t for spec in specs for t in spec.train_phrasings)
    fragments = {f for spec in specs for t in spec.test_phrasings for f in _fragments(t)}
    fragments = {f for f in fragments if f not in train_text}
    fragments |= {o.strip() for o in shared_phrasings.PARALLEL_OPENINGS["test"] if o.strip()}
    fragments |= {j.strip(" :") for j in shared_phrasings.PARALLEL_JOINERS["test"] if j.strip(" :")}
    fragments |= {request for request, _ in shared_phrasings.OUT_OF_SCOPE["test"]}
    return fragments


def test_documents_are_the_same_in_any_call_and_differ_by_seed() -> None:
    config = CorpusConfig(seed=3)
    assert [document(i, config) for i in range(20)] == [document(i, CorpusConfig(seed=3)) for i in range(20)]
    assert [document(i, config) for i in range(20)] != [document(i, CorpusConfig(seed=4)) for i in range(20)]


def test_documents_do_not_depend_on_the_processs_hash_seed() -> None:
    """Set and dict orders of strings change with PYTHONHASHSEED; the corpus must not."""
    import subprocess
    import sys

    code = (
        "import hashlib; from recipes.reader.corpus import CorpusConfig, document; "
        "text = ''.join(document(i, CorpusConfig(warmup_docs=0))[1] for i in range(150)); "
        "print(hashlib.sha256(text.encode()).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            cwd=ROOT,  # recipes is imported from the repository's root
            capture_output=True,
            text=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(digests) == 1 and len(next(iter(digests))) > 60


def test_every_kind_appears_and_the_warmup_leans_on_drills(corpus: list[tuple[str, str]]) -> None:
    warm = [kind for kind, _ in corpus[: N_DOCS // 2]]
    main = [kind for kind, _ in corpus[N_DOCS // 2 :]]
    assert set(warm) == set(main) == {"task", "drill", "invented"}
    assert warm.count("drill") > main.count("drill")
    assert warm.count("task") < main.count("task")


def test_the_corpus_holds_no_held_out_tool_or_test_phrasing(corpus: list[tuple[str, str]]) -> None:
    fragments = _test_only_fragments()
    assert len(fragments) > 40
    text = "\n".join(doc for _, doc in corpus)
    assert not [name for name in DEFAULT_HELDOUT_TOOLS if name in text]
    assert not [fragment for fragment in fragments if fragment in text]


def test_the_leak_check_finds_test_split_text() -> None:
    """The check above can fail: test-split tasks trip it."""
    fragments = _test_only_fragments()
    text = "\n".join(render_gold(task) for task in generate_tasks(0, 60, "test"))
    assert [name for name in DEFAULT_HELDOUT_TOOLS if name in text]
    assert [fragment for fragment in fragments if fragment in text]


def _calls(text: str) -> list[dict]:
    conversation = text[text.index("<|im_start|>user") :]  # not the system prompt's format example
    calls = []
    for body in re.findall(r"<tool_call>\n(.*?)\n</tool_call>", conversation, flags=re.S):
        parsed = json.loads(body)
        calls += parsed if isinstance(parsed, list) else [parsed]
    return calls


def test_task_documents_carry_fresh_values_not_catalogue_ones(corpus: list[tuple[str, str]]) -> None:
    tasks = [doc for kind, doc in corpus if kind == "task"]
    cities = [call["arguments"]["city"] for doc in tasks for call in _calls(doc) if "city" in call["arguments"]]
    assert len(cities) >= 5
    assert not set(cities) & set(CITY_NAMES)
    for doc in tasks:
        request = doc[doc.index("<|im_start|>user\n") :].split("<|im_end|>")[0]
        for call in _calls(doc)[:1]:  # the first call reads only the request
            for value in call["arguments"].values():
                if isinstance(value, str) and value[:1].isupper() and " " not in value and len(value) > 3:
                    assert value in request or re.fullmatch(r"\d{4}-\d{2}-\d{2}", value)


def test_fresh_codes_keep_their_shape() -> None:
    rng = random.Random(0)
    for value in ("ORD-CIV8ED", "SW477", "CPLF", "a.b@x.com"):
        fresh = fresh_code(value, rng)
        assert len(fresh) == len(value) and fresh != value
        assert [c.isdigit() for c in fresh] == [c.isdigit() for c in value]
        assert [c.isupper() for c in fresh] == [c.isupper() for c in value]
    assert fresh_code("ORD-CIV8ED", rng).startswith("ORD-")


def test_dates_and_times_move_together_in_every_written_form() -> None:
    text = "From March 31, 2026 (2026-03-31) to 1 April 2026 at 2:30 pm, back by 23:30."
    assert _shift_dates_and_times(text, 1, 60) == (
        "From April 1, 2026 (2026-04-01) to 2 April 2026 at 3:30 pm, back by 00:30."
    )
    assert _shift_dates_and_times("noon is 12:00 pm, midnight 12:05 am", 0, -10) == (
        "noon is 11:50 am, midnight 11:55 pm"
    )


def test_freshening_replaces_a_value_everywhere_and_leaves_enums_and_unasked_values() -> None:
    text = 'Weather in Paris, celsius? {"city": "Paris", "units": "celsius"} Parisian Lyon'
    out = freshen_task_text(
        text, "Weather in Paris, celsius?", ["Paris", "celsius", "Lyon"], {"celsius"}, random.Random(1)
    )
    fresh = re.match(r"Weather in (\w+),", out).group(1)
    assert fresh != "Paris" and out.count(fresh) == 2
    assert "celsius" in out and "Parisian" in out and "Lyon" in out  # enum, a longer word, not in the request


def test_conversion_drills_are_right(corpus: list[tuple[str, str]]) -> None:
    checked = 0
    pattern = re.compile(r"Write (.+?) (as YYYY-MM-DD|in 24-hour form)\.<\|im_end\|>\n<\|im_start\|>assistant\n(.+?)<")
    for _, doc in corpus:
        for spoken, form, answer in pattern.findall(doc):
            checked += 1
            if form == "as YYYY-MM-DD":
                for layout in ("%B %d, %Y", "%d %B %Y"):
                    try:
                        assert dt.datetime.strptime(spoken, layout).date().isoformat() == answer
                        break
                    except ValueError:
                        continue
                else:
                    raise AssertionError(f"unparsed date {spoken!r}")
            else:
                assert dt.datetime.strptime(spoken, "%I:%M %p").strftime("%H:%M") == answer
    assert checked >= 20
    assert MONTHS[0] == "January"


def test_a_bad_mix_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown corpus document kind"):
        CorpusConfig(mix=(("novel", 1.0),))
    for bad in ((0, 3), (5, 2), (1, 100000)):
        with pytest.raises(ValueError, match="corpus tools_per_task must satisfy"):
            CorpusConfig(tools_per_task=bad)
    with pytest.raises(ValueError, match="warmup_mix weights"):
        CorpusConfig(warmup_mix=(("task", 0.0),))


def _test_only_values() -> set[str]:
    """Test-split pool values no pool has in its train part, and no invented word could spell
    (``invented_word`` alternates consonants and vowels, so it may write "Rome" by chance)."""
    pools = value_pools().values()
    train = {value for pool in pools for value in pool.train}
    invented = re.compile(r"[bcdfghjklmnprstvwz]?([aeiou][bcdfghjklmnprstvwz])*[aeiou]?", re.I)
    return {
        value
        for pool in pools
        for value in pool.test
        if isinstance(value, str) and value not in train and len(value) >= 4 and not invented.fullmatch(value)
    }


def _whole_words(values: set[str], text: str) -> list[str]:
    return sorted(value for value in values if re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text))


def test_the_corpus_holds_no_test_split_value(corpus: list[tuple[str, str]]) -> None:
    """Values of the test split's pools (names, places, texts) never appear, as whole words."""
    test_only = _test_only_values()
    assert len(test_only) > 100
    assert not _whole_words(test_only, "\n".join(doc for _, doc in corpus))


def test_the_value_check_finds_test_split_values() -> None:
    """The check above can fail: test-split tasks trip it."""
    text = "\n".join(render_gold(task) for task in generate_tasks(0, 60, "test"))
    assert len(_whole_words(_test_only_values(), text)) >= 10
