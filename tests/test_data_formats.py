"""Each dataset format, read from small hand-written files with the published field names."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tool_schemas import weather_tool

from slca_grpo.chat.template import render_tools_system_prompt
from slca_grpo.data.formats import detect_format, get_format
from slca_grpo.data.formats.toolace import parse_python_calls
from slca_grpo.data.formats.xlam import type_schema
from slca_grpo.data.loader import load_dataset
from slca_grpo.data.tasks import TaskFormatError
from slca_grpo.datatypes import ToolCall

FIXTURES = Path(__file__).parent / "fixtures" / "datasets"


def tasks_of(name, **kwargs):
    return load_dataset(FIXTURES / name, **kwargs).tasks


def fixture_pairs(task):
    return [(f["name"], f["arguments"], f["response"]) for f in task.metadata.get("fixtures", [])]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("xlam.json", "xlam"),
        ("toolace.json", "toolace"),
        ("glaive.json", "glaive"),
        ("hermes.json", "sharegpt"),
        ("apigen_mt.json", "sharegpt"),
        ("openai.jsonl", "openai"),
        ("bfcl/BFCL_v4_simple_python.json", "bfcl"),
    ],
)
def test_each_fixture_is_detected_as_its_format(name, expected):
    report = load_dataset(FIXTURES / name)
    assert report.formats == {str(FIXTURES / name): expected}
    assert report.tasks and report.skipped == 0
    assert all(t.metadata["source"] == expected for t in report.tasks)


def test_formats_are_selected_by_name_or_alias_and_unknown_names_are_refused():
    assert get_format("apigen").name == "xlam"
    assert get_format("Hermes").name == get_format("apigen-mt").name == "sharegpt"
    with pytest.raises(ValueError, match="unknown data format 'parquet'.*known: auto, slca-tasks"):
        get_format("parquet")
    forced = tasks_of("hermes.json", data_format="hermes")
    assert [t.id for t in forced] == [t.id for t in tasks_of("hermes.json")]


def test_a_file_read_as_the_wrong_format_names_the_missing_field():
    with pytest.raises(TaskFormatError) as error:
        load_dataset(FIXTURES / "glaive.json", data_format="xlam")
    assert str(error.value) == f"{FIXTURES / 'glaive.json'}:row 1: query: missing"


# --- xLAM / APIGen ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "schema", "optional"),
    [
        ("str", {"type": "string"}, False),
        ("int, optional", {"type": "integer"}, True),
        ("List[str], optional", {"type": "array", "items": {"type": "string"}}, True),
        ("Dict[str, Any], optional", {"type": "object"}, True),
        ("Dict[str, float]", {"type": "object", "additionalProperties": {"type": "number"}}, False),
        ("Tuple[int, int]", {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "integer"}]}, False),
        ("Optional[int]", {"type": "integer"}, True),
        ("Union[int, float]", {"anyOf": [{"type": "integer"}, {"type": "number"}]}, False),
        ("Literal['fast', 'exact']", {"enum": ["fast", "exact"]}, False),
        ("List[List[int]]", {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}, False),
        ("typing.List[bool]", {"type": "array", "items": {"type": "boolean"}}, False),
        ("Callable[[int], int]", {}, False),
        ("bytes", {"description": "(type: bytes)"}, False),
        ("str) or (", {"description": "(type: str) or ()"}, False),
        ("", {}, False),
    ],
)
def test_xlam_type_strings_become_json_schema(text, schema, optional):
    assert type_schema(text) == (schema, optional)


def test_xlam_rows_become_tasks_with_parallel_gold_and_irrelevance():
    parallel, transactions, mars = tasks_of("xlam.json")
    assert parallel.id == "0" and parallel.messages == [
        {"role": "user", "content": "Where can I find live giveaways for beta access and games?"}
    ]
    assert parallel.gold_calls == [
        [ToolCall("live_giveaways_by_type", {"type": "beta"}), ToolCall("live_giveaways_by_type", {"type": "game"})]
    ]
    parameters = transactions.tools[0]["function"]["parameters"]
    assert parameters["required"] == ["account_id"]
    assert parameters["properties"]["limit"] == {
        "type": "integer",
        "description": "How many, newest first.",
        "default": 10,
    }
    assert parameters["properties"]["categories"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "Only these categories.",
    }
    assert mars.subset == "irrelevant" and mars.gold_calls == [] and mars.reference_answer is None


# --- ToolACE -----------------------------------------------------------------------------------


def test_toolace_python_calls_are_parsed_with_ast_and_names_made_valid():
    first, second = tasks_of("toolace.json")
    assert first.tool_names == ["Market_Trends_API", "Get_Stock_Price"]
    assert first.metadata["tool_names"] == {
        "Market_Trends_API": "Market Trends API",
        "Get_Stock_Price": "Get Stock Price",
    }
    assert first.gold_calls == [
        [
            ToolCall("Market_Trends_API", {"trend_type": "MOVERS", "country": "us"}),
            ToolCall("Get_Stock_Price", {"symbol": "AAPL", "precision": 0.01}),
        ]
    ]
    assert [r for *_, r in fixture_pairs(first)] == [
        '{"name": "Market Trends API", "results": {"trends": [{"name": "S&P 500", "change": "+0.5%"}]}}',
        '{"name": "Get Stock Price", "results": {"price": 189.84}}',
    ]
    assert first.reference_answer == "The S&P 500 is up 0.5%, and AAPL trades at $189.84."
    assert first.messages == [first.messages[0]] and first.messages[0]["role"] == "user"  # the system text is dropped
    price = first.tools[1]["function"]["parameters"]
    assert price == {
        "type": "object",
        "properties": {
            "symbol": {"type": "string", "description": "The ticker."},
            "precision": {"type": "number", "description": "Rounding step."},
        },
        "required": ["symbol"],
    }
    # The clarifying turn stays in the prompt; the call after the user's answer is the gold step.
    assert [m["role"] for m in second.messages] == ["user", "assistant", "user"]
    assert second.gold_calls == [
        [ToolCall("Get_Weather", {"city": "Lisbon", "metric": True, "fields": ["temperature", "wind"]})]
    ]
    assert fixture_pairs(second)[0][2] == '{"name": "Get Weather", "results": {"temperature": 21, "wind": "12 km/h"}}'


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('[Get Data("x")]', "keyword arguments only"),
        ("[Get Data(a=__import__('os').system('echo hacked'))]", "not a literal"),
        ("[Get Data(a={**x})]", r"\*\* inside a dict"),
        ("[Get Data(a=1", None),  # not a closed list: plain text, no call
        ("[Get Data(a=1) + 2]", "each element must be a call"),
        ("[Get Data(a=1)) ]", "not a parsable call list"),
    ],
)
def test_toolace_call_syntax_errors_are_named_and_nothing_is_evaluated(text, problem):
    if problem is None:
        assert parse_python_calls(text, ["Get Data"], "v") is None
        return
    with pytest.raises(TaskFormatError, match=problem) as error:
        parse_python_calls(text, ["Get Data"], "conversations[1].value")
    assert error.value.field.startswith("conversations[1].value")


def test_toolace_values_accept_json_spellings_and_nested_literals():
    calls = parse_python_calls('[f(a=null, b=[1, -2.5], c={"k": (1, 2)}, d=True)]', ["f"], "v")
    assert calls == [ToolCall("f", {"a": None, "b": [1, -2.5], "c": {"k": [1, 2]}, "d": True})]


# --- Glaive ------------------------------------------------------------------------------------


def test_glaive_single_quoted_arguments_are_read_without_eval():
    bmi, joke = tasks_of("glaive.json")
    # Two user turns: the task is the second request, the first exchange its history.
    assert [m["role"] for m in bmi.messages] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert bmi.messages[2]["tool_calls"][0]["function"] == {
        "name": "calculate_bmi",
        "arguments": {"weight": 70, "height": 1.75},
    }
    assert bmi.messages[3]["content"] == '{"bmi": 22.86}'
    # An apostrophe inside the quoted arguments breaks the Python literal: the quoted JSON is cut out.
    assert bmi.gold_calls == [[ToolCall("search_songs", {"title": "Don't Stop Me Now"})]]
    assert bmi.reference_answer == 'I found "Don\'t Stop Me Now" by Queen.'
    assert bmi.messages[0]["content"] == (
        "You are a helpful assistant with access to the following functions. Use them if required -"
    )
    assert joke.tools == [] and joke.subset == "irrelevant" and joke.reference_answer.startswith("Why did the")


# --- ShareGPT: Hermes function-calling, APIGen-MT ----------------------------------------------


def test_hermes_parallel_blocks_pair_with_their_responses_in_order():
    parallel, chained = tasks_of("hermes.json")
    assert parallel.id == "7d2f5c3e-3b7a-4c1e-9f0a-2b6d8e1f4a90"
    assert parallel.tool_names == ["get_stock_price", "get_company_news"]  # from a Python-literal <tools> list
    assert parallel.gold_calls == [
        [
            ToolCall("get_stock_price", {"symbol": "TSLA"}),
            ToolCall("get_company_news", {"company": "Tesla", "limit": 1}),
        ]
    ]
    assert [r for *_, r in fixture_pairs(parallel)] == [
        '{"name": "get_stock_price", "content": {"symbol": "TSLA", "price": 251.3}}',
        '{"name": "get_company_news", "content": {"headline": "Tesla opens a new factory"}}',
    ]
    system = parallel.messages[0]["content"]
    assert "<tools>\n[" not in system and "get_stock_price" not in system  # the listing left the system text
    assert parallel.metadata["category"] == "Finance"
    # Tools one JSON object per line; two sequential steps; text said before a call is kept.
    assert chained.gold_calls == [
        [ToolCall("find_recipe", {"dish": "lasagna"})],
        [ToolCall("get_nutrition", {"recipe_id": "R-17"})],
    ]
    assert chained.metadata["step_texts"] == ["Let me find a lasagna recipe first.", ""]
    assert fixture_pairs(chained)[1] == ("get_nutrition", {"recipe_id": "R-17"}, '{"calories": 540}')


def test_apigen_mt_multi_turn_dialogue_keeps_its_history_and_the_last_request_is_gold():
    (task,) = tasks_of("apigen_mt.json")
    roles = [m["role"] for m in task.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant", "tool", "assistant", "user"]
    assert task.messages[0]["content"].startswith("# Airline Agent Policy")
    history_call = task.messages[4]["tool_calls"][0]
    assert history_call["function"] == {"name": "get_reservation_details", "arguments": {"reservation_id": "0U4NPP"}}
    assert task.messages[5]["tool_call_id"] == history_call["id"]
    assert task.question == "Yes, please cancel it."
    assert task.gold_calls == [[ToolCall("cancel_reservation", {"reservation_id": "0U4NPP"})]]
    assert fixture_pairs(task) == [
        ("cancel_reservation", {"reservation_id": "0U4NPP"}, '{"reservation_id": "0U4NPP", "status": "cancelled"}')
    ]
    assert task.reference_answer.startswith("Your reservation 0U4NPP is cancelled")


def test_consecutive_function_calls_are_one_parallel_step_with_a_list_of_results(tmp_path):
    row = {
        "conversations": [
            {"from": "human", "value": "Weather in Oslo and Rome?"},
            {"from": "function_call", "value": '{"name": "weather", "arguments": {"city": "Oslo"}}'},
            {"from": "function_call", "value": '{"name": "weather", "arguments": {"city": "Rome"}}'},
            {"from": "observation", "value": '[{"temp": 3}, {"temp": 18}]'},
            {"from": "gpt", "value": "Oslo 3°C, Rome 18°C."},
        ],
        "tools": [{"name": "weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    }
    path = tmp_path / "mt.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (task,) = load_dataset(path).tasks
    assert task.gold_calls == [[ToolCall("weather", {"city": "Oslo"}), ToolCall("weather", {"city": "Rome"})]]
    assert [r for *_, r in fixture_pairs(task)] == ['{"temp": 3}', '{"temp": 18}']


# --- OpenAI chat -------------------------------------------------------------------------------


def test_openai_messages_pair_responses_by_call_id_and_read_the_legacy_form():
    flights, legacy = tasks_of("openai.jsonl")
    assert flights.id == "openai-1"
    assert flights.gold_calls == [
        [ToolCall("search_flights", {"origin": "OSL", "destination": "FCO", "date": "2025-05-02"})],
        [ToolCall("book_flight", {"flight_id": "FL1"})],
    ]
    assert flights.metadata["step_texts"] == ["", "FL1 is the cheapest; booking it."]
    assert fixture_pairs(flights)[1][2] == '{"booking_id": "BK9", "status": "confirmed"}'
    assert legacy.tool_names == ["calculate"]
    assert legacy.gold_calls == [[ToolCall("calculate", {"expression": "2 + 2"})]]
    assert fixture_pairs(legacy)[0][2] == "4"
    assert legacy.reference_answer == "2 + 2 = 4."  # from a list of content parts


def test_responses_answering_unknown_call_ids_are_an_error(tmp_path):
    row = json.loads((FIXTURES / "openai.jsonl").read_text().splitlines()[0])
    row["messages"][3]["tool_call_id"] = "call_zz"
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(TaskFormatError) as error:
        load_dataset(path)
    assert str(error.value) == f"{path}:1: messages[3]: answers call id 'call_zz', which no call has"


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"role": {"name": "user"}}, "messages[1]: role must be one of"),
        ({"tool_calls": "get_weather"}, "messages[1].tool_calls: must be a list of calls, got str"),
    ],
)
def test_openai_message_fields_of_the_wrong_type_are_named(tmp_path, change, problem):
    row = json.loads((FIXTURES / "openai.jsonl").read_text().splitlines()[0])
    row["messages"][1].update(change)
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(TaskFormatError, match=re.escape(f"{path}:1: {problem}")):
        load_dataset(path, data_format="openai")


# --- The paper's release (verl-style Parquet) ----------------------------------------------------

WEATHER = weather_tool(description="Weather of a city", city_required=True)
CLOCK = {"name": "get_time", "description": "Local time", "parameters": {"type": "object", "properties": {}}}


def release_rl_row(index, gold, subset="tool_call", allowed=("get_weather", "get_time"), **extra):
    question = f"Weather in Oslo and Rome, and the time? ({index})"
    return {
        "data_source": "toucan",
        "prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": question}],
        "tools": json.dumps([WEATHER, CLOCK]),
        "ability": "tool_call",
        "reward_model": {
            "style": "rule",
            "ground_truth": json.dumps(
                {
                    "allowed_tools": list(allowed),
                    "gold_tool_calls": gold,
                    "question_content": question,
                    "tool_schemas": [WEATHER, CLOCK],
                    "subset_name": subset,
                }
            ),
        },
        "extra_info": {"index": index, "task_id": f"toucan-{index}", **extra},
    }


def write_parquet(path, rows):
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_release_rl_rows_read_steps_of_parallel_calls_flat_names_and_irrelevance(tmp_path):
    steps = [
        [
            {"name": "get_weather", "arguments": {"city": "Oslo"}},
            {"name": "get_weather", "arguments": '{"city": "Rome"}'},
        ],
        [{"name": "get_time", "arguments": {}}],
    ]
    rows = [
        release_rl_row(0, steps),
        release_rl_row(1, ["get_weather", "get_time"]),
        release_rl_row(2, [], subset="irrelevant", allowed=("get_weather",)),
    ]
    path = write_parquet(tmp_path / "train.parquet", rows)
    report = load_dataset(path)
    assert report.formats == {str(path): "slca-release"}
    parallel, names, irrelevant = report.tasks
    assert parallel.id == "toucan-0" and parallel.messages[0] == {"role": "system", "content": "Be brief."}
    assert parallel.gold_calls == [
        [ToolCall("get_weather", {"city": "Oslo"}), ToolCall("get_weather", {"city": "Rome"})],
        [ToolCall("get_time", {})],
    ]
    assert parallel.tools[1] == {"type": "function", "function": {**CLOCK}}
    assert parallel.metadata["data_source"] == "toucan" and "gold_arguments" not in parallel.metadata
    assert names.gold_calls == [[ToolCall("get_weather")], [ToolCall("get_time")]]
    assert names.metadata["gold_arguments"] is False
    assert irrelevant.subset == "irrelevant" and irrelevant.metadata["allowed_tools"] == ["get_weather"]


def test_release_rows_carrying_our_task_read_it_back_whole(tmp_path):
    (original,) = tasks_of("apigen_mt.json")
    row = release_rl_row(0, [], extra_task=None)
    row["extra_info"] = {"index": 0, "task_id": original.id, "task": json.dumps(original.to_dict())}
    (task,) = load_dataset(write_parquet(tmp_path / "verl.parquet", [row])).tasks
    assert {**task.to_dict(), "metadata": {}} == {**original.to_dict(), "metadata": {}}
    assert task.metadata["fixtures"] == original.metadata["fixtures"]


def as_release_row(task, index):
    """A task in the release's row layout, as a verl row writer that stores no task dump would."""
    return {
        "data_source": "slca",
        "prompt": task.messages,
        "tools": json.dumps(task.tools),
        "reward_model": {
            "style": "rule",
            "ground_truth": {
                "allowed_tools": task.tool_names,
                "gold_tool_calls": json.dumps([[c.to_dict() for c in step] for step in task.gold_calls]),
                "question_content": task.question,
                "tool_schemas": json.dumps(task.tools),
                "subset_name": task.subset,
            },
        },
        "extra_info": {"index": index, "task_id": task.id},
    }


