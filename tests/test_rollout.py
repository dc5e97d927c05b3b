import json
import re

import pytest
import torch
from scripted import ScriptedLM, smollm2_shaped_model
from tool_schemas import weather_tool

from slca_grpo.algos import SEG_SUMMARY, SEG_TOOL
from slca_grpo.chat import parse_tool_calls, render_chat
from slca_grpo.chat.formatter import ChatFormatter, prompt_tools
from slca_grpo.datatypes import Observation, Task, ToolCall
from slca_grpo.engine.sampling import SamplingConfig, sample
from slca_grpo.models.tokenizer import train_tokenizer
from slca_grpo.rollout.environment import ToolEnvironment
from slca_grpo.rollout.loop import AgentLoop, RolloutConfig
from slca_grpo.trainer.batch import trajectory_batch

WEATHER = weather_tool(description="Weather for a city", city_required=True, returns={"type": "object"})
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


class EchoSimulator:
    def __init__(self):
        self.requests = []

    def simulate_many(self, requests):
        self.requests += requests
        return [
            Observation(text=json.dumps({"city": call.arguments.get("city"), "temp": 21})) for call, _, _ in requests
        ]


@pytest.fixture(scope="module")
def tokenizer():
    corpus = [render_chat([{"role": "user", "content": "Weather in Paris?"}], [WEATHER])] * 20
    corpus += [CALL + " It is 21 degrees in Paris. temp city"] * 20
    return train_tokenizer(corpus, vocab_size=400)


def make_task(task_id="t1", fixtures=None):
    return Task(
        id=task_id,
        messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=[WEATHER],
        gold_calls=[[ToolCall("get_weather", {"city": "Paris"})]],
        metadata={"fixtures": fixtures or []},
    )


def build_loop(tokenizer, script, simulator=None, **overrides):
    settings = {
        "group_size": 2,
        "max_turns": 3,
        "max_response_tokens": 200,
        "max_tool_response_tokens": 50,
        **overrides,
    }
    config = RolloutConfig(**settings)
    formatter = ChatFormatter(tokenizer, max_tool_response_tokens=config.max_tool_response_tokens)
    environment = ToolEnvironment(simulator or EchoSimulator())
    return AgentLoop(ScriptedLM(tokenizer, script), formatter, environment, config), environment


def test_call_then_answer_is_token_exact_with_masks_and_segments(tokenizer):
    answer = "It is 21 degrees in Paris.<|im_end|>"
    loop, environment = build_loop(tokenizer, lambda prompt, turn: CALL if turn == 0 else answer)
    trajectories = loop.run([make_task()], generator=torch.Generator().manual_seed(0), session_prefix="x")
    assert len(trajectories) == 2
    formatter = loop.formatter
    call_ids = formatter.encode(CALL)
    answer_ids = formatter.encode(answer)
    injected, injected_text = formatter.tool_results(['{"city": "Paris", "temp": 21}'], close_turn=True)
    for trajectory in trajectories:
        assert trajectory.prompt_ids == formatter.encode(render_chat(make_task().messages, prompt_tools([WEATHER])))
        assert trajectory.response_ids == call_ids + injected + answer_ids
        assert trajectory.response_mask == [1] * len(call_ids) + [0] * len(injected) + [1] * len(answer_ids)
        assert len(trajectory.logprobs) == len(trajectory.response_ids)
        assert all(lp == 0.0 for lp, m in zip(trajectory.logprobs, trajectory.response_mask) if m == 0)
        assert all(lp > -1e-3 for lp, m in zip(trajectory.logprobs, trajectory.response_mask) if m == 1)
        assert trajectory.final_text == "It is 21 degrees in Paris."
        assert trajectory.turns[0].calls == [ToolCall("get_weather", {"city": "Paris"})]
        assert trajectory.counters["calls"] == 1 and trajectory.counters["turns"] == 2
        assert not trajectory.truncated
        assert trajectory.response_text == CALL + injected_text + answer
    assert [s for _, _, s in environment.simulator.requests] == ["x-0", "x-1"]
    batch = trajectory_batch(trajectories, formatter.pad_id)
    row = batch.segment_ids[0]
    start = len(trajectories[0].prompt_ids)
    assert (row[:start] == 0).all()
    assert (row[start : start + len(call_ids)] == SEG_TOOL).all()
    assert (row[start + len(call_ids) : start + len(call_ids) + len(injected)] == 0).all()
    assert (
        row[start + len(call_ids) + len(injected) : start + len(call_ids) + len(injected) + len(answer_ids)]
        == SEG_SUMMARY
    ).all()


