import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slca_grpo.chat import BlockStatus, parse_tool_calls, render_tool_calls, strip_think
from slca_grpo.datatypes import ToolCall

TOOLS = ["get_weather", "book_flight"]


def block(body: str) -> str:
    return f"<tool_call>{body}</tool_call>"


def test_single_valid_call_and_answer():
    text = block('{"name": "get_weather", "arguments": {"city": "Paris"}}') + "\nDone."
    parsed = parse_tool_calls(text, TOOLS)
    assert [b.status for b in parsed.blocks] == [BlockStatus.VALID]
    assert parsed.calls == [ToolCall("get_weather", {"city": "Paris"})]
    assert (parsed.n_open, parsed.n_close) == (1, 1)
    assert parsed.final_answer == "Done."
    assert parsed.format_score == 1.0
    assert parsed.has_tool_call


def test_parallel_list_parameters_and_string_arguments():
    body = json.dumps(
        [
            {"name": "get_weather", "parameters": {"city": "Oslo"}},
            {"name": "get_weather", "arguments": json.dumps({"city": "Rome"})},
            {"name": "book_flight"},
        ]
    )
    parsed = parse_tool_calls(block(body), TOOLS)
    assert parsed.blocks[0].status is BlockStatus.VALID
    assert parsed.calls == [
        ToolCall("get_weather", {"city": "Oslo"}),
        ToolCall("get_weather", {"city": "Rome"}),
        ToolCall("book_flight", {}),
    ]


@pytest.mark.parametrize(
    "body, status",
    [
        ("{not json", BlockStatus.BAD_JSON),
        ("", BlockStatus.BAD_JSON),
        ("[]", BlockStatus.BAD_STRUCTURE),
        ("42", BlockStatus.BAD_STRUCTURE),
        ('{"arguments": {}}', BlockStatus.BAD_STRUCTURE),
        ('{"name": 7}', BlockStatus.BAD_STRUCTURE),
        ('{"name": "send_email", "arguments": {}}', BlockStatus.UNKNOWN_TOOL),
        ('{"name": "get_weather", "arguments": [1, 2]}', BlockStatus.BAD_ARGUMENTS),
        ('{"name": "get_weather", "arguments": "{oops"}', BlockStatus.BAD_ARGUMENTS),
        ('{"name": "get_weather", "arguments": "[1]"}', BlockStatus.BAD_ARGUMENTS),
    ],
)
def test_block_statuses(body, status):
    parsed = parse_tool_calls(block(body), TOOLS)
    assert [b.status for b in parsed.blocks] == [status]
    assert parsed.calls == []
    assert parsed.blocks[0].error
    assert parsed.format_score == 0.0


def test_unknown_tool_keeps_calls_but_not_in_valid_calls():
    parsed = parse_tool_calls(block('{"name": "send_email", "arguments": {"to": "a"}}'), TOOLS)
    assert parsed.blocks[0].calls == (ToolCall("send_email", {"to": "a"}),)
    assert parsed.calls == []
    # Without an allow-list any name is accepted.
    assert parse_tool_calls(block('{"name": "send_email"}')).calls == [ToolCall("send_email", {})]


def test_format_score_counts_unbalanced_tags():
    good = block('{"name": "get_weather", "arguments": {}}')
    # 2 opens, 1 close, 1 valid block -> 1/2
    assert parse_tool_calls("<tool_call>" + good, TOOLS).format_score == pytest.approx(0.5)
    # 1 open, 3 closes -> 1/3
    assert parse_tool_calls(good + "</tool_call></tool_call>", TOOLS).format_score == pytest.approx(1 / 3)
    # valid + bad block -> 1/2
    assert parse_tool_calls(good + block("{"), TOOLS).format_score == pytest.approx(0.5)


def test_nested_open_tags_take_innermost_body():
    text = '<tool_call>junk<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>'
    parsed = parse_tool_calls(text, TOOLS)
    assert len(parsed.blocks) == 1 and parsed.blocks[0].is_valid
    assert (parsed.n_open, parsed.n_close) == (2, 1)


def test_final_answer_rules():
    call = block('{"name": "get_weather", "arguments": {}}')
    response = '<tool_response>\n{"temp": 20}\n</tool_response>'
    assert parse_tool_calls(f"{call}{response} It is 20 degrees.").final_answer == "It is 20 degrees."
    assert parse_tool_calls(f"Let me check. {call} after call").final_answer == "after call"
    assert parse_tool_calls("Just prose, no calls.").final_answer == "Just prose, no calls."
    # A dangling unterminated call is not part of the answer.
    assert parse_tool_calls('Hello <tool_call>{"name": "x"').final_answer == "Hello"
    assert parse_tool_calls(f"{call}{response}").tool_responses == ('{"temp": 20}',)


def test_final_answer_strips_chat_markers():
    text = (
        block('{"name": "get_weather", "arguments": {}}')
        + "<|im_end|>\n<|im_start|>user\n<tool_response>\n{}\n</tool_response><|im_end|>\n"
        + "<|im_start|>assistant\nSunny in Paris.<|im_end|>"
    )
    assert parse_tool_calls(text).final_answer == "Sunny in Paris."


