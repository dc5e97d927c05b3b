"""A call budget that ends in an answer: the agent loop's forced final answer (``answer_at_limit``,
``answer_on_repeat``), and repeated identical calls counted in training metrics and evaluations."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_native_format import STYLES, ReplayLM, formatters, tasks  # noqa: F401  (fixtures)
from test_native_format import base_tokenizer as base_tokenizer  # noqa: F401
from test_rollout import CALL, WEATHER, EchoSimulator, build_loop, make_task
from test_rollout import tokenizer as tokenizer  # noqa: F401  (fixture)

from slca_grpo.algos import SEG_SUMMARY, SEG_TOOL
from slca_grpo.chat import parse_tool_calls
from slca_grpo.chat.formatter import ChatFormatter
from slca_grpo.config import ConfigError
from slca_grpo.datatypes import Observation, Task, ToolCall, Trajectory
from slca_grpo.eval.indomain import aggregate, score_trajectories
from slca_grpo.eval.report import write_eval_report
from slca_grpo.eval.text_loop import run_text_episodes
from slca_grpo.rewards import RewardConfig, RuleJudge, compute_rewards
from slca_grpo.rollout.environment import ToolEnvironment
from slca_grpo.rollout.loop import FINAL_ANSWER_NOTICE, AgentLoop, RolloutConfig, repeat_calls
from slca_grpo.trainer.batch import trajectory_batch
from slca_grpo.trainer.rl import rollout_metrics
from slca_grpo.trainer.sft import build_example, gets_notice

ANSWER = "It is 21 degrees in Paris.<|im_end|>"
LONDON = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "London"}}\n</tool_call>'


def test_a_rollout_still_calling_at_the_limit_gets_its_results_and_one_turn_to_answer(tokenizer):
    loop, environment = build_loop(
        tokenizer, lambda p, t: CALL if t < 3 else ANSWER, group_size=1, answer_at_limit=True, max_response_tokens=4000
    )
    trajectory = loop.run([make_task()], session_prefix="x")[0]
    formatter = loop.formatter
    call = formatter.encode(CALL)
    results, results_text = formatter.tool_results(['{"city": "Paris", "temp": 21}'], close_turn=True)
    forced, forced_text = formatter.tool_results(
        ['{"city": "Paris", "temp": 21}'], close_turn=True, notice=FINAL_ANSWER_NOTICE
    )
    answer = formatter.encode(ANSWER)
    # Token-exact: three calls, each answered, the last results followed by the notice (mask 0).
    assert trajectory.response_ids == call + results + call + results + call + forced + answer
    assert trajectory.response_mask == [1] * len(call) + [0] * len(results) + [1] * len(call) + [0] * len(results) + [
        1
    ] * len(call) + [0] * len(forced) + [1] * len(answer)
    assert trajectory.response_text == CALL + results_text + CALL + results_text + CALL + forced_text + ANSWER
    assert len(environment.simulator.requests) == 3  # the limit's call is executed, then the answer asked for
    assert not trajectory.truncated
    assert trajectory.final_text == "It is 21 degrees in Paris."  # the notice is not part of the answer
    assert trajectory.counters["forced_answer"] == 1
    assert trajectory.counters["turns"] == 4 and trajectory.counters["calls"] == 3
    assert trajectory.counters["repeat_calls"] == 2
    segments = trajectory_batch([trajectory], formatter.pad_id).segment_ids[0].tolist()
    assert segments[-1] == SEG_SUMMARY and SEG_TOOL in segments


def test_a_forced_turn_that_calls_again_is_cut_off_unanswered(tokenizer):
    loop, environment = build_loop(
        tokenizer, lambda p, t: CALL, group_size=1, answer_at_limit=True, max_response_tokens=4000
    )
    trajectory = loop.run([make_task()])[0]
    assert trajectory.truncated and trajectory.counters["forced_answer"] == 1
    assert len(trajectory.turns) == 4 and len(environment.simulator.requests) == 3  # the fourth call never runs
    segments = trajectory_batch([trajectory], loop.formatter.pad_id).segment_ids[0].tolist()
    assert segments[-1] == SEG_TOOL and SEG_SUMMARY not in segments


def test_without_the_option_the_limit_cuts_the_rollout_and_nothing_is_forced(tokenizer):
    loop, environment = build_loop(tokenizer, lambda p, t: CALL if t < 3 else ANSWER, group_size=1)
    trajectory = loop.run([make_task()])[0]
    assert trajectory.truncated and len(trajectory.turns) == 3 and len(environment.simulator.requests) == 2
    assert trajectory.counters["forced_answer"] == 0 and trajectory.counters["repeat_calls"] == 2
    assert FINAL_ANSWER_NOTICE not in trajectory.response_text


def test_a_repeated_call_ends_the_calls_when_asked(tokenizer):
    loop, environment = build_loop(
        tokenizer,
        lambda p, t: CALL if t < 2 else ANSWER,
        group_size=1,
        max_turns=4,
        answer_on_repeat=True,
        max_response_tokens=4000,
    )
    trajectory = loop.run([make_task()])[0]
    assert trajectory.counters["forced_answer"] == 1 and not trajectory.truncated
    assert len(trajectory.turns) == 3 and len(environment.simulator.requests) == 2
    assert trajectory.response_text.count(FINAL_ANSWER_NOTICE) == 1
    assert trajectory.final_text == "It is 21 degrees in Paris."


def test_a_new_call_is_not_a_repeat(tokenizer):
    script = {0: CALL, 1: LONDON}
    loop, environment = build_loop(
        tokenizer, lambda p, t: script.get(t, ANSWER), group_size=1, max_turns=4, answer_on_repeat=True
    )
    trajectory = loop.run([make_task()])[0]
    assert trajectory.counters["forced_answer"] == 0 and trajectory.counters["repeat_calls"] == 0
    assert len(trajectory.turns) == 3 and not trajectory.truncated


def test_no_forced_turn_when_the_results_leave_no_token_budget(tokenizer):
    class Verbose(EchoSimulator):
        def simulate_many(self, requests):
            return [Observation(text="word " * 300) for _ in requests]

    loop, _ = build_loop(
        tokenizer,
        lambda p, t: CALL,
        simulator=Verbose(),
        group_size=1,
        max_turns=1,
        answer_at_limit=True,
        max_response_tokens=60,
    )
    trajectory = loop.run([make_task()])[0]
    assert trajectory.truncated and len(trajectory.turns) == 1 and trajectory.counters["forced_answer"] == 0


def test_rollouts_of_one_batch_answer_when_they_are_done_or_forced(tokenizer):
    """A group where one rollout answers at once and another keeps calling: only the second is forced."""
    tasks = [make_task("a"), make_task("b")]

    def script(prompt, turn):
        return ANSWER if "answer now" in prompt else (CALL if turn < 2 else ANSWER)

    loop, _ = build_loop(tokenizer, script, group_size=1, max_turns=2, answer_at_limit=True, max_response_tokens=4000)
    tasks[0].messages = [{"role": "user", "content": "Weather in Paris? answer now"}]
    first, second = loop.run(tasks)
    assert len(first.turns) == 1 and first.counters["forced_answer"] == 0 and not first.truncated
    assert len(second.turns) == 3 and second.counters["forced_answer"] == 1 and not second.truncated
    metrics = rollout_metrics([first, second])
    assert metrics["rollout/forced_answer"] == 0.5 and metrics["rollout/repeat_calls"] == 0.5


def test_the_notice_must_be_text():
    with pytest.raises(ConfigError, match="final_answer_notice"):
        RolloutConfig(final_answer_notice="  ")


@pytest.mark.parametrize("style", sorted(STYLES))
def test_a_forced_answer_through_a_models_own_template_is_token_exact(formatters, tasks, style):  # noqa: F811
    """The notice is a user message after the tool results, rendered by the template: the loop's
    ids equal the template's rendering of that conversation, and the answer is read without it."""
    formatter, task = formatters[style], tasks["two_step"]
    (first,) = task.gold_calls[0]
    fixture = next(f for f in task.metadata["fixtures"] if f["name"] == first.name)
    dialogue = formatter.dialogue(task)
    call = formatter.call_ids(dialogue, [first])
    injected, _ = formatter.turn_results(dialogue, [first], [fixture["response"]], notice=FINAL_ANSWER_NOTICE)
    answer = formatter.answer_ids(dialogue, "Done.")
    assert dialogue.messages[-1] == {"role": "user", "content": FINAL_ANSWER_NOTICE}
    assert formatter.decode(dialogue.prompt_ids + call + injected) == dialogue.rendered
    sequence = dialogue.prompt_ids + call + injected + answer
    loop = AgentLoop(
        ReplayLM(formatter.tokenizer, [sequence]),
        formatter,
        ToolEnvironment(EchoSimulator()),
        RolloutConfig(group_size=1, max_turns=1, max_response_tokens=4096, answer_at_limit=True),
    )
    trajectory = loop.run([task])[0]
    assert trajectory.prompt_ids + trajectory.response_ids == sequence
    assert trajectory.response_mask == [1] * len(call) + [0] * len(injected) + [1] * len(answer)
    assert trajectory.final_text == "Done." and trajectory.counters["forced_answer"] == 1


