"""The per-turn reward (rewards/turns.py): hand-scored turns, the turn-to-step rules, the batch path.

Execution weights are the defaults: fmt 0.10, name 0.25, key 0.15, value 0.20, parallel 0.30.
"""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tool_schemas import string_tool

from slca_grpo.datatypes import SUBSET_IRRELEVANT, Task, ToolCall, Turn
from slca_grpo.rewards import RuleJudge, compute_rewards, split_turns, turn_rewards
from slca_grpo.rewards.config import ExecutionWeights, RewardConfig
from slca_grpo.rewards.turns import TurnRewardFamily, _align

SEARCH = ToolCall("search_flights", {"origin": "OSL", "destination": "ROM"})
BOOK = ToolCall("book_flight", {"flight_id": "FL-1"})


def flight_task(**changes) -> Task:
    base = {
        "id": "two-step",
        "messages": [{"role": "user", "content": "Book the cheapest flight from Oslo to Rome."}],
        "tools": [string_tool("search_flights", "origin", "destination"), string_tool("book_flight", "flight_id")],
        "gold_calls": [[SEARCH], [BOOK]],
    }
    return Task(**{**base, **changes})


def call(*calls: ToolCall) -> str:
    body = [c.to_dict() for c in calls]
    return "<tool_call>" + json.dumps(body[0] if len(body) == 1 else body) + "</tool_call>"


WRONG_FLIGHT = ToolCall("book_flight", {"flight_id": "FL-9"})
ANSWER = "Your flight FL-1 from Oslo to Rome is booked."


def test_only_step_two_wrong_scores_step_one_in_full():
    rewards = turn_rewards(flight_task(), [call(SEARCH), call(WRONG_FLIGHT), ANSWER])
    # Step 2: format, name, keys and parallel right, the value wrong: 0.1 + 0.25 + 0.15 + 0 + 0.3.
    assert rewards.values == pytest.approx((1.0, 0.8, 0.0))
    assert [t.step for t in rewards.turns] == [0, 1, None]
    assert rewards.step_scores == pytest.approx((1.0, 0.8))
    assert (rewards.missing, rewards.extra) == (0, 0)
    assert rewards.turns[1].execution.value == 0.0 and rewards.turns[2].has_call is False


def test_hand_scored_parts_against_the_served_step():
    one_step = flight_task(gold_calls=[[SEARCH]])
    half = ToolCall("search_flights", {"origin": "OSL", "destination": "PAR"})
    # one value of two wrong: 0.1 + 0.25 + 0.15 + 0.2 * 0.5 + 0.3
    assert turn_rewards(one_step, [call(half)]).values == pytest.approx((0.9,))
    # two calls where the step has one: name F1 2·1/(2+1), the gold call matched, parallel 0
    twice = turn_rewards(one_step, [call(SEARCH, SEARCH)])
    assert twice.values == pytest.approx((0.1 + 0.25 * 2 / 3 + 0.15 + 0.2,))
    # custom weights: only the name counts
    names_only = RewardConfig(weights=ExecutionWeights(fmt=0, name=1, key=0, value=0, parallel=0))
    assert turn_rewards(flight_task(), [call(SEARCH), call(WRONG_FLIGHT)], names_only).values == (1.0, 1.0)


def test_more_call_turns_than_steps_leave_the_extra_ones_at_zero():
    rewards = turn_rewards(flight_task(), [call(SEARCH), call(SEARCH), call(BOOK), ANSWER])
    # The repeat of step 1 serves nothing (each step once, the earlier turn keeps it).
    assert rewards.values == pytest.approx((1.0, 0.0, 1.0, 0.0))
    assert [t.step for t in rewards.turns] == [0, None, 1, None]
    assert (rewards.missing, rewards.extra) == (0, 1)


def test_a_retry_takes_the_step_from_the_failed_attempt():
    bad = ToolCall("search_flights", {"origin": "OSL", "destination": "PAR"})
    rewards = turn_rewards(flight_task(), [call(bad), call(SEARCH), call(BOOK)])
    # bad→1, BOOK→2 would total 0.9 + 1.0; SEARCH→1, BOOK→2 totals 2.0: the failed attempt is extra.
    assert rewards.values == pytest.approx((0.0, 1.0, 1.0))
    assert rewards.extra == 1