def test_think_blocks_are_stripped_first():
    hidden = block('{"name": "book_flight", "arguments": {}}')
    text = f"<think>maybe {hidden}</think>" + block('{"name": "get_weather", "arguments": {}}') + " ok"
    parsed = parse_tool_calls(text, TOOLS)
    assert [c.name for c in parsed.calls] == ["get_weather"]
    assert parsed.n_open == 1
    assert strip_think("reasoning</think>answer") == "answer"
    assert strip_think("answer<think>unfinished " + hidden) == "answer"


def test_render_then_parse_round_trip():
    calls = [ToolCall("get_weather", {"city": "Zürich", "days": 3}), ToolCall("book_flight", {"id": "F1"})]
    parsed = parse_tool_calls(render_tool_calls(calls), TOOLS)
    assert parsed.calls == calls
    assert parsed.format_score == 1.0


NASTY = [
    "",
    "<tool_call>",
    "</tool_call>",
    "<tool_call><tool_call></tool_call></tool_call>",
    "</tool_call><tool_call>",
    block('{"name": "get_weather", "arguments": {"n": ' + "9" * 5000 + "}}"),  # > int digit limit
    block('{"name": "get_weather", "arguments": {"n": 1e999999}}'),
    block("[" * 100_000 + "]" * 100_000),  # recursion depth
    block('{"name": "get_weather", "arguments": {"s": "\\ud800"}}'),  # lone surrogate escape
    block("\ud800\udfff\x00"),
    "<think>" * 1000 + "</think>" * 999,
    block('{"name": "' + "a" * 100_000 + '"}'),
    block('{"name": "get_weather", "arguments": NaN}'),
    "<tool_response>" * 5000,
    block('{"name": "get_weather", "arguments": {"a": {"b": {"c": [[[[[]]]]]}}}}') * 200,
]


@pytest.mark.parametrize("text", NASTY, ids=range(len(NASTY)))
def test_nasty_inputs_never_raise(text):
    parsed = parse_tool_calls(text, TOOLS)
    assert 0.0 <= parsed.format_score <= 1.0
    assert isinstance(parsed.final_answer, str)


def test_non_string_input_is_a_value():
    assert parse_tool_calls(None).blocks == ()
    parsed = parse_tool_calls(b'<tool_call>{"name": "get_weather"}</tool_call>\xff ok', TOOLS)
    assert parsed.calls == [ToolCall("get_weather", {})]
    assert parsed.final_answer == "\ufffd ok"
    assert parse_tool_calls(12345).final_answer == "12345"


def test_one_megabyte_inputs_in_bounded_time():
    inputs = [
        "x" * 1_000_000,
        "<tool_call>" * 90_000,
        "</tool_call>" * 80_000,
        ("<tool_call>{" + " " * 50 + "</tool_call>") * 15_000,
        "<think>" + "y" * 1_000_000,
        ("<tool_call>" + "a" * 30 + "</tool_response>") * 20_000,
    ]
    for text in inputs:
        start = time.perf_counter()
        parse_tool_calls(text, TOOLS)
        # Generous bound: guards against quadratic scans (which take minutes here), not speed.
        assert time.perf_counter() - start < 5.0


tags = st.sampled_from(
    ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>", "<|im_end|>"]
)
fragments = st.one_of(
    tags,
    st.text(max_size=30),
    st.just('{"name": "get_weather", "arguments": {"city": "X"}}'),
    st.just('[{"name": "book_flight", "parameters": "{}"}]'),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(fragments, max_size=25))
def test_fuzz_structured_fragments(parts):
    text = "".join(parts)
    parsed = parse_tool_calls(text, TOOLS)
    assert parsed.n_open == parsed.text.count("<tool_call>")
    assert len(parsed.blocks) <= min(parsed.n_open, parsed.n_close)
    assert 0.0 <= parsed.format_score <= 1.0
    assert all(c.name in TOOLS for c in parsed.calls)
    assert "<tool_call>" not in parsed.final_answer and "</tool_call>" not in parsed.final_answer


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=2000))
def test_fuzz_arbitrary_text(text):
    parsed = parse_tool_calls(text, TOOLS)
    assert isinstance(parsed.final_answer, str)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.builds(
            ToolCall,
            name=st.sampled_from(TOOLS),
            arguments=st.dictionaries(
                st.text(min_size=1, max_size=8),
                st.recursive(
                    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=8,
                ),
                max_size=4,
            ),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_rendered_calls_always_parse_back(calls):
    parsed = parse_tool_calls("Sure. " + render_tool_calls(calls) + " bye", TOOLS)
    assert parsed.calls == calls
    assert parsed.format_score == 1.0
    assert parsed.final_answer == "bye"


def test_strip_tool_call_blocks_keeps_prose_only():
    from slca_grpo.chat import strip_tool_call_blocks

    text = "Let me check. " + block('{"name": "get_weather"}') + " and " + block("[]") + " done <tool_call>{dangling"
    assert strip_tool_call_blocks(text) == "Let me check.  and  done <tool_call>{dangling"
    assert strip_tool_call_blocks("plain") == "plain"