def test_fixture_answers_gold_calls_without_the_simulator(tokenizer):
    fixtures = [{"name": "get_weather", "arguments": {"city": "paris"}, "response": '{"temp": 5}'}]
    loop, environment = build_loop(tokenizer, lambda p, t: CALL if t == 0 else "Cold.<|im_end|>")
    trajectory = loop.run([make_task(fixtures=fixtures)], group_size=1)[0]
    assert environment.simulator.requests == []
    assert trajectory.turns[0].observations[0].text == '{"temp": 5}'
    assert parse_tool_calls(trajectory.response_text).tool_responses == ('{"temp": 5}',)


def test_direct_answer_is_one_summary_run(tokenizer):
    loop, _ = build_loop(tokenizer, lambda p, t: "No tool needed here.<|im_end|>")
    trajectory = loop.run([make_task()], group_size=1)[0]
    assert set(trajectory.response_mask) == {1}
    batch = trajectory_batch([trajectory], loop.formatter.pad_id)
    assert set(batch.segment_ids[0, len(trajectory.prompt_ids) :].tolist()) == {SEG_SUMMARY}


def test_turn_limit_cuts_a_rollout_that_keeps_calling(tokenizer):
    loop, environment = build_loop(tokenizer, lambda p, t: CALL)
    trajectory = loop.run([make_task()], group_size=1)[0]
    assert trajectory.truncated
    assert trajectory.counters["turns"] == 3
    assert len(environment.simulator.requests) == 2  # the last turn's call is never executed
    # The last run of generated tokens is the cut-off call: a tool segment, and no summary at all.
    batch = trajectory_batch([trajectory], loop.formatter.pad_id)
    assert int(batch.segment_ids[0, -1]) == SEG_TOOL
    assert SEG_SUMMARY not in batch.segment_ids[0].tolist()


def test_a_tool_response_that_overruns_the_budget_ends_the_rollout_without_a_summary(tokenizer):
    class Verbose(EchoSimulator):
        def simulate_many(self, requests):
            return [Observation(text="word " * 300) for _ in requests]

    script = lambda p, t: CALL if t == 0 else "Done.<|im_end|>"  # noqa: E731
    loop, _ = build_loop(tokenizer, script, simulator=Verbose(), max_response_tokens=60)
    trajectory = loop.run([make_task()], group_size=1)[0]
    assert trajectory.truncated and len(trajectory.turns) == 1 and trajectory.response_mask[-1] == 0
    segments = trajectory_batch([trajectory], loop.formatter.pad_id).segment_ids[0].tolist()
    assert SEG_TOOL in segments and SEG_SUMMARY not in segments


def test_malformed_call_gets_an_error_observation(tokenizer):
    bad = "<tool_call>\n{not json\n</tool_call>"
    loop, environment = build_loop(tokenizer, lambda p, t: bad if t == 0 else "Sorry about that.<|im_end|>")
    trajectory = loop.run([make_task()], group_size=1)[0]
    observation = trajectory.turns[0].observations[0]
    assert observation.is_error and observation.error.kind == "invalid_tool_call/bad_json"
    assert environment.simulator.requests == []
    assert trajectory.final_text == "Sorry about that."