class ScriptedAgent:
    """A text-level agent answering from a script of turn texts (by turn index)."""

    name = "scripted"

    def __init__(self, turns):
        self.turns = turns
        self.requests = []

    def respond(self, requests):
        self.requests += [[dict(m) for m in r.messages] for r in requests]
        return [self.turns[min(r.step, len(self.turns) - 1)] for r in requests]


@pytest.mark.parametrize("option", ["answer_at_limit", "answer_on_repeat"])
def test_the_evaluation_loop_forces_answers_as_the_training_loop_does(option):
    forced_at = 3 if option == "answer_at_limit" else 2
    agent = ScriptedAgent([CALL] * forced_at + ["It is 21 degrees in Paris."])
    environment = ToolEnvironment(EchoSimulator())
    (trajectory,) = run_text_episodes(agent, [make_task()], environment, max_turns=3, **{option: True})
    assert len(trajectory.turns) == forced_at + 1 and not trajectory.truncated
    assert trajectory.counters["forced_answer"] == 1 and trajectory.counters["repeat_calls"] == forced_at - 1
    last = agent.requests[-1]
    assert last[-1] == {"role": "user", "content": FINAL_ANSWER_NOTICE} and last[-2]["role"] == "tool"
    assert trajectory.final_text == "It is 21 degrees in Paris."
    items, summary, _ = score_trajectories([trajectory], [make_task()], RuleJudge())
    assert items[0]["forced_answer"] is True and summary["forced_answer"] == 1.0
    assert items[0]["repeat_calls"] == forced_at - 1 and items[0]["r_sum"] > 0