def test_out_of_order_and_missing_steps():
    # Step 2 first, then step 1: in order only one of them can be served; on the tie the earlier turn
    # wins, and it went past step 1, so it is charged for it: (1.0 + 0) / 2.
    rewards = turn_rewards(flight_task(), [call(BOOK), call(SEARCH), ANSWER])
    assert rewards.values == pytest.approx((0.5, 0.0, 0.0))
    assert [(t.step, t.charged) for t in rewards.turns] == [(1, 1), (None, 0), (None, 0)]
    assert rewards.step_scores == pytest.approx((0.0, 1.0))  # scores against the steps, without charges
    assert (rewards.missing, rewards.extra) == (1, 1)
    # Answering after step 1: the last call turn is charged for step 2.
    early = turn_rewards(flight_task(), [call(SEARCH), ANSWER])
    assert early.values == pytest.approx((0.5, 0.0)) and early.missing == 1 and early.step_scores == (1.0, 0.0)
    # Repeating step 1 where step 2 was due: the repeat calls none of step 2's tools, so it earns
    # nothing for it (format and parallel credit alone do not serve a step) and serves nothing; step
    # 2 is missing and charged to the turn the rollout stopped progressing after.
    repeat = turn_rewards(flight_task(), [call(SEARCH), call(SEARCH), ANSWER])
    assert repeat.values == pytest.approx((0.5, 0.0, 0.0)) and repeat.missing == 1 and repeat.extra == 1
    # Skipping step 1 with a right step 2: charged; two of three steps missing: (score + 0 + 0) / 3.
    three = flight_task(gold_calls=[[SEARCH], [BOOK], [WRONG_FLIGHT]])
    assert turn_rewards(three, [call(BOOK), ANSWER]).values == pytest.approx((1 / 3, 0.0))


def test_truncated_rollouts_score_what_they_wrote():
    # The turn limit left the last call unanswered: it is still a call turn serving step 2.
    unanswered = turn_rewards(flight_task(), [call(SEARCH), call(BOOK)])
    assert unanswered.values == pytest.approx((1.0, 1.0))
    # Cut inside the call: an open tag and no valid block, so it earns nothing and serves no step;
    # step 2 is missing and charged to the search, exactly as if the rollout had stopped there.
    cut = turn_rewards(flight_task(), [call(SEARCH), '<tool_call>{"name": "book_fl'])
    assert cut.values == pytest.approx((0.5, 0.0)) and cut.turns[1].has_call and cut.turns[1].step is None
    # Nothing at all: every step missing, and no call turn to charge.
    assert turn_rewards(flight_task(), []).missing == 2
    assert turn_rewards(flight_task(), [ANSWER]).values == (0.0,)


def test_irrelevant_tasks_and_turns_without_calls():
    irrelevant = flight_task(gold_calls=[], subset=SUBSET_IRRELEVANT)
    rewards = turn_rewards(irrelevant, [call(SEARCH), "I cannot do that, sorry."])
    assert rewards.values == (0.0, 0.0) and rewards.extra == 1 and rewards.steps == 0
    # Empty gold steps are skipped; a stray close tag is a (malformed) call turn that serves nothing.
    gappy = turn_rewards(flight_task(gold_calls=[[], [SEARCH]]), ["text </tool_call>", call(SEARCH)])
    assert gappy.values == pytest.approx((0.0, 1.0)) and gappy.steps == 1 and gappy.extra == 1


def test_inputs_may_be_texts_or_turn_records():
    texts = [call(SEARCH), call(WRONG_FLIGHT), ANSWER]
    records = [Turn(text=text, calls=[]) for text in texts]
    assert turn_rewards(flight_task(), records) == turn_rewards(flight_task(), texts)
    # Malformed model output is a value, never an exception.
    junk = turn_rewards(flight_task(), ["<tool_call>{not json</tool_call>", "<tool_call>[]</tool_call>", "\x00"])
    assert junk.values == (0.0, 0.0, 0.0)


def test_split_turns_cuts_after_each_call():
    text = call(SEARCH) + "<tool_response>{}</tool_response>" + call(BOOK) + "<tool_response>{}</tool_response>done"
    turns = split_turns(text)
    assert turns == [
        call(SEARCH),
        "<tool_response>{}</tool_response>" + call(BOOK),
        "<tool_response>{}</tool_response>done",
    ]
    assert split_turns(call(SEARCH)) == [call(SEARCH)]
    assert split_turns("") == [""]