def test_token_budget_stops_generation(tokenizer):
    loop, _ = build_loop(tokenizer, lambda p, t: "word " * 100 + "<|im_end|>", max_response_tokens=15)
    trajectory = loop.run([make_task()], group_size=1)[0]
    assert len(trajectory.response_ids) == 15 and trajectory.truncated


def test_long_tool_responses_are_truncated_in_the_middle(tokenizer):
    class Verbose(EchoSimulator):
        def simulate_many(self, requests):
            return [Observation(text="x" * 2000) for _ in requests]

    loop, _ = build_loop(tokenizer, lambda p, t: CALL if t == 0 else "ok fine then.<|im_end|>", simulator=Verbose())
    trajectory = loop.run([make_task()], group_size=1)[0]
    injected = trajectory.response_mask.count(0)
    assert injected <= 50 + 30  # the observation limit plus the fixed wrapper tokens
    assert "[truncated]" in trajectory.response_text


def test_sampling_respects_budgets_and_greedy_is_deterministic(tokenizer):
    torch.manual_seed(0)
    vocab = len(tokenizer)

    class Bigram(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.table = torch.nn.Parameter(torch.randn(vocab, vocab))

        def forward(self, input_ids, past_key_values=None, use_cache=False, **_):
            from types import SimpleNamespace

            return SimpleNamespace(logits=self.table[input_ids], past_key_values=())

    model = Bigram()
    prompts = [[1, 2, 3], [4]]
    greedy = SamplingConfig(temperature=0.0)
    first = sample(model, prompts, max_new_tokens=[5, 2], config=greedy, stop_token_ids=[], pad_id=0)
    second = sample(model, prompts, max_new_tokens=[5, 2], config=greedy, stop_token_ids=[], pad_id=0)
    assert [len(g.token_ids) for g in first] == [5, 2]
    assert [g.token_ids for g in first] == [g.token_ids for g in second]
    # Sampled log-probs are those of the temperature-scaled distribution.
    hot = SamplingConfig(temperature=0.7)
    result = sample(
        model,
        [[3]],
        max_new_tokens=1,
        config=hot,
        stop_token_ids=[],
        pad_id=0,
        generator=torch.Generator().manual_seed(1),
    )[0]
    expected = torch.log_softmax(model.table[3] / 0.7, dim=-1)[result.token_ids[0]]
    assert result.logprobs[0] == pytest.approx(float(expected.detach()), abs=1e-5)


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_a_model_whose_logits_are_not_finite_is_an_error_not_a_score(temperature):
    from slca_grpo.engine import NonFiniteLogits

    class Overflowed(torch.nn.Module):  # finite for the first token, NaN from the second on
        def __init__(self):
            super().__init__()
            self.where = torch.nn.Parameter(torch.zeros(1))  # the sampler reads the model's device from it

        def forward(self, input_ids, past_key_values=None, use_cache=False, **_):
            from types import SimpleNamespace

            logits = torch.zeros(*input_ids.shape, 16)
            logits[..., 3] = 1.0
            if input_ids.shape[1] == 1:  # a decode step
                logits[..., 5] = float("nan")
            return SimpleNamespace(logits=logits, past_key_values=())

    config = SamplingConfig(temperature=temperature)
    with pytest.raises(NonFiniteLogits, match="logits are not finite"):
        sample(Overflowed(), [[1, 2]], max_new_tokens=4, config=config, stop_token_ids=[], pad_id=0)


def test_sampled_tokens_follow_the_tempered_distribution():
    from types import SimpleNamespace

    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))

    class Fixed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.anchor = torch.nn.Parameter(torch.zeros(()))

        def forward(self, input_ids, **_):
            return SimpleNamespace(
                logits=logits.expand(input_ids.shape[0], input_ids.shape[1], 4) + self.anchor, past_key_values=()
            )

    draws = sample(
        Fixed(),
        [[0]] * 4000,
        max_new_tokens=1,
        config=SamplingConfig(temperature=1.0),
        stop_token_ids=[],
        pad_id=0,
        generator=torch.Generator().manual_seed(3),
    )
    counts = torch.bincount(torch.tensor([g.token_ids[0] for g in draws]), minlength=4).float()
    expected = torch.tensor([0.5, 0.3, 0.15, 0.05]) * 4000
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 16.3  # the 0.999 quantile of chi-square with 3 degrees of freedom
    # top_p = 0.6 keeps the two most likely tokens only (0.5 + 0.3 covers it).
    kept = sample(
        Fixed(),
        [[0]] * 500,
        max_new_tokens=1,
        config=SamplingConfig(temperature=1.0, top_p=0.6),
        stop_token_ids=[],
        pad_id=0,
        generator=torch.Generator().manual_seed(4),
    )
    assert {g.token_ids[0] for g in kept} == {0, 1}