def test_tasks_written_in_the_release_layout_read_back_as_the_same_tasks(tmp_path):
    tasks = tasks_of("openai.jsonl") + tasks_of("xlam.json")
    back = load_dataset(write_parquet(tmp_path / "rows.parquet", [as_release_row(t, i) for i, t in enumerate(tasks)]))
    keys = ("id", "messages", "tools", "gold_calls", "subset")
    assert [{k: t.to_dict()[k] for k in keys} for t in back.tasks] == [{k: t.to_dict()[k] for k in keys} for t in tasks]


def test_release_sft_rows_read_a_qwen_style_system_turn(tmp_path):
    system = render_tools_system_prompt([WEATHER], "You are Toucan, a helpful agent.")
    row = {
        "data_source": "toucan-sft",
        "conversations": [
            {"from": "system", "value": system},
            {"from": "human", "value": "Weather in Oslo?"},
            {
                "from": "gpt",
                "value": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
            },
            {"from": "human", "value": '<tool_response>\n{"temp": 3}\n</tool_response>'},
            {"from": "gpt", "value": "It is 3°C in Oslo."},
        ],
    }
    path = write_parquet(tmp_path / "sft.parquet", [row])
    for data_format in ("auto", "slca-release"):
        (task,) = load_dataset(path, data_format=data_format).tasks
        assert task.messages == [
            {"role": "system", "content": "You are Toucan, a helpful agent."},
            {"role": "user", "content": "Weather in Oslo?"},
        ]
        assert task.tools == [WEATHER]
        assert fixture_pairs(task) == [("get_weather", {"city": "Oslo"}, '{"temp": 3}')]
        assert task.reference_answer == "It is 3°C in Oslo."


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (lambda r: r["reward_model"].update(ground_truth="{oops"), "reward_model.ground_truth", "not valid JSON"),
        (lambda r: r.update(reward_model={"style": "rule"}), "reward_model.ground_truth", "must be an object"),
        (lambda r: r.update(prompt=None), "prompt", "missing"),
    ],
)
def test_release_row_errors_name_file_row_and_field(tmp_path, change, field, problem):
    rows = [release_rl_row(0, [[{"name": "get_weather", "arguments": {"city": "Oslo"}}]]) for _ in range(2)]
    rows[1]["extra_info"]["task_id"] = "second"
    change(rows[1])
    path = write_parquet(tmp_path / "bad.parquet", rows)
    with pytest.raises(TaskFormatError) as error:
        load_dataset(path)
    assert str(error.value).startswith(f"{path}:row 2: {field}: {problem}")