def test_the_batch_path_with_and_without_turns():
    first = call(SEARCH)
    second = "<|im_start|>user\n<tool_response>{}</tool_response><|im_end|>\n" + call(WRONG_FLIGHT)
    last = "<|im_start|>user\n<tool_response>{}</tool_response><|im_end|>\n" + ANSWER
    task = flight_task()
    with_turns = compute_rewards(
        [first + second + last], [task], RuleJudge(), names=("turn",), turns=[[first, second, last]]
    )
    from_text = compute_rewards([first + second + last], [task], RuleJudge(), names=("turn",))
    assert with_turns.as_dict()["turn"] == [pytest.approx([1.0, 0.8, 0.0])]
    assert from_text.as_dict() == with_turns.as_dict()
    assert with_turns.records[0].to_dict()["turn"]["steps"] == 2
    # Rows of different lengths become a zero-padded [B, K] tensor (the second row stopped after
    # step 1, so its one turn is charged for step 2).
    batch = compute_rewards(["x", "y"], [task, task], None, names=("turn",), turns=[[first, second, last], [first]])
    tensor = batch.tensors()["turn"]
    assert tensor.shape == (2, 3) and tensor[1].tolist() == pytest.approx([0.5, 0.0, 0.0])
    metrics = batch.metrics()
    assert metrics["reward/turn_step_1"] == pytest.approx(1.0)
    assert metrics["reward/turn_step_2"] == pytest.approx(0.4)  # 0.8 and a missing step (0)
    assert metrics["reward/turn_missing"] == pytest.approx(0.5) and metrics["reward/turn_extra"] == 0.0
    with pytest.raises(ValueError, match="2 turn lists for 1 texts"):
        compute_rewards(["x"], [task], None, names=("turn",), turns=[[], []])
    assert TurnRewardFamily.uses_turns


def brute_force_best(scores: list[list[float | None]]) -> float:
    """The largest total over every order-preserving one-to-one pairing of turns with steps they
    can serve (``None``: that turn cannot serve that step)."""
    turns, steps = len(scores), len(scores[0]) if scores else 0
    best = 0.0
    for size in range(min(turns, steps) + 1):
        for chosen_turns in itertools.combinations(range(turns), size):
            for chosen_steps in itertools.combinations(range(steps), size):
                pairs = [scores[i][j] for i, j in zip(chosen_turns, chosen_steps)]
                if None not in pairs:
                    best = max(best, sum(pairs))  # type: ignore[arg-type]
    return best


score_tables = st.integers(0, 4).flatmap(
    lambda turns: st.integers(0, 3).flatmap(
        lambda steps: st.lists(
            st.lists(st.sampled_from([None, 0.1, 0.4, 0.8, 0.9, 1.0]), min_size=steps, max_size=steps),
            min_size=turns,
            max_size=turns,
        )
    )
)


@settings(max_examples=200, deadline=None)
@given(score_tables)
def test_alignment_is_the_best_order_preserving_pairing(scores: list[list[float | None]]) -> None:
    served = _align(scores)
    assert len(served) == len(scores)
    steps = [s for s in served if s is not None]
    assert steps == sorted(set(steps))  # each step once, in order
    assert all(scores[i][s] is not None for i, s in enumerate(served) if s is not None)  # only pairs it can serve
    total = sum(scores[i][s] for i, s in enumerate(served) if s is not None)  # type: ignore[misc]
    assert total == pytest.approx(brute_force_best(scores))


calls = st.sampled_from([SEARCH, BOOK, WRONG_FLIGHT, ToolCall("search_flights", {"origin": "OSL"})])
turn_texts = st.lists(st.one_of(calls.map(call), st.just(ANSWER), st.text(max_size=20)), max_size=5)