def test_shared_prompts_prefill_once_and_sampled_logprobs_match_a_full_forward(tokenizer):
    from slca_grpo.engine import token_logprobs
    from slca_grpo.models.tiny import TinyModelConfig, build_tiny_model

    model = build_tiny_model(
        tokenizer,
        TinyModelConfig(num_layers=2, hidden_size=32, num_heads=2, num_kv_heads=1, intermediate_size=64, seed=3),
    )
    first, second = tokenizer.encode("what is the weather"), tokenizer.encode("book a table for two please")
    prompts = [first, first, second, first, second]  # groups interleaved, different lengths
    calls = []
    original_forward = model.forward

    def counting_forward(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape)
        return original_forward(*args, **kwargs)

    model.forward = counting_forward
    generations = sample(
        model,
        prompts,
        max_new_tokens=6,
        config=SamplingConfig(temperature=1.0),
        stop_token_ids=[],
        pad_id=tokenizer.pad_token_id,
        generator=torch.Generator().manual_seed(0),
    )
    model.forward = original_forward
    assert calls[0] == (2, len(second))  # one prefill row per distinct prompt
    assert all(shape[0] == 5 for shape in calls[1:])
    # Each row's sampled log-probs are those of its own context, recomputed without any cache.
    for prompt, generation in zip(prompts, generations):
        ids = torch.tensor([prompt + generation.token_ids])
        recomputed = token_logprobs(model, ids, torch.ones_like(ids), start=len(prompt))[0, len(prompt) :]
        assert torch.allclose(recomputed, torch.tensor(generation.logprobs), atol=1e-4)


@pytest.mark.parametrize("architecture", ["tiny", "smollm2-shaped"])
def test_later_turns_prefill_a_shared_prompt_once_and_sample_as_a_full_prefill_does(tokenizer, architecture):

    from slca_grpo.engine import token_logprobs
    from slca_grpo.models.tiny import TinyModelConfig, build_tiny_model

    if architecture == "tiny":
        config = TinyModelConfig(num_layers=2, hidden_size=32, num_heads=2, num_kv_heads=1, intermediate_size=64)
        model = build_tiny_model(tokenizer, config)
    else:
        model = smollm2_shaped_model(len(tokenizer))
    first, second = tokenizer.encode("what is the weather in paris today"), tokenizer.encode("book a table")
    # Two groups after a first turn: each row is its group's prompt plus a response of its own (one empty).
    rests = [tokenizer.encode(t) for t in ("sunny", "it rains a lot", "", "for two", "at eight tonight")]
    prompts = [first + rests[0], first + rests[1], first + rests[2], second + rests[3], second + rests[4]]
    lengths = [len(first)] * 3 + [len(second)] * 2
    calls = []
    original_forward = model.forward

    def counting_forward(*args, **kwargs):
        calls.append(tuple(kwargs["input_ids"].shape))
        return original_forward(*args, **kwargs)

    def run(prefix_lengths):
        calls.clear()
        model.forward = counting_forward
        try:
            return sample(
                model,
                prompts,
                max_new_tokens=6,
                config=SamplingConfig(temperature=0.0),
                stop_token_ids=[],
                pad_id=tokenizer.pad_token_id,
                prefix_lengths=prefix_lengths,
            )
        finally:
            model.forward = original_forward

    shared = run(lengths)
    assert calls[0] == (2, len(first))  # the two prompts, once each
    assert calls[1] == (5, max(len(r) for r in rests))  # each row's own rest, on top
    plain = run(None)
    assert calls[0] == (5, max(len(p) for p in prompts))
    assert [g.token_ids for g in shared] == [g.token_ids for g in plain]
    for prompt, generation, reference in zip(prompts, shared, plain):
        assert torch.allclose(torch.tensor(generation.logprobs), torch.tensor(reference.logprobs), atol=1e-5)
        ids = torch.tensor([prompt + generation.token_ids])
        recomputed = token_logprobs(model, ids, torch.ones_like(ids), start=len(prompt))[0, len(prompt) :]
        assert torch.allclose(recomputed, torch.tensor(generation.logprobs), atol=1e-4)


