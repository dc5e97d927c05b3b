"""Judges and checkers: rating parsing, the rule judge, and the OpenAI-compatible clients against a
real local server (tests/fake_openai.py)."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time

import pytest
from fake_openai import FakeOpenAIServer, FakeReply, fake_openai  # noqa: F401 (fixture)
from tool_schemas import function_tool

from slca_grpo.datatypes import Task, ToolCall
from slca_grpo.endpoints import SHORT_REPLY_BYTES, EndpointConfig
from slca_grpo.rewards import (
    Judge,
    JudgeRequest,
    JudgeVerdict,
    OpenAICompletenessChecker,
    OpenAIJudge,
    RewardConfig,
    RuleCompletenessChecker,
    RuleJudge,
    compute_rewards,
    hierr,
    make_checker,
    make_judge,
    parse_rating,
    parse_yes_no,
    rltr_reward,
)
from slca_grpo.rewards.openai_judge import JUDGE_SYSTEM_PROMPT, judge_messages, truncate_middle_chars

# --- rating parsing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "rating"),
    [
        ("Rating: 4", 4),
        ("rating:3", 3),
        ("**Rating:** 5", 5),
        ("**4**/5", 4),
        ("4", 4),
        ("  5.\n", 5),
        ('{"rating": 4}', 4),
        ('```json\n{"score": "2", "reason": "invents 3 facts"}\n```', 2),
        ('Reasoning... {"rating": 3, "confidence": 0.9}', 3),
        ("The tool returned 25 items and 31 degrees; the answer cites 2 of 3 facts.\nRating: 2", 2),
        ("The scale is 1-5. Mentions 7 facts.\n\n**3**", 3),
        ("Overall: 4 out of 5.", 4),
        ("Rating (1-5): 1", 1),
        ("I would give it a rating of 4.0", 4),
        ("I rate it a 5", 5),
        ("Rating: 7", None),  # out of range → failure, not another number
        ("Rating: 0", None),
        ("Rating: 3.5", None),  # not an integer
        ('{"rating": 6}', None),
        ('{"rating": true}', None),
        ("The answer is decent.", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_rating(reply, rating):
    assert parse_rating(reply) == rating


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("Yes", True),
        ("no.", False),
        ("**YES**", True),
        ('{"complete": true}', True),
        ('{"answer": "no"}', False),
        ("The plan misses the time lookup.\nAnswer: no", False),
        ("It covers both parts.\nAnswer: yes", True),
        ("Verdict: incomplete", False),
        ("Complete: yes", True),
        ("The plan is complete.\nyes", True),
        ("Hard to say, maybe.", None),
        ("", None),
    ],
)
def test_parse_yes_no(reply, verdict):
    assert parse_yes_no(reply) == verdict


# --- the judge interface ----------------------------------------------------------------------


class EchoJudge(Judge):
    """Rates by answer length (1..5); raises on 'boom', returns out-of-range on 'big'."""

    def _rate(self, request: JudgeRequest) -> JudgeVerdict:
        if request.answer == "boom":
            raise RuntimeError("exploded")
        if request.answer == "big":
            return JudgeVerdict(rating=6)
        return JudgeVerdict.ok(min(5, len(request.answer)))


def test_judge_base_counts_and_never_raises():
    judge = EchoJudge()
    assert judge.rate("q", [], "abc").rating == 3
    assert RuleJudge().rate(QUESTION, RESPONSES[0], "It is 22 degrees Celsius and sunny in Paris.").rating == 5  # a str
    boom = judge.rate("q", [], "boom")
    assert boom.failed and "exploded" in boom.error
    assert judge.rate("q", [], "big").failed  # out-of-range ratings are failures
    verdicts = judge.rate_many([("q", ("r",), "a"), JudgeRequest("q", (), "abcd"), ("q", "single", "boom")])
    assert [v.rating for v in verdicts] == [1, 4, None]
    assert (judge.calls, judge.failures) == (6, 3)  # rate ×3, rate_many ×3
    assert asyncio.run(judge.arate("q", [], "ab")).rating == 2
    judge.reset_counters()
    assert (judge.calls, judge.failures) == (0, 0)
    with pytest.raises(TypeError, match="judge item"):
        judge.rate_many(["not a triple"])


# --- the rule judge ---------------------------------------------------------------------------

QUESTION = "What's the weather in Paris today?"
RESPONSES = ('{"city": "Paris", "temperature": 22, "unit": "celsius", "condition": "sunny"}',)


def rate(answer: str, responses=RESPONSES, question: str = QUESTION) -> int:
    return RuleJudge().rate(question, responses, answer).rating


def test_rule_judge_ranks_grounded_over_vague_over_invented():
    grounded = rate("It is 22 degrees Celsius and sunny in Paris today.")
    partial = rate("It is sunny in Paris today, enjoy the day.")
    vague = rate("The weather is fine today, enjoy!")
    invented = rate("It is 31 degrees and rainy in Paris.")
    # grounded: 4 facts used, coverage 1 → 1 + 3 + 1 = 5
    # partial: 2 of min(3, 4) facts → 1 + 2 + 1 = 4
    # vague: coverage 0, clean → 1 + 0 + 1 = 2
    # invented: 1 fact (Paris) → 1 + 1 + 0 − 1 (number 31) = 1
    assert (grounded, partial, vague, invented) == (5, 4, 2, 1)


def test_rule_judge_penalises_invented_names_and_length():
    judge = RuleJudge()
    named = judge.explain(JudgeRequest(QUESTION, RESPONSES, "It is 22 degrees in Paris, says Meteo France."))
    # used 22 and Paris: coverage 2/3 → 1 + 2 + 0 − min(1, 0.5·2) = 2
    assert named.invented_names == ("Meteo", "France") and named.rating == 2
    short = judge.explain(JudgeRequest(QUESTION, RESPONSES, "22, sunny"))
    # "22" and "sunny": coverage 2/3 → 1 + 2 + 1 (clean) − 1 (too short) = 3
    assert short.length_issue == "too_short" and short.rating == 3
    rambling = judge.explain(
        JudgeRequest(QUESTION, RESPONSES, "Paris is sunny at 22 celsius. " + "very very nice " * 20)
    )
    assert rambling.length_issue == "repetitive" and rambling.rating == 4


def test_rule_judge_without_tool_responses_judges_honesty():
    question = "What's the weather on Mars?"
    assert rate("Sorry, none of the available tools can report the weather on Mars.", (), question) == 4
    assert rate("It is -60 degrees on Mars right now.", (), question) == 2


def test_rule_judge_handles_errors_text_and_ids():
    error = ('{"error": "Service unavailable"}',)
    assert rate("Sorry, the weather service is unavailable right now; please retry.", error) == 5
    order = ('{"order_id": "ORD-5521", "status": "shipped", "eta": "2024-05-06", "items": [1, 2, 3]}',)
    q = "Where is my order ORD-5521?"
    assert rate("Your order ORD-5521 has shipped with 3 items and arrives on May 6, 2024.", order, q) == 5
    assert rate("Your order ORD-9999 is delayed until June.", order, q) == 1
    text = ("Flight BA117 departs London at 18:40 from Terminal 5.",)
    assert rate("BA117 leaves London at 18:40, from Terminal 5.", text, "Flight info?") == 5


def test_rule_judge_number_rules():
    judge = RuleJudge()
    responses = ('{"price": 22.46, "discount": 0.25, "offers": [{"shop": "Acme"}, {"shop": "Bolt"}]}',)
    report = judge.explain(JudgeRequest("Price?", responses, "The price is 22.5 with a 25% discount."))
    # 22.5 is 22.46 at one decimal; 25% stands for 0.25 → 2 numbers used of min(3, 4 facts)
    assert report.invented_numbers == () and report.used == 2
    listed = judge.explain(JudgeRequest("Shops?", responses, "There are 2 offers:\n1. Acme\n2. Bolt at 22.46"))
    # list markers and the list length (2) are not inventions; 3 facts used → coverage 1
    assert listed.invented_numbers == () and listed.coverage == 1.0 and listed.rating == 5
    wrong = judge.explain(JudgeRequest("Price?", responses, "The price is 23.1 and there are 7 shops."))
    assert wrong.invented_numbers == ("23.1", "7") and wrong.rating == 1


def test_rule_judge_is_deterministic():
    answers = ["It is 22 degrees and sunny in Paris.", "Probably 25 degrees.", "Paris: sunny, 22 celsius, nice."]
    first = [RuleJudge().rate(QUESTION, RESPONSES, a) for a in answers]
    second = RuleJudge().rate_many([(QUESTION, RESPONSES, a) for a in reversed(answers)])
    assert first == list(reversed(second))


def test_rule_judge_ignores_whether_calls_were_right():
    # Same question, responses and answer → same rating, whatever produced them.
    right = hierr(
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
        f"<tool_response>{RESPONSES[0]}</tool_response>It is 22 degrees Celsius and sunny in Paris.",
        weather_task(),
        RuleJudge(),
    )
    wrong = hierr(
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Lyon"}}</tool_call>'
        f"<tool_response>{RESPONSES[0]}</tool_response>It is 22 degrees Celsius and sunny in Paris.",
        weather_task(),
        RuleJudge(),
    )
    assert right.rating == wrong.rating == 5 and right.r_tool > wrong.r_tool


def weather_task() -> Task:
    return Task(
        id="w",
        messages=[{"role": "user", "content": QUESTION}],
        tools=[function_tool("get_weather")],
        gold_calls=[[ToolCall("get_weather", {"city": "Paris"})]],
    )


# --- OpenAIJudge against a local server --------------------------------------------------------


def make_openai_judge(server: FakeOpenAIServer, **kwargs) -> OpenAIJudge:
    defaults = dict(timeout_s=2.0, max_retries=3, backoff_s=0.01, max_backoff_s=0.05)
    defaults.update(kwargs)
    return OpenAIJudge(EndpointConfig(server.url, "judge-model", **defaults))


def test_a_judge_reads_short_replies_whatever_its_endpoint_allows():
    roomy = EndpointConfig("http://h/v1", "m", max_reply_bytes=64 * SHORT_REPLY_BYTES)
    assert OpenAIJudge(roomy).endpoint.config.max_reply_bytes == SHORT_REPLY_BYTES
    tight = EndpointConfig("http://h/v1", "m", max_reply_bytes=1000)
    assert OpenAICompletenessChecker(tight).endpoint.config.max_reply_bytes == 1000


def test_openai_judge_sends_rubric_and_parses_rating(fake_openai):
    fake_openai.push("Grounded and complete.\nRating: 4")
    with make_openai_judge(fake_openai, api_key="sk-test") as judge:
        verdict = judge.rate(QUESTION, RESPONSES, "It is 22 degrees and sunny.")
    assert verdict == JudgeVerdict.ok(4, raw="Grounded and complete.\nRating: 4")
    (body,) = fake_openai.requests
    assert body["model"] == "judge-model" and body["temperature"] == 0.0
    system, user = body["messages"]
    assert system == {"role": "system", "content": JUDGE_SYSTEM_PROMPT}
    assert "1 = very poor" in system["content"] and "5 = excellent" in system["content"]
    assert QUESTION in user["content"] and RESPONSES[0] in user["content"] and "22 degrees and sunny" in user["content"]
    assert fake_openai.headers[0]["authorization"] == "Bearer sk-test"
    assert (judge.calls, judge.failures) == (1, 0)


def test_judge_prompt_without_tool_responses_and_truncation():
    messages = judge_messages(JudgeRequest("q", (), "a"))
    assert "(none: the assistant called no tool)" in messages[1]["content"]
    long = "x" * 50 + "MIDDLE" + "y" * 50
    cut = truncate_middle_chars(long, 20)
    assert cut.startswith("x" * 10) and cut.endswith("y" * 10) and "MIDDLE" not in cut and "omitted" in cut


def test_openai_judge_retries_5xx_and_429_then_succeeds(fake_openai):
    fake_openai.push(FakeReply.error(500), FakeReply.rate_limited(retry_after=0), FakeReply.error(503), "Rating: 5")
    judge = make_openai_judge(fake_openai)
    verdict = judge.rate("q", ["r"], "an answer")
    assert verdict.rating == 5 and not verdict.failed
    assert (judge.endpoint.requests, judge.endpoint.retries) == (4, 3)
    assert (judge.calls, judge.failures) == (1, 0)


def test_openai_judge_fails_after_retries_and_counts_it(fake_openai):
    fake_openai.push(*[FakeReply.error(502)] * 3)
    judge = make_openai_judge(fake_openai, max_retries=2)
    verdict = judge.rate("q", ["r"], "an answer")
    assert verdict.failed and verdict.rating is None and "HTTP 502" in verdict.error
    assert len(fake_openai.requests) == 3 and (judge.calls, judge.failures) == (1, 1)


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (FakeReply.raw("<html>Bad gateway</html>"), "not JSON"),
        (FakeReply.raw('{"unexpected": true}'), "not a chat completion"),
        (FakeReply.error(400, '{"error": "bad request"}'), "HTTP 400"),
        (FakeReply.error(401, '{"error": "no key"}'), "HTTP 401"),
        ("I think the answer is fine.", "no rating"),
        ("Rating: 9", "no rating"),
        ("", "empty completion"),
    ],
)
def test_openai_judge_non_retryable_problems_fail_at_once(fake_openai, reply, message):
    fake_openai.push(reply, "Rating: 5")  # the second reply must not be used
    judge = make_openai_judge(fake_openai)
    verdict = judge.rate("q", ["r"], "an answer")
    assert verdict.failed and message in verdict.error
    assert len(fake_openai.requests) == 1 and judge.failures == 1


def test_openai_judge_falls_back_to_reasoning_content(fake_openai):
    body = {"choices": [{"message": {"role": "assistant", "content": None, "reasoning_content": "fine. Rating: 3"}}]}
    fake_openai.push(FakeReply.raw(json.dumps(body)))
    assert make_openai_judge(fake_openai).rate("q", ["r"], "an answer").rating == 3


def test_openai_judge_times_out_and_retries(fake_openai):
    fake_openai.push(FakeReply.text("Rating: 5", delay_s=6.0), FakeReply.text("Rating: 5", delay_s=6.0))
    judge = make_openai_judge(fake_openai, timeout_s=0.2, max_retries=1)
    start = time.monotonic()
    verdict = judge.rate("q", ["r"], "an answer")
    assert verdict.failed and "Timeout" in verdict.error
    # Without the timeout this would wait 12 s for the two slow replies.
    assert time.monotonic() - start < 5.0 and judge.endpoint.requests == 2


def test_openai_judge_connection_refused_is_a_failure():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    endpoint = EndpointConfig(f"http://127.0.0.1:{port}/v1", "m", max_retries=1, backoff_s=0.01, timeout_s=1.0)
    judge = OpenAIJudge(endpoint)
    verdict = judge.rate("q", ["r"], "an answer")
    assert verdict.failed and "ConnectError" in verdict.error and judge.failures == 1


def test_openai_judge_rate_many_is_concurrent_and_ordered():
    def reply(body):
        answer = re.search(r"final answer\n(.*)\n\nRate", body["messages"][1]["content"]).group(1)
        return FakeReply.text(f"Rating: {answer[-1]}", delay_s=0.3)

    with FakeOpenAIServer(reply_fn=reply) as server:
        judge = make_openai_judge(server, concurrency=8)
        items = [("q", ["r"], f"answer number {i % 5 + 1}") for i in range(8)]
        judge.rate_many(items[:1])  # warm up: imports and the first client cost time unrelated to concurrency
        server.max_in_flight = 0
        verdicts = judge.rate_many(items)
    assert [v.rating for v in verdicts] == [i % 5 + 1 for i in range(8)]
    assert server.max_in_flight >= 4  # requests overlapped (a sequential client never exceeds 1)
    assert (judge.calls, judge.failures) == (9, 0)


def test_openai_judge_concurrency_limit_is_respected():
    with FakeOpenAIServer(reply_fn=lambda body: FakeReply.text("Rating: 3", delay_s=0.1)) as server:
        verdicts = make_openai_judge(server, concurrency=2).rate_many([("q", [], "an answer")] * 6)
    assert [v.rating for v in verdicts] == [3] * 6 and server.max_in_flight == 2


def test_openai_judge_async_and_inside_a_running_loop(fake_openai):
    fake_openai.push("Rating: 2", "Rating: 4")
    judge = make_openai_judge(fake_openai)

    async def main():
        first = await judge.arate("q", ["r"], "an answer")
        second = judge.rate_many([("q", ["r"], "an answer")])  # sync batch call from async code
        return first, second

    first, second = asyncio.run(main())
    assert first.rating == 2 and second[0].rating == 4


def test_openai_judge_mixed_batch_counts_each_failure(fake_openai):
    fake_openai.reply_fn = lambda body: "Rating: 5" if "good" in body["messages"][1]["content"] else "no idea"
    judge = make_openai_judge(fake_openai, concurrency=3)
    verdicts = judge.rate_many([("q", [], "good answer"), ("q", [], "bad answer"), ("q", [], "good one")])
    assert [v.rating for v in verdicts] == [5, None, 5] and (judge.calls, judge.failures) == (3, 1)


def test_hierr_with_a_failing_endpoint_gives_zero_summary(fake_openai):
    fake_openai.default = FakeReply.error(500)
    judge = make_openai_judge(fake_openai, max_retries=1)
    text = (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
        f"<tool_response>{RESPONSES[0]}</tool_response>It is 22 degrees and sunny."
    )
    r = hierr(text, weather_task(), judge)
    assert r.judge_failed and r.r_sum == 0.0 and r.score == pytest.approx(r.r_tool) == pytest.approx(1.0)
    assert judge.failures == 1 and len(fake_openai.requests) == 2


def test_compute_rewards_sends_the_batch_through_the_endpoint_concurrently():
    with FakeOpenAIServer(reply_fn=lambda body: FakeReply.text("Rating: 3", delay_s=0.2)) as server:
        judge = make_openai_judge(server, concurrency=6)
        judge.rate_many([("warm", [], "up")])
        server.max_in_flight = 0
        texts = [
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
            f"<tool_response>{RESPONSES[0]}</tool_response>Answer variant {i}, it is 22 degrees."
            for i in range(6)
        ]
        batch = compute_rewards(texts, [weather_task()] * 6, judge)
    assert batch.as_dict()["summary"] == [0.5] * 6
    assert server.max_in_flight >= 3  # requests overlapped


# --- OpenAICompletenessChecker ---------------------------------------------------------------


def test_openai_checker_samples_n_verdicts_at_temperature(fake_openai):
    fake_openai.push("Covers everything.\nAnswer: yes", "Answer: no", "yes")
    endpoint = EndpointConfig(fake_openai.url, "checker", backoff_s=0.01, concurrency=1)
    checker = OpenAICompletenessChecker(endpoint, temperature=0.7)
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    r = rltr_reward(text, weather_task(), checker=checker)
    assert r.completeness == pytest.approx(2 / 3) and r.planner == pytest.approx(2 / 3)
    assert len(fake_openai.requests) == 3 and all(b["temperature"] == 0.7 for b in fake_openai.requests)
    user = fake_openai.requests[0]["messages"][1]["content"]
    assert QUESTION in user and '1. get_weather({"city": "Paris"})' in user and "- get_weather" in user
    assert (checker.calls, checker.failures) == (3, 0)


def test_openai_checker_failures_count_as_not_complete(fake_openai):
    fake_openai.push("Answer: yes", "maybe?", *[FakeReply.error(500)] * 2)
    endpoint = EndpointConfig(fake_openai.url, "checker", max_retries=1, backoff_s=0.01, concurrency=1)
    checker = OpenAICompletenessChecker(endpoint)
    verdicts = checker.check(weather_task(), [ToolCall("get_weather", {"city": "Paris"})], n=3)
    assert [v.score for v in verdicts] == [1.0, 0.0, 0.0]
    assert [v.failed for v in verdicts] == [False, True, True]
    assert (checker.calls, checker.failures) == (3, 2)


# --- factory ----------------------------------------------------------------------------------


def test_factory_specs(monkeypatch):
    assert isinstance(make_judge("rule"), RuleJudge) and isinstance(make_checker(" rule "), RuleCompletenessChecker)
    with pytest.raises(ValueError, match="bad endpoint spec 'openai:http://h:8000/v1': it names no model"):
        make_judge("openai:http://h:8000/v1")
    with pytest.raises(ValueError, match="expected 'rule' or openai:BASE_URL#MODEL"):
        make_checker("gpt")
    monkeypatch.setenv("MY_KEY", "secret")
    config = RewardConfig(api_key_env="MY_KEY", judge_concurrency=3, checker_temperature=0.9, judge_max_retries=2)
    judge = make_judge("openai:http://h:8000/v1/#gpt-oss-120b", config)
    assert isinstance(judge, OpenAIJudge) and judge.endpoint.config.api_key == "secret" and judge.concurrency == 3
    assert judge.endpoint.config.url == "http://h:8000/v1/chat/completions" and judge.endpoint.model == "gpt-oss-120b"
    assert judge.endpoint.config.max_retries == 2
    checker = make_checker("openai:http://h/v1#m", config)
    assert isinstance(checker, OpenAICompletenessChecker) and checker.temperature == 0.9