@settings(max_examples=60, deadline=None)
@given(turn_texts)
def test_rewards_are_bounded_and_each_step_served_at_most_once(texts: list[str]) -> None:
    rewards = turn_rewards(flight_task(), texts)
    assert len(rewards.values) == len(texts)
    assert all(0.0 <= v <= 1.0 + 1e-12 for v in rewards.values)
    served = [t.step for t in rewards.turns if t.step is not None]
    assert served == sorted(set(served))
    assert rewards.missing == 2 - len(served) and rewards.missing >= 0
    assert all(t.has_call and t.score > 0 for t in rewards.turns if t.step is not None)
    # Every missing step is charged to exactly one serving turn, when there is one, and only
    # serving turns are charged: so every charge strictly lowers a reward.
    charged = sum(t.charged for t in rewards.turns)
    assert charged == (rewards.missing if served else 0)
    assert all(t.step is not None for t in rewards.turns if t.charged)
    assert all(t.reward < t.score for t in rewards.turns if t.charged)
    assert all(t.reward <= t.score for t in rewards.turns)


def test_turns_must_be_a_sequence_of_turns():
    with pytest.raises(TypeError, match="got a single text"):
        turn_rewards(flight_task(), call(SEARCH))
    with pytest.raises(TypeError, match="a turn must be its text, a ParsedResponse or a Turn, got dict"):
        turn_rewards(flight_task(), [{"text": call(SEARCH)}])


# -- junk never beats stopping -----------------------------------------------------------------

SELECT = ToolCall("select_seat", {"flight_id": "FL-1", "seat": "12A"})
HALF_BOOK = ToolCall("book_flight", {"flight_id": "FL-2"})
# A turn that earns nothing for any gold step: malformed, cut off, a tool that does not exist, an
# existing tool that is no step's, a stray close tag, an empty call list.
JUNK_TURNS = [
    "<tool_call>{not json</tool_call>",
    '<tool_call>{"name": "book_fl',
    call(ToolCall("cancel_everything", {})),
    call(ToolCall("lookup_weather", {"city": "Rome"})),
    "ok </tool_call>",
    "<tool_call>[]</tool_call>",
]
# Turns that may earn something: right, partly right and wrong calls of every step.
REAL_TURNS = [call(c) for c in (SEARCH, BOOK, WRONG_FLIGHT, HALF_BOOK, SELECT, ToolCall("search_flights", {}))]


def three_step_task() -> Task:
    tools = [
        string_tool("search_flights", "origin", "destination"),
        string_tool("book_flight", "flight_id"),
        string_tool("select_seat", "flight_id", "seat"),
        string_tool("lookup_weather", "city"),
    ]
    return flight_task(tools=tools, gold_calls=[[SEARCH], [BOOK], [SELECT]])


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(["two", "three"]),
    st.lists(st.sampled_from(REAL_TURNS + JUNK_TURNS), max_size=4),
    st.lists(st.sampled_from(JUNK_TURNS), min_size=1, max_size=3),
)
def test_junk_calls_never_beat_stopping(steps: str, prefix: list[str], junk: list[str]) -> None:
    """Stopping after any turns vs. adding junk calls before answering: every turn both rollouts
    share keeps its reward, and each junk turn is at the floor, 0. So no per-turn normalisation can
    rank the junk rollout's turns above the stopper's."""
    task = flight_task() if steps == "two" else three_step_task()
    stopped = turn_rewards(task, [*prefix, ANSWER]).values
    junked = turn_rewards(task, [*prefix, *junk, ANSWER]).values
    assert junked[: len(prefix)] == pytest.approx(stopped[: len(prefix)])
    assert junked[len(prefix) :] == pytest.approx((0.0,) * (len(junk) + 1))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(REAL_TURNS + JUNK_TURNS), min_size=1, max_size=5))
def test_stopping_early_always_costs(turns: list[str]) -> None:
    """Whenever a step is missing and some turn earned something, the rollout's rewards sum to less
    than its turns' scores: no charge lands where it is free."""
    rewards = turn_rewards(three_step_task(), turns)
    if rewards.missing and any(t.step is not None for t in rewards.turns):
        assert sum(rewards.values) < sum(t.score for t in rewards.turns)


def test_the_issue_example_a_junk_second_call_no_longer_dodges_the_charge():
    stopped = turn_rewards(flight_task(), [call(SEARCH), ANSWER])
    junked = turn_rewards(flight_task(), [call(SEARCH), call(ToolCall("no_such_tool", {})), ANSWER])
    assert stopped.values == pytest.approx((0.5, 0.0))
    assert junked.values == pytest.approx((0.5, 0.0, 0.0))  # it was (1.0, 0, 0): the junk turn took step 2
    assert junked.turns[1].step is None and junked.turns[0].charged == 1