def test_the_evaluation_loop_without_options_cuts_off_as_before():
    agent = ScriptedAgent([CALL])
    (trajectory,) = run_text_episodes(agent, [make_task()], ToolEnvironment(EchoSimulator()), max_turns=2)
    assert trajectory.truncated and len(trajectory.turns) == 2 and trajectory.counters["forced_answer"] == 0


def test_forced_answers_are_aggregated_by_task_kind():
    items = []
    for kind, forced in (("single", True), ("single", False), ("parallel", True)):
        trajectory = Trajectory(task_id=kind, prompt_ids=[], counters={"forced_answer": int(forced)})
        task = make_task(kind)
        task.metadata["kind"] = kind
        scored, _, _ = score_trajectories([trajectory], [task], RuleJudge())
        items += scored
    summary = aggregate(items)
    assert summary["forced_answer"] == pytest.approx(2 / 3)
    assert summary["by_kind"]["single"]["forced_answer"] == 0.5 and summary["by_kind"]["parallel"]["forced_answer"] == 1


def test_the_answer_after_a_notice_is_read_without_it():
    text = CALL + "<|im_end|>\n<|im_start|>user\n<tool_response>\n{}\n</tool_response><|im_end|>\n"
    text += "<|im_start|>user\nAnswer now please.<|im_end|>\n<|im_start|>assistant\nIt is warm."
    assert parse_tool_calls(text).final_answer == "It is warm."


def _call_text(call: ToolCall) -> str:
    return "<tool_call>\n" + json.dumps({"name": call.name, "arguments": call.arguments}) + "\n</tool_call>"


@settings(max_examples=40, deadline=None)
@given(
    gold_cities=st.lists(st.sampled_from(["Paris", "Oslo", "Lima"]), min_size=1, max_size=3, unique=True),
    repeated=st.integers(0, 2),
    copies=st.integers(1, 3),
)
def test_repeating_a_call_before_the_answer_never_raises_the_tool_reward(gold_cities, repeated, copies):
    """Why a forced answer does not reward calling until the limit: the answer is scored as any
    answer, and each identical repeat of a call only adds to the predicted calls (Name-F1 falls)."""
    gold = [ToolCall("get_weather", {"city": city}) for city in gold_cities]
    task = Task(
        id="t",
        messages=[{"role": "user", "content": "Weather?"}],
        tools=[WEATHER],
        gold_calls=[[call] for call in gold],
        reference_answer="It is warm in every city asked about.",
    )
    results = "<|im_end|>\n<|im_start|>user\n<tool_response>\n{}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    answer = "It is warm in every city asked about."
    calls = [_call_text(call) + results for call in gold]
    plain = "".join(calls) + answer
    extra = calls[repeated % len(calls)] * copies
    repeating = "".join(calls) + extra + answer
    rewards = compute_rewards([plain, repeating], [task, task], RuleJudge(), RewardConfig()).as_dict()
    assert rewards["tool"][1] < rewards["tool"][0]
    assert rewards["summary"][1] == pytest.approx(rewards["summary"][0])
    assert repeat_calls(parse_tool_calls(repeating).calls) == copies