@pytest.mark.parametrize(
    ("gold", "allowed", "subset", "message"),
    [
        ([[]], ("get_weather",), "tool_call", "reward_model.ground_truth.gold_tool_calls[0]: an empty step"),
        ([[{"arguments": {}}]], ("get_weather",), "tool_call", "gold_tool_calls[0][0]: a call needs a non-empty"),
        ([], ("get_weather", "nope"), "irrelevant", "allowed_tools: 'nope' is not among the row's tools"),
        ([], ("get_weather",), "maybe", "subset_name: must be one of tool_call, irrelevant"),
    ],
)
def test_release_ground_truth_errors_name_their_field(tmp_path, gold, allowed, subset, message):
    path = write_parquet(tmp_path / "bad.parquet", [release_rl_row(0, gold, subset=subset, allowed=allowed)])
    with pytest.raises(TaskFormatError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_dataset(path)


def test_detection_needs_a_known_shape():
    assert detect_format({"prompt": [], "reward_model": {}}).name == "slca-release"
    assert detect_format({"question": [], "function": []}).name == "bfcl"
    assert detect_format({"system": "x <tools>[]</tools>", "conversations": [{}]}).name == "sharegpt"
    assert detect_format({"text": "hello"}) is None and detect_format(["a"]) is None
    # Our tasks may leave out gold_calls (an irrelevant task); a recorded reply makes a conversation.
    prompt = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    assert detect_format({"id": "t", "messages": prompt, "tools": []}).name == "slca-tasks"
    assert detect_format({"id": 1}).name == "slca-tasks"  # then its validation names what is missing
    reply = [*prompt, {"role": "assistant", "content": "a"}]
    assert detect_format({"id": "t", "messages": reply, "tools": []}).name == "openai"