def test_a_later_turns_prefill_runs_by_prompt_with_whole_rows_logits(tokenizer, monkeypatch):
    """Several new tokens per row on shared prompts (uneven groups, padded rests, an empty rest) go
    through prefix_prefill_attention, never through copies of whole rows, with the logits of a
    plain full prefill."""
    import slca_grpo.engine.kv_cache as kv_cache

    model = smollm2_shaped_model(len(tokenizer))
    first, second, third = (tokenizer.encode(t) for t in ("what is the weather in paris today", "book", "hello there"))
    rests = [tokenizer.encode(t) for t in ("sunny", "", "it rains a lot", "for two", "at eight tonight", "hi")]
    prompts = [first, second, first, second, first, third]
    rows = [p + r for p, r in zip(prompts, rests)]
    calls = []
    original = kv_cache.prefix_prefill_attention

    def spy(plan, query, *args):
        calls.append((plan.in_order, query.shape[-2]))
        return original(plan, query, *args)

    monkeypatch.setattr(kv_cache, "prefix_prefill_attention", spy)
    monkeypatch.setattr(kv_cache, "SHARED_PREFIX_MIN_HIDDEN", 0)  # this toy model shares its prompts

    def whole_rows_refused(self):
        raise AssertionError("a later turn's prefill copied whole rows")

    def run(prefix_lengths):
        return sample(
            model,
            rows,
            max_new_tokens=5,
            config=SamplingConfig(temperature=0.0),
            stop_token_ids=[],
            pad_id=tokenizer.pad_token_id,
            prefix_lengths=prefix_lengths,
        )

    with monkeypatch.context() as refuse:
        refuse.setattr(kv_cache.SharedPrefixLayer, "whole_rows", whole_rows_refused)
        shared = run([len(p) for p in prompts])
    assert calls and all(length == max(len(r) for r in rests) for _, length in calls)
    assert not calls[0][0]  # rows not laid out prompt by prompt: the slots path
    plain = run(None)
    assert [g.token_ids for g in shared] == [g.token_ids for g in plain]
    for ours, theirs in zip(shared, plain):
        assert torch.allclose(torch.tensor(ours.logprobs), torch.tensor(theirs.logprobs), atol=1e-5)