def test_notice_draws_are_stable_shares_of_the_tasks_with_calls():
    with_calls = [make_task(f"t{i}") for i in range(400)]
    chosen = [gets_notice(task, 0.25, seed=0) for task in with_calls]
    assert chosen == [gets_notice(task, 0.25, seed=0) for task in with_calls]  # the same draw every time
    assert 0.18 < sum(chosen) / len(chosen) < 0.32
    assert chosen != [gets_notice(task, 0.25, seed=1) for task in with_calls]  # the seed changes the draw
    assert all(gets_notice(task, 1.0, seed=0) for task in with_calls)
    assert not any(gets_notice(task, 0.0, seed=0) for task in with_calls)
    no_call = make_task("direct")
    no_call.gold_calls = []
    assert not gets_notice(no_call, 1.0, seed=0)


@pytest.mark.parametrize("style", ["hermes", *sorted(STYLES)])
@pytest.mark.parametrize("kind", ["single", "parallel", "two_step"])
def test_a_gold_trajectory_with_the_notice_is_what_a_forced_rollout_samples(
    base_tokenizer,  # noqa: F811
    formatters,  # noqa: F811
    tasks,  # noqa: F811
    style,
    kind,
):
    """SFT teaches the forced answer exactly as the loop presents it: a rollout that samples the
    example's learnable tokens under answer_at_limit, its calls ending at the limit, reproduces the
    example token for token, notice included, and reads the answer without it."""
    formatter = ChatFormatter(base_tokenizer) if style == "hermes" else formatters[style]
    task = tasks[kind]
    example = build_example(task, formatter, notice=FINAL_ANSWER_NOTICE)
    plain = build_example(task, formatter)
    assert len(example.input_ids) > len(plain.input_ids)
    assert sum(example.loss_mask) == sum(plain.loss_mask)  # the notice is never learned
    call_turns = sum(len(formatter.call_turns(step)) for step in task.gold_calls)
    loop = AgentLoop(
        ReplayLM(formatter.tokenizer, [example.input_ids]),
        formatter,
        ToolEnvironment(EchoSimulator()),
        RolloutConfig(group_size=1, max_turns=call_turns, max_response_tokens=8192, answer_at_limit=True),
    )
    trajectory = loop.run([task], session_prefix="replay")[0]
    prompt = len(trajectory.prompt_ids)
    assert trajectory.prompt_ids + trajectory.response_ids == example.input_ids
    assert trajectory.response_mask == example.loss_mask[prompt:]
    assert trajectory.counters["forced_answer"] == 1 and not trajectory.truncated
    assert trajectory.final_text == task.reference_answer.strip()


def test_the_evaluation_report_says_how_episodes_ended_by_kind(tmp_path):
    """One episode answers at once, one is asked for its answer at the limit, one is cut off there."""
    scripts = {"free": ["It is 21 degrees in Paris."], "asked": [CALL, "It is 21 degrees in Paris."], "cut": [CALL]}
    trajectories, tasks = [], []
    for kind, turns in scripts.items():
        task = make_task(kind)
        task.metadata["kind"] = kind
        tasks.append(task)
        trajectories += run_text_episodes(
            ScriptedAgent(turns), [task], ToolEnvironment(EchoSimulator()), max_turns=1, answer_at_limit=True
        )
    items, summary, _ = score_trajectories(trajectories, tasks, RuleJudge())
    assert [(i["answered_freely"], i["forced_answer"], i["truncated"]) for i in items] == [
        (True, False, False),
        (False, True, False),
        (False, True, True),
    ]
    write_eval_report(tmp_path, items, summary, title="t", chart_keys=("name_f1",))
    report = (tmp_path / "report.md").read_text()
    assert "| all | 3 | 33.3 | 66.7 | 33.3 | 1.67 |" in report
    assert "| asked | 1 | 0.0 | 100.0 | 0.0 | 2.00 | 1.00 | 0.00 |" in report
    assert "| cut | 1 | 0.0 | 100.0 | 100.0 | 2.00 | 2.00 | 1.00 |" in report  # its forced turn called again


@pytest.mark.parametrize("share", [float("nan"), -0.1, 1.5])
def test_a_notice_share_outside_zero_to_one_is_refused_naming_the_key(share):
    from slca_grpo.config import from_dict
    from slca_grpo.trainer.run_config import RunConfig

    with pytest.raises(ConfigError, match=r"^sft\.notice_share must be (in \[0, 1\]|a finite number)"):
        from_dict(RunConfig, {"sft": {"notice_share": share}})
