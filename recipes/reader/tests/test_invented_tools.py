"""Invented tools: valid schemas, calls that only the schema explains, and disguised suite tools."""

from __future__ import annotations

import json
import random
import re

import jsonschema
import pytest

import recipes.reader.corpus as corpus_module
from recipes.reader.corpus import CorpusConfig, document, invented_document
from recipes.reader.invented_tools import disguise, invented_tool
from recipes.reader.words import (
    ATTRIBUTES,
    FORBIDDEN_WORDS,
    NOUN_WORDS,
    NOUNS,
    VERB_WORDS,
    VERBS,
    readable_name,
    snake,
    words_of,
)
from slca_grpo.data.synthetic import generate_tasks, gold_messages


def words_for(word: str) -> tuple[str, ...]:
    """``word`` and every other word a request may say for it (a verb's or a noun's)."""
    return (word, *VERB_WORDS.get(word, ()), *NOUN_WORDS.get(word, ()))


def _tools(text: str) -> dict[str, dict]:
    block = text.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0]
    return {t["function"]["name"]: t["function"] for t in map(json.loads, block.splitlines())}


def _turns(text: str) -> list[tuple[str, str]]:
    return re.findall(r"<\|im_start\|>(\w+)\n(.*?)<\|im_end\|>", text, flags=re.S)


def _calls(body: str) -> list[dict]:
    calls = []
    for block in re.findall(r"<tool_call>\n(.*?)\n</tool_call>", body, flags=re.S):
        parsed = json.loads(block)
        calls += parsed if isinstance(parsed, list) else [parsed]
    return calls