def test_single_token_stop_strings_stop_like_decoded_ones(tokenizer):
    from types import SimpleNamespace

    close = tokenizer.convert_tokens_to_ids("</tool_call>")
    script = tokenizer.encode("a b") + [close] + tokenizer.encode("c d e")

    class Replay(torch.nn.Module):
        """Emits ``script`` one token per step, whatever the context."""

        def __init__(self):
            super().__init__()
            self.anchor = torch.nn.Parameter(torch.zeros(()))

        def forward(self, input_ids, past_key_values=None, **_):
            seen = 0 if past_key_values is None else past_key_values
            logits = torch.full((input_ids.shape[0], input_ids.shape[1], len(tokenizer)), -1e9)
            logits[:, -1, script[seen]] = 0.0
            return SimpleNamespace(logits=logits + self.anchor, past_key_values=seen + 1)

    greedy = SamplingConfig(temperature=0.0)
    common = dict(
        max_new_tokens=10,
        config=greedy,
        stop_token_ids=[],
        pad_id=0,
        stop_strings=("</tool_call>",),
        decode=tokenizer.decode,
    )
    by_id = sample(Replay(), [[1]], encode=tokenizer.encode, **common)[0]
    by_text = sample(Replay(), [[1]], **common)[0]
    assert by_id.token_ids == by_text.token_ids == script[: script.index(close) + 1]
    assert by_id.stop_reason == by_text.stop_reason == "stop_string"


def test_rollouts_can_use_the_simulator_service(tokenizer, monkeypatch):
    from simulator_helpers import running_app

    from slca_grpo.config import ConfigError
    from slca_grpo.simulator import Simulator, SimulatorClient, SimulatorConfig, create_app
    from slca_grpo.trainer.build import make_simulator
    from slca_grpo.trainer.run_config import RunConfig

    config = RunConfig()
    assert isinstance(make_simulator(config), Simulator)  # in process by default
    config.simulator_service.url = "127.0.0.1:8765"
    with pytest.raises(ConfigError, match="simulator_service.url"):
        make_simulator(config)
    with running_app(create_app(Simulator(SimulatorConfig(seed=0)), token="tok")) as url:
        monkeypatch.setenv("SLCA_SIM_TOKEN", "tok")
        config.simulator_service.url, config.simulator_service.max_retries = url, 1
        client = make_simulator(config)
        assert isinstance(client, SimulatorClient) and client.max_retries == 1
        loop, _ = build_loop(tokenizer, lambda p, t: CALL if t == 0 else "Done.<|im_end|>", simulator=client)
        trajectory = loop.run([make_task()], group_size=1, session_prefix="svc")[0]
        observation = trajectory.turns[0].observations[0]
        local = Simulator(SimulatorConfig(seed=0)).simulate(
            ToolCall("get_weather", {"city": "Paris"}), [WEATHER], "svc-0"
        )
        assert not observation.is_error and observation.text == local.text  # the service's schema backend answered
        assert client.counters["requests"] >= 1 and client.counters["failures"] == 0
        monkeypatch.setenv("SLCA_SIM_TOKEN", "wrong")
        rejected = make_simulator(config)
        loop, _ = build_loop(tokenizer, lambda p, t: CALL if t == 0 else "Done.<|im_end|>", simulator=rejected)
        failed = loop.run([make_task()], group_size=1)[0].turns[0].observations[0]
        assert failed.is_error  # a refused request is an error observation, not a crash


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"top_p": -0.5}, "top_p must be in (0, 1], got -0.5"),
        ({"top_p": float("nan")}, "top_p must be in (0, 1], got nan"),
        ({"temperature": 1e-40}, "temperature must be 0 (greedy) or at least 0.01, got 1e-40"),
        ({"temperature": float("nan")}, "temperature must be 0 (greedy) or at least 0.01, got nan"),
        ({"top_k": -1}, "top_k must be a whole number >= 0 (0: every token), got -1"),
        ({"top_k": 2.5}, "top_k must be a whole number >= 0 (0: every token), got 2.5"),
    ],
)
def test_the_sampler_refuses_settings_that_would_sample_a_fixed_token_or_nan(settings, named):
    # Every sampler starts from a SamplingConfig, so the engine's own callers are held to it too.
    with pytest.raises(ValueError, match=re.escape(named)):
        SamplingConfig(**settings)
    assert SamplingConfig(temperature=0.0, top_p=1.0, top_k=0).temperature == 0.0
