"""The synthetic tool suite: catalogue, determinism, kinds, fixtures, splits and gold trajectories."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from slca_grpo.chat import parse_tool_calls, render_chat
from slca_grpo.data.synthetic import (
    DEFAULT_HELDOUT_TOOLS,
    KINDS,
    SIBLINGS,
    SuiteConfig,
    ValuePool,
    all_tools,
    domains,
    fabricate_response,
    generate_suite,
    generate_tasks,
    get_spec,
    gold_messages,
    render_gold,
    task_to_json,
    tools_by_domain,
    value_leaks,
    value_pools,
    value_split,
    write_jsonl,
)
from slca_grpo.data.synthetic.catalogue import CHAIN_SPECS, TOOL_SPECS
from slca_grpo.data.synthetic.leaks import argument_strings, schema_enum_values
from slca_grpo.data.synthetic.spec import TemplateError, fill
from slca_grpo.data.synthetic.values import _ACTIVE_SPLIT, COMPANIES
from slca_grpo.datatypes import SUBSET_IRRELEVANT, SUBSET_TOOL_CALL, Task, ToolCall, tool_name

SEED = 7


def active_value_split() -> str | None:
    """The split set by the innermost ``value_split``, or ``None`` outside any."""
    return _ACTIVE_SPLIT.get()


@pytest.fixture(scope="module")
def suite():
    return generate_suite(seed=SEED, n_train=400, n_test=150)


@pytest.fixture(scope="module")
def all_tasks(suite) -> list[Task]:
    return suite.train + suite.test


def _validator(schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(schema)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _offered(task: Task) -> list[str]:
    return [tool_name(t) for t in task.tools]


# --- catalogue ---------------------------------------------------------------------------------


def test_catalogue_size_and_shape():
    tools = all_tools()
    names = [t["function"]["name"] for t in tools]
    assert len(tools) >= 30 and len(set(names)) == len(names)
    assert len(domains()) >= 6
    assert sum(len(v) for v in tools_by_domain().values()) == len(tools)
    for tool in tools:
        assert tool["type"] == "function"
        assert set(tool["function"]) == {"name", "description", "parameters", "returns"}
        assert tool["function"]["description"]


def test_every_schema_is_valid_json_schema_with_consistent_required():
    for tool in all_tools():
        fn = tool["function"]
        Draft202012Validator.check_schema(fn["parameters"])
        Draft202012Validator.check_schema(fn["returns"])
        assert fn["parameters"]["type"] == "object"
        assert set(fn["parameters"].get("required", [])) <= set(fn["parameters"]["properties"])
    # some tools have optional parameters, some have enums
    params = [t["function"]["parameters"] for t in all_tools()]
    assert sum(len(p.get("required", [])) < len(p["properties"]) for p in params) >= 10
    assert sum(any("enum" in prop for prop in p["properties"].values()) for p in params) >= 10


def test_all_tools_returns_copies_and_filters_by_domain():
    first = all_tools()
    first[0]["function"]["name"] = "changed"
    assert all_tools()[0]["function"]["name"] != "changed"
    weather = [t["function"]["name"] for t in all_tools("weather")]
    assert weather == tools_by_domain()["weather"]
    with pytest.raises(ValueError, match="unknown domain 'cooking'"):
        all_tools("cooking")
    with pytest.raises(KeyError, match="unknown synthetic tool 'nope'"):
        get_spec("nope")


def test_siblings_are_symmetric_and_every_tool_has_one():
    for name, siblings in SIBLINGS.items():
        assert siblings, name
        for other in siblings:
            assert name in SIBLINGS[other]


def test_fabricated_responses_validate_and_are_deterministic():
    rng = random.Random(0)
    for spec in TOOL_SPECS:
        params, returns = _validator(spec.parameters), _validator(spec.returns)
        for _ in range(15):
            args = spec.sample_args(rng)
            assert not list(params.iter_errors(args)), (spec.name, args)
            response = fabricate_response(spec.name, args, seed=3)
            assert not list(returns.iter_errors(response)), (spec.name, response)
            assert fabricate_response(spec.name, args, seed=3) == response


def test_fabricate_response_rejects_arguments_that_do_not_fit():
    with pytest.raises(ValueError, match="required: \\['city'\\]"):
        fabricate_response("get_current_weather", {"town": "Oslo"})
    with pytest.raises(ValueError, match="book_hotel"):
        fabricate_response("book_hotel", {"hotel_id": "H", "guest_name": "A", "check_in": "soon", "check_out": "x"})


def test_parallel_tools_have_templates_naming_the_listed_slot():
    for spec in TOOL_SPECS:
        if spec.parallel_slot is None:
            continue
        assert spec.parallel_values is not None
        for split in ("train", "test"):
            assert any("{" + spec.parallel_slot + "}" in t for t in spec.phrasings(split)), (spec.name, split)


def test_every_template_fills_cleanly():
    rng = random.Random(1)
    for spec in TOOL_SPECS:
        assert spec.train_phrasings and spec.test_phrasings
        for template in spec.train_phrasings + spec.test_phrasings:
            for _ in range(8):
                text = fill(template, spec.surface(spec.sample_args(rng), rng))
                assert not any(ch in text for ch in "{}[]"), (spec.name, template, text)
    for chain in CHAIN_SPECS:
        first, second = get_spec(chain.first), get_spec(chain.second)
        for template in chain.train_phrasings + chain.test_phrasings:
            for _ in range(8):
                args1 = (chain.first_args or first.sample_args)(rng)
                args2, linked = chain.link(args1, first.respond(args1, rng), rng)
                slots = first.surface(args1, rng)
                for key, value in second.surface({k: v for k, v in args2.items() if k not in linked}, rng).items():
                    slots.setdefault(key, value)
                text = fill(template, slots)
                assert not any(ch in text for ch in "{}[]"), (chain.name, text)


def test_fill_optional_fragments_and_missing_slot():
    template = "Weather in {city}[ in {units}]?"
    assert fill(template, {"city": "Oslo"}) == "Weather in Oslo?"
    assert fill(template, {"city": "Oslo", "units": "celsius"}) == "Weather in Oslo in celsius?"
    assert fill('Say "{text}".', {"text": "Hi."}) == 'Say "Hi."'
    with pytest.raises(TemplateError, match="city"):
        fill(template, {"units": "celsius"})


# --- generation --------------------------------------------------------------------------------


def test_same_seed_gives_identical_jsonl_bytes(tmp_path: Path):
    a = generate_suite(seed=11, n_train=60, n_test=20)
    b = generate_suite(seed=11, n_train=60, n_test=20)
    write_jsonl(a.train + a.test, tmp_path / "a.jsonl")
    write_jsonl(b.train + b.test, tmp_path / "b.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    c = generate_suite(seed=12, n_train=60, n_test=20)
    assert [task_to_json(t) for t in c.train] != [task_to_json(t) for t in a.train]


def test_same_seed_is_identical_across_processes_with_different_hash_seeds(tmp_path: Path):
    code = (
        "import sys; from slca_grpo.data.synthetic import generate_suite, write_jsonl; "
        "s = generate_suite(seed=5, n_train=40, n_test=15); write_jsonl(s.train + s.test, sys.argv[1])"
    )
    outputs = []
    for hash_seed in ("1", "2"):
        target = tmp_path / f"out{hash_seed}.jsonl"
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        subprocess.run([sys.executable, "-c", code, str(target)], check=True, env=env, timeout=60)
        outputs.append(target.read_bytes())
    assert outputs[0] == outputs[1]
    here = generate_suite(seed=5, n_train=40, n_test=15)
    assert outputs[0].decode("utf-8") == "".join(task_to_json(t) + "\n" for t in here.train + here.test)


def test_kind_counts_follow_weights_exactly():
    counts = Counter(t.metadata["kind"] for t in generate_tasks(0, 100, "train"))
    assert counts == {"single": 25, "distractor": 20, "parallel": 20, "two_step": 20, "irrelevant": 15}
    # 2.5 / 2.5: the tie in remainders goes to the kind listed first
    config = SuiteConfig(kind_weights={"single": 1, "irrelevant": 1})
    counts = Counter(t.metadata["kind"] for t in generate_tasks(0, 5, "train", config))
    assert counts == {"single": 3, "irrelevant": 2}
    assert generate_tasks(0, 0, "train") == []


def test_every_kind_and_variant_present(all_tasks):
    kinds = Counter(t.metadata["kind"] for t in all_tasks)
    assert set(kinds) == set(KINDS)
    variants = {t.metadata.get("variant") for t in all_tasks}
    assert {"same_tool", "mixed_tools", "tool_not_offered", "out_of_scope"} <= variants


def test_task_shapes_per_kind(all_tasks):
    for task in all_tasks:
        kind = task.metadata["kind"]
        offered = _offered(task)
        assert len(offered) == len(set(offered))
        assert task.messages[-1]["role"] == "user" and task.messages[-1]["content"]
        if kind in ("single", "distractor"):
            assert [len(step) for step in task.gold_calls] == [1]
        elif kind == "parallel":
            assert len(task.gold_calls) == 1 and 2 <= len(task.gold_calls[0]) <= 3
            calls = task.gold_calls[0]
            assert len({json.dumps(c.to_dict(), sort_keys=True) for c in calls}) == len(calls)
        elif kind == "two_step":
            assert [len(step) for step in task.gold_calls] == [1, 1]
        gold = task.metadata.get("fixtures")
        assert len(gold) == len(task.flat_gold_calls)
        if kind == "single":
            assert not set(offered) & set(SIBLINGS[task.gold_calls[0][0].name])
        if kind == "distractor":
            assert set(offered) & set(SIBLINGS[task.gold_calls[0][0].name])
        needed = {c.name for c in task.flat_gold_calls}
        assert needed <= set(offered)
        assert max(3, len(needed) + 1) <= len(offered) <= 5


def test_gold_arguments_and_fixture_responses_validate(all_tasks):
    for task in all_tasks:
        schemas = {t["function"]["name"]: t["function"] for t in task.tools}
        for call, fixture in zip(task.flat_gold_calls, task.metadata["fixtures"]):
            assert call.name in schemas
            assert fixture["name"] == call.name and fixture["arguments"] == call.arguments
            assert not list(_validator(schemas[call.name]["parameters"]).iter_errors(call.arguments))
            response = json.loads(fixture["response"])
            assert not list(_validator(schemas[call.name]["returns"]).iter_errors(response))


def test_responses_are_consistent_with_arguments(all_tasks):
    """Every argument the response echoes under the same key has the same value."""
    for task in all_tasks:
        for fixture in task.metadata["fixtures"]:
            response = json.loads(fixture["response"])
            for key, value in fixture["arguments"].items():
                if key in response:
                    assert response[key] == value, (task.id, key)


def test_two_step_tasks_use_a_step_one_value(all_tasks):
    two_step = [t for t in all_tasks if t.metadata["kind"] == "two_step"]
    assert len(two_step) >= 20
    for task in two_step:
        links = task.metadata["links"]
        assert links
        first_response = json.loads(task.metadata["fixtures"][0]["response"])
        second_call = task.gold_calls[1][0]
        for link in links:
            value = second_call.arguments[link["argument"]]
            assert value == link["value"]
            assert value in _leaves(first_response)
            assert str(value) not in task.question  # only step 1 can reveal it


def test_reference_answers_are_grounded(all_tasks):
    for task in all_tasks:
        answer = task.reference_answer
        assert answer and len(answer) >= 20
        for fixture in task.metadata["fixtures"]:
            response = json.loads(fixture["response"])
            facts = [str(v) for v in _leaves(response) if isinstance(v, str) and len(v) >= 4]
            facts += [f"{v}" for v in _leaves(response) if isinstance(v, (int, float)) and not isinstance(v, bool)]
            assert any(fact in answer for fact in facts), (task.id, fixture["name"])


def test_irrelevant_tasks(all_tasks):
    irrelevant = [t for t in all_tasks if t.metadata["kind"] == "irrelevant"]
    assert irrelevant
    for task in irrelevant:
        assert task.subset == SUBSET_IRRELEVANT and task.gold_calls == [] and not task.expects_call
        assert task.metadata["fixtures"] == []
        offered = set(_offered(task))
        requested = task.metadata.get("requested_tool")
        if requested is not None:
            spec = get_spec(requested)
            assert requested not in offered and not offered & set(SIBLINGS[requested])
            assert all(get_spec(name).domain != spec.domain for name in offered)
            assert spec.capability in task.reference_answer
        assert "sorry" in task.reference_answer.lower() or "unfortunately" in task.reference_answer.lower()
    assert all(t.subset == SUBSET_TOOL_CALL for t in all_tasks if t.metadata["kind"] != "irrelevant")


def test_heldout_tools_never_in_train_and_used_in_test(suite):
    heldout = set(DEFAULT_HELDOUT_TOOLS)
    for task in suite.train:
        assert not heldout & set(_offered(task)), task.id
    test_gold = {c.name for t in suite.test for c in t.flat_gold_calls}
    assert heldout & test_gold
    used = [t for t in suite.test if t.metadata["heldout_tools"]]
    assert 0.15 <= len(used) / len(suite.test) <= 0.6


def test_heldout_phrasings_are_disjoint(suite):
    train_ids = {p for t in suite.train for p in t.metadata["phrasings"]}
    test_ids = {p for t in suite.test for p in t.metadata["phrasings"]}
    assert train_ids and test_ids and not train_ids & test_ids
    assert all(":train:" in p for p in train_ids) and all(":test:" in p for p in test_ids)
    for spec in TOOL_SPECS:
        assert not set(spec.train_phrasings) & set(spec.test_phrasings)
    for chain in CHAIN_SPECS:
        assert not set(chain.train_phrasings) & set(chain.test_phrasings)


# --- held-out values --------------------------------------------------------------------------


def _catalogue_enums() -> set[str]:
    return schema_enum_values(all_tools())


def _string_values(item: Any) -> list[str]:
    """The strings of one pool item (a record such as a product holds several)."""
    return [v for v in (item if isinstance(item, tuple) else (item,)) if isinstance(v, str)]


def test_no_gold_argument_value_of_the_test_split_is_a_train_value():
    big = generate_suite(seed=0, n_train=2000, n_test=300)
    assert value_leaks(big.train, big.test) == {}
    # not vacuous: the test split has plenty of values the check looks at
    enums = _catalogue_enums()
    counted = {
        text
        for task in big.test
        for call in task.flat_gold_calls
        for text in argument_strings(call.arguments)
        if text not in enums and len(text) >= 3 and not re.fullmatch(r"\d{4}-\d{2}-\d{2}|\d{2}:\d{2}", text)
    }
    assert len(counted) >= 150


def test_value_leaks_reports_a_planted_leak(suite):
    assert value_leaks(suite.train, suite.test) == {}
    train_city = next(c.arguments["city"] for t in suite.train for c in t.flat_gold_calls if "city" in c.arguments)
    target = next(t for t in suite.test if any("city" in c.arguments for c in t.flat_gold_calls))
    steps = [
        [ToolCall(c.name, {**c.arguments, "city": train_city}) if "city" in c.arguments else c for c in step]
        for step in target.gold_calls
    ]
    planted = dataclasses.replace(target, gold_calls=steps)
    others = [t for t in suite.test if t.id != target.id]
    assert value_leaks(suite.train, [*others, planted]) == {train_city: [target.id]}


def test_value_leaks_looks_inside_nested_arguments_and_skips_what_both_splits_share():
    def task(task_id: str, arguments: dict[str, Any]) -> Task:
        tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
        tool["function"]["parameters"]["properties"]["mode"] = {"type": "string", "enum": ["fast", "slow"]}
        return Task(
            id=task_id,
            messages=[{"role": "user", "content": "?"}],
            tools=[tool],
            gold_calls=[[ToolCall("f", arguments)]],
        )

    shared = {"date": "2025-03-04", "time": "09:30", "mode": "fast", "units": "celsius", "code": "ab"}
    train = [task("tr", {**shared, "filters": {"names": ["Alice Smith"], "note": "pay rent"}})]
    test = [
        task("te-1", {**shared, "people": [{"name": "Alice Smith"}]}),
        task("te-2", {"note": "pay rent", "other": "pay rent"}),
        task("te-3", {"note": "something new"}),
    ]
    assert value_leaks(train, test) == {"Alice Smith": ["te-1"], "pay rent": ["te-2"]}


def test_every_value_pool_splits_into_disjoint_parts():
    pools = value_pools()
    names = set(pools)
    assert {"values.CITY_NAMES", "values.FIRST_NAMES", "values.COMPANIES", "values.PRODUCTS"} <= names
    assert {"finance.SYMBOLS", "shopping.CANCEL_REASONS", "utilities.PHRASES", "values.HOTEL_WORDS[0]"} <= names
    enums = _catalogue_enums()
    for name, pool in pools.items():
        train, test = set(pool.train), set(pool.test)
        assert train | test == set(pool.all), name
        assert train & test == set(pool.shared), name
        # a value some schema lists as an enum is in both parts; every other value is in exactly one
        # (a record such as a product counts by its key, its first field: its category is an enum)
        enum_items = {item for item in pool.all if (item[0] if isinstance(item, tuple) else item) in enums}
        assert enum_items == set(pool.shared), name
        assert len(pool.test) >= 2 and len(pool.train) >= len(pool.test), name
        for split, part in (("train", pool.train), ("test", pool.test)):
            with value_split(split):
                assert active_value_split() == split
                assert list(pool) == list(part) and len(pool) == len(part), (name, split)
                assert pool[0] == part[0] and pool[-1] == part[-1] and tuple(pool[:2]) == part[:2]
                assert all(item in pool for item in part)
                other = pool.test if split == "train" else pool.train
                assert not any(item in pool for item in other if item not in pool.shared), (name, split)
    # the parts are big enough for what samplers draw at once (pick_distinct, parallel calls)
    assert len(pools["dining._PANTRY"].test) >= 6
    for name in ("values.CITY_NAMES", "values.BRANDS", "values.DISHES", "finance.SYMBOLS", "values.COMPANIES"):
        assert len(pools[name].test) >= 3, name
    for name, pool in pools.items():
        if all(isinstance(item, str) and " " in item for item in pool.all):  # free texts
            assert len(pool.test) >= 4 and len(pool.train) >= 8, name


def test_value_pools_outside_a_split_are_the_whole_list():
    pools = value_pools()
    assert active_value_split() is None
    for name, pool in pools.items():
        assert list(pool) == list(pool.all) and len(pool) == len(pool.all), name
    with value_split("test"):
        with value_split(None):
            assert all(list(pool) == list(pool.all) for pool in pools.values())
        assert all(list(pool) == list(pool.test) for pool in pools.values())
    assert active_value_split() is None
    generate_tasks(0, 5, "test")
    assert active_value_split() is None
    with pytest.raises(ValueError, match="value split"):
        with value_split("validation"):
            pass
    pool = ValuePool(["a", "b", "c", "d", "e", "f", "g"])
    assert pool.train == ("a", "b", "d", "e", "g") and pool.test == ("c", "f")
    with pytest.raises(ValueError, match="not in the pool"):
        ValuePool(["a", "b"], shared=["z"])


def test_lookups_by_key_find_every_value_in_any_split():
    name, symbol = COMPANIES.train[0]
    with value_split("test"):
        assert fabricate_response("lookup_stock_symbol", {"company_name": name})["symbol"] == symbol
        assert fabricate_response("get_local_time", {"city": "Paris"})["timezone"] == "Europe/Paris"


def test_generated_values_come_from_their_splits_part(suite):
    part_of: dict[str, dict[str, set[str]]] = {}
    for pool in value_pools().values():
        for split in ("train", "test"):
            for item in pool.part(split):
                for text in _string_values(item):
                    part_of.setdefault(text, {"train": set(), "test": set()})[split].add(id(pool))
    checked = 0
    for split, tasks in (("train", suite.train), ("test", suite.test)):
        for task in tasks:
            for call in task.flat_gold_calls:
                for text in argument_strings(call.arguments):
                    if text in part_of:
                        checked += 1
                        assert part_of[text][split], (task.id, text)
    assert checked >= 300


def test_test_requests_name_no_train_only_value():
    enums = _catalogue_enums()
    train_only = {
        text
        for pool in value_pools().values()
        for item in pool.train
        if item not in pool.test
        for text in _string_values(item)
        if text not in enums
    }
    pattern = re.compile("|".join(rf"(?<!\w){re.escape(v)}(?!\w)" for v in sorted(train_only, key=len, reverse=True)))
    assert pattern.search("Book a table in Paris")  # the pattern does match train values
    for task in generate_tasks(0, 600, "test"):
        for message in task.messages:
            match = pattern.search(message["content"])
            assert match is None, (task.id, match and match.group(0), message["content"])


def test_config_errors_name_the_problem():
    with pytest.raises(ValueError, match="unknown task kind"):
        SuiteConfig(kind_weights={"bogus": 1.0})
    with pytest.raises(ValueError, match="positive sum"):
        SuiteConfig(kind_weights={"single": 0.0})
    with pytest.raises(ValueError, match="tools_per_task"):
        SuiteConfig(tools_per_task=(4, 2))
    with pytest.raises(ValueError, match="unknown tool"):
        SuiteConfig(heldout_tools=("no_such_tool",))
    with pytest.raises(ValueError, match="split"):
        generate_tasks(0, 3, "validation")
    with pytest.raises(ValueError, match="non-negative"):
        generate_tasks(0, -1)
    with pytest.raises(ValueError, match="either config"):
        generate_suite(0, 1, 1, config=SuiteConfig(), heldout_share=0.5)


def test_custom_heldout_and_mix():
    suite = generate_suite(
        seed=1,
        n_train=40,
        n_test=20,
        heldout_tools=("get_current_weather",),
        kind_weights={"two_step": 1.0},
        tools_per_task=(2, 2),
    )
    assert all(t.metadata["kind"] == "two_step" for t in suite.train + suite.test)
    assert all("get_current_weather" not in _offered(t) for t in suite.train)
    assert all(len(t.tools) == 3 for t in suite.train)  # two needed tools + at least one distractor


# --- gold trajectories and serialisation ----------------------------------------------------------


def _assistant_turns(text: str) -> list[str]:
    turns = text.split("<|im_start|>assistant\n")[1:]
    return [turn.split("<|im_end|>")[0] for turn in turns]


def test_rendered_gold_parses_back_to_gold_calls(all_tasks):
    for task in all_tasks:
        text = render_gold(task)
        assert text == render_chat(gold_messages(task), task.tools, add_generation_prompt=False)
        turns = _assistant_turns(text)
        assert len(turns) == len(task.gold_calls) + 1
        for turn, step in zip(turns, task.gold_calls):
            parsed = parse_tool_calls(turn, allowed_tools=task.tool_names)
            assert parsed.calls == step and parsed.format_score == 1.0
        final = parse_tool_calls(turns[-1])
        assert not final.has_tool_call and final.final_answer == task.reference_answer
        for fixture in task.metadata["fixtures"]:
            assert f"<tool_response>\n{fixture['response']}\n</tool_response>" in text


def test_gold_messages_shape():
    task = next(t for t in generate_tasks(3, 30) if t.metadata["kind"] == "parallel")
    messages = gold_messages(task)
    calls = messages[len(task.messages)]
    assert calls["role"] == "assistant" and len(calls["tool_calls"]) == len(task.gold_calls[0])
    tool_messages = [m for m in messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == [c["id"] for c in calls["tool_calls"]]
    assert messages[-1] == {"role": "assistant", "content": task.reference_answer}
    broken = Task(id="x", messages=task.messages, tools=task.tools, gold_calls=task.gold_calls, reference_answer="ok")
    with pytest.raises(ValueError, match="fixtures"):
        gold_messages(broken)


def test_jsonl_round_trip(tmp_path: Path, suite):
    path = write_jsonl(suite.test, tmp_path / "nested" / "test.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(suite.test)
    for line, task in zip(lines, suite.test):
        data = json.loads(line)
        rebuilt = Task(
            id=data["id"],
            messages=data["messages"],
            tools=data["tools"],
            gold_calls=[[ToolCall.from_dict(c) for c in step] for step in data["gold_calls"]],
            subset=data["subset"],
            reference_answer=data.get("reference_answer"),
            metadata=data.get("metadata", {}),
        )
        assert rebuilt.to_dict() == task.to_dict()
        assert render_gold(rebuilt) == render_gold(task)


def test_module_cli_rejects_unknown_kind(tmp_path: Path):
    result = subprocess.run(
        [sys.executable, "-m", "slca_grpo.data.synthetic", "--out", str(tmp_path), "--kinds", "single=1,chitchat=2"],
        timeout=60,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and "unknown kind 'chitchat'" in result.stderr
    assert not (tmp_path / "train.jsonl").exists()


def test_module_cli_writes_splits(tmp_path: Path):
    out = tmp_path / "suite"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "slca_grpo.data.synthetic",
            "--seed",
            "4",
            "--n-train",
            "12",
            "--n-test",
            "6",
            "--out",
            str(out),
        ],
        check=True,
        timeout=60,
        capture_output=True,
    )
    assert len((out / "train.jsonl").read_text(encoding="utf-8").splitlines()) == 12
    assert len((out / "test.jsonl").read_text(encoding="utf-8").splitlines()) == 6
    expected = generate_suite(seed=4, n_train=12, n_test=6)
    assert (out / "test.jsonl").read_text(encoding="utf-8") == "".join(task_to_json(t) + "\n" for t in expected.test)