def _leaves(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


@pytest.mark.parametrize("seed", range(3))
def test_invented_schemas_are_valid_and_sampled_arguments_fit_them(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(60):
        tool = invented_tool(rng)
        parameters = tool.schema()["function"]["parameters"]
        jsonschema.Draft202012Validator.check_schema(parameters)
        for _ in range(3):
            jsonschema.validate(tool.sample_arguments(rng), parameters)
        assert len({p.name for p in tool.params}) == len(tool.params)


def test_every_invented_call_is_valid_and_its_values_come_from_the_conversation() -> None:
    config = CorpusConfig()
    variants = {"call": 0, "two_step": 0, "refusal": 0}
    for index in range(150):
        text = invented_document(random.Random(index), config)
        tools = _tools(text)
        assert config.tools_per_task[0] <= len(tools) <= config.tools_per_task[1]
        turns = _turns(text)
        request = turns[1][1]
        seen = request
        calls = [call for role, body in turns[2:] if role == "assistant" for call in _calls(body)]
        variants["refusal" if not calls else "two_step" if len(_turns(text)) > 6 else "call"] += 1
        for role, body in turns[2:]:
            for call in _calls(body) if role == "assistant" else []:
                jsonschema.validate(call["arguments"], tools[call["name"]]["parameters"])
                for value in _leaves(call["arguments"]):
                    written = (
                        {True: "yes", False: "no"}.get(value, str(value)) if isinstance(value, bool) else str(value)
                    )
                    assert written in seen, (written, text)
            seen += body  # a later call may copy from a tool response
    assert all(count >= 10 for count in variants.values()), variants


def test_disguise_renames_every_tool_consistently_and_keeps_descriptions() -> None:
    rng = random.Random(0)
    for task in generate_tasks(0, 40, "train"):
        original = gold_messages(task)
        before = json.dumps([original, task.tools])
        messages, tools = disguise(original, task.tools, rng, rename_params=0.7, keep_name=0.0)
        assert json.dumps([original, task.tools]) == before  # inputs untouched
        old = {t["function"]["name"] for t in task.tools}
        new = {t["function"]["name"]: t["function"] for t in tools}
        assert not old & set(new) and len(new) == len(old)
        renamed = dict(zip((t["function"]["name"] for t in task.tools), new))
        verbs = {*VERBS, *(name.split("_")[0] for name in old)}  # the old verb is kept half the time
        for name in new:  # names of real words: a verb, then words of the banks
            verb, *words = name.split("_")
            assert verb in verbs and all(w in NOUNS or w in ATTRIBUTES for w in words)

        def renamed_in(text: str, renamed: dict[str, str] = renamed) -> str:  # a sibling tool named as renamed
            return re.sub(r"\w+", lambda m: renamed.get(m.group(0), m.group(0)), text)

        assert sorted(t["function"]["description"] for t in tools) == sorted(
            renamed_in(t["function"]["description"]) for t in task.tools
        )
        for function in new.values():
            assert set(function["parameters"].get("required", [])) <= set(function["parameters"]["properties"])
        for message in messages:
            for call in message.get("tool_calls") or []:
                function = call["function"]
                assert set(function["arguments"]) <= set(new[function["name"]]["parameters"]["properties"])
                jsonschema.validate(function["arguments"], new[function["name"]]["parameters"])
            if message.get("role") == "tool":
                assert message["name"] in new


def test_no_offered_or_called_name_holds_a_catalogue_name_and_calls_stay_valid() -> None:
    """A name recalled from memory is never the offered one, so only reading the schema pays;
    every call still validates against its renamed tool."""
    catalogue = {t["function"]["name"] for task in generate_tasks(0, 300, "test") for t in task.tools}
    assert len(catalogue) >= 30
    rng = random.Random(5)
    for task in generate_tasks(2, 60, "train"):
        messages, tools = disguise(gold_messages(task), task.tools, rng, readable=True, catalogue_names=False)
        new = {t["function"]["name"]: t["function"] for t in tools}
        assert len(new) == len(task.tools)
        assert not [name for name in new if any(old in name for old in catalogue)], sorted(new)
        for message in messages:
            for call in message.get("tool_calls") or []:
                jsonschema.validate(call["function"]["arguments"], new[call["function"]["name"]]["parameters"])
    config = CorpusConfig(warmup_docs=0)
    kinds = [document(i, config) for i in range(150)]
    offered = [name for kind, text in kinds if kind != "drill" for name in _tools(text)]
    assert len(offered) >= 200
    assert not [name for name in offered if any(old in name for old in catalogue)]
    # The suite's tasks undisguised do offer some: the check above can fail.
    assert any(
        old in t["function"]["name"] for task in generate_tasks(2, 60, "train") for t in task.tools for old in catalogue
    )


def test_disguise_keeps_no_name_at_keep_name_zero_and_every_name_at_one() -> None:
    task = generate_tasks(3, 1, "train")[0]
    names = {t["function"]["name"] for t in task.tools}
    for keep, expected in ((0.0, set()), (1.0, names)):
        _, tools = disguise(gold_messages(task), task.tools, random.Random(1), keep_name=keep)
        assert {t["function"]["name"] for t in tools} & names == expected


def test_a_tool_whose_name_is_taken_gets_another_and_never_hangs() -> None:
    """An opaque name of one tool may say another's verb and noun (document 21,311 of the default
    corpus hung there once): the second tool then takes other words."""
    taken = {f"{verb}_{noun.replace(' ', '_')}" for verb in VERBS for noun in NOUNS}
    for seed in range(50):
        before = set(taken)
        tool = invented_tool(random.Random(seed), taken)
        assert tool.name not in before and tool.name in taken
    config = CorpusConfig()
    assert document(21311, config)[1] == document(21311, config)[1]


def test_the_word_banks_leave_out_the_unseen_domains_words() -> None:
    """The unseen-domains task file stays a domain the corpus has never shown."""
    words = {word for entry in (*VERBS, *NOUNS, *ATTRIBUTES) for word in entry.split()}
    assert not words & FORBIDDEN_WORDS


def test_words_of_a_description_leave_out_grammar_examples_and_other_names() -> None:
    assert words_of("Reserve a hotel by its hotel_id for a guest and dates, e.g. 'Ann Lee'") == [
        "reserve", "hotel", "guest", "dates",
    ]  # fmt: skip
    assert words_of("Hotel identifier from search_hotels") == ["hotel", "identifier"]
    assert words_of("Room (default whole house)") == ["room"]


def test_a_readable_name_is_one_or_two_consecutive_words_of_the_description() -> None:
    rng = random.Random(0)
    words = words_of("Get the daily weather forecast for a city.")
    assert words == ["get", "daily", "weather", "forecast", "city"]
    pairs = {"_".join(words[i : i + 2]) for i in range(len(words) - 1)}
    names = {readable_name(rng, "Get the daily weather forecast for a city.", prefix="get") for _ in range(60)}
    assert len(names) >= 5
    for name in names:
        rest = name.removeprefix("get_")
        assert name.startswith("get_") and (rest in words[1:] or rest in pairs), name
    assert readable_name(rng, "Do it.", prefix="do") is None


def test_readable_disguise_names_each_tool_and_parameter_by_its_own_description() -> None:
    rng = random.Random(0)
    said = total = 0
    for task in generate_tasks(0, 60, "train"):
        messages, tools = disguise(
            gold_messages(task), task.tools, rng, rename_params=1.0, keep_name=0.0, readable=True
        )
        for before, after in zip(task.tools, tools):
            _, _, rest = after["function"]["name"].partition("_")
            total += 1
            said += bool(rest) and set(rest.split("_")) <= set(words_of(before["function"]["description"]))
            properties = before["function"]["parameters"]["properties"]
            for (key, schema), new_key in zip(properties.items(), after["function"]["parameters"]["properties"]):
                assert new_key == key or set(new_key.split("_")) <= set(words_of(schema.get("description", "")))
        new = {t["function"]["name"]: t["function"] for t in tools}
        assert len(new) == len(task.tools)
        for message in messages:
            for call in message.get("tool_calls") or []:
                jsonschema.validate(call["function"]["arguments"], new[call["function"]["name"]]["parameters"])
    # Only a name a sibling took first is drawn from other words.
    assert said / total >= 0.9, (said, total)


def test_readable_invented_tools_say_their_verb_and_noun_and_their_parameters_labels() -> None:
    rng = random.Random(3)
    for _ in range(200):
        tool = invented_tool(rng, readable=True)
        assert tool.name.startswith(f"{tool.verb}_{snake(tool.noun)}")
        for param in tool.params:
            assert param.name in (snake(param.label), f"{snake(tool.noun)}_{snake(param.label)}")


# A description's verb and noun; corpus v6 may name the noun's other word after it ("(a packet)") or
# in a sentence of its own after the first.
_ACTS_ON = re.compile(r"^(?:Use this to )?(\w+) (?:a|the) (.+?)(?: \(a [^)]*\))?(?:\.| by its | that the user)", re.I)
_REFUSED = re.compile(r"(?:none of the available tools can (\w+) a (.+?)\.|I can't (\w+) a (.+?) with the tools)")


def _verb_and_noun(tool: dict) -> tuple[str, str]:
    verb, noun = _ACTS_ON.match(tool["description"]).groups()
    return verb.lower(), noun


def test_offered_tools_do_different_things_and_a_refusal_asks_for_none_of_them(monkeypatch) -> None:
    # Requests and descriptions in the tools' own words, which the regexes below read.
    monkeypatch.setattr(corpus_module, "PARAPHRASE", 0.0)
    unserved = 0
    for seed in range(300):
        text = invented_document(random.Random(seed), CorpusConfig())
        offered = {name: _verb_and_noun(tool) for name, tool in _tools(text).items()}
        assert len(set(offered.values())) == len(offered)  # no two tools do the same thing
        if any(_calls(body) for role, body in _turns(text) if role == "assistant"):
            continue
        refused = _REFUSED.search(_turns(text)[-1][1]).groups()
        verb, noun = refused[:2] if refused[0] else refused[2:]
        assert (verb, noun) not in offered.values()  # the refusal is right: no offered tool does it
        unserved += 1
    assert unserved >= 20


def _first_request_and_call(seeds: range):
    """Per invented document that calls a tool: its request (lower case), the first called tool's
    verb and noun (read off its description), and the tool's description."""
    for seed in seeds:
        text = invented_document(random.Random(seed), CorpusConfig())
        calls = [call for role, body in _turns(text) if role == "assistant" for call in _calls(body)]
        if calls:
            tool = _tools(text)[calls[0]["name"]]
            verb, noun = _ACTS_ON.match(tool["description"]).groups()
            yield _turns(text)[1][1].lower(), verb.lower(), noun, tool["description"]


def test_paraphrased_requests_say_the_tool_in_other_words_that_mean_it(monkeypatch) -> None:
    """A paraphrased request names the wanted tool's noun by another word, which means it; its
    description often names one too (read off the schema), and otherwise only the lexicon says so.
    Every request is paraphrased here (the corpus does :data:`PARAPHRASE` of them)."""
    monkeypatch.setattr(corpus_module, "PARAPHRASE", 1.0)
    literal = other = described = total = 0
    for request, _verb, noun, description in _first_request_and_call(range(300)):
        head = noun.split()[-1]
        if head not in NOUN_WORDS:
            continue
        total += 1
        said = [word for word in NOUN_WORDS[head] if re.search(rf"\b{re.escape(word.lower())}\b", request)]
        literal += not said
        other += bool(said)
        described += bool(said) and any(word in description for word in said)
        assert said or noun in request
        assert any(word.lower() in request for word in words_for(head))
    assert total >= 100
    assert other / total >= 0.8, (other, total)
    # Descriptions name one of the noun's other words half of the time, drawn on their own.
    assert 0.15 <= described / other <= 0.6, (described, other)


def test_task_documents_show_tools_as_prompts_do() -> None:
    """No ``returns`` schema: prompts never show one (``prompt_tools``), though the suite's tools have it."""
    config = CorpusConfig(warmup_docs=0, mix={"task": 1.0})
    texts = [text for kind, text in (document(i, config) for i in range(12)) if kind == "task"]
    assert texts and not any('"returns"' in text for text in texts)
    assert any('"returns"' in json.dumps(task.tools) for task in generate_tasks(0, 12, "train"))
