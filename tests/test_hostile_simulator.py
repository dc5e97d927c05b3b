"""The simulator under abuse, second round: patterns whose size multiplies, requests that outlive
their budget, cache paths that are somebody else's file, JSON-string arguments the parser cannot
take, and clients that hang up. Each case ends as a value (an observation, a 400, a one-line
error), never as a crash, a stuck worker or a moved file."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sqlite3
import threading
import time
import warnings

import httpx
import pytest
from simulator_helpers import WEATHER_TOOL, hang_up_mid_body, running_app, tool

from slca_grpo.cli import simulate as simulate_commands
from slca_grpo.config import ConfigError
from slca_grpo.datatypes import ToolCall
from slca_grpo.simulator import Simulator, SimulatorConfig, create_app
from slca_grpo.simulator import fabricate as fabricate_module
from slca_grpo.simulator.base import Backend, BackendResult
from slca_grpo.simulator.budget import OverBudget, check_deadline, time_budget
from slca_grpo.simulator.cache import ResponseCache
from slca_grpo.simulator.openai_backend import OpenAIBackend
from slca_grpo.simulator.regexgen import string_from_pattern
from slca_grpo.simulator.regexsize import pattern_cost
from slca_grpo.simulator.safety import (
    COMPILED_PATTERNS,
    MAX_CACHED_PATTERN_NODES,
    MAX_PATTERN_NODES,
    PatternError,
    search,
)
from slca_grpo.simulator.schema_backend import SchemaBackend
from slca_grpo.simulator.words import DetRng

HOSTILE = "^((a{1000}){1000}){1000}$"  # the review's pattern: a billion characters, nested minimums
SLOW = "^(a|aa){25}(?=b)"  # every built string fails the look-ahead: each match runs to its time limit
TOKEN = "t"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def probe(returns=None, parameters=None):
    return tool("probe", {}, returns=returns, extra=parameters)


def call(sim, spec, arguments=None):
    return sim.simulate(ToolCall("probe", arguments or {}), [spec], "episode")


# -- 7. generated size is bounded before anything is generated -----------------------------------


def test_the_pattern_cost_counts_nested_minimums_and_back_references():
    assert pattern_cost(HOSTILE).shortest == 10**9
    assert pattern_cost(HOSTILE).nodes > 10**9
    assert pattern_cost(r"(a{1000})\1{1000}").shortest == 1000 + 1000 * 1000  # a copy per repeat
    assert pattern_cost("(?:a?){100000}").shortest == 0  # short, but unrolled a hundred thousand times
    assert pattern_cost("(?:a?){100000}").nodes >= 100_000
    assert pattern_cost("^[A-Z]{2}-[0-9]{6}$").shortest == 9
    assert pattern_cost("(unclosed") is None


@pytest.mark.parametrize(
    ("returns", "reason"),
    [
        ({"type": "string", "pattern": HOSTILE}, "regex nodes"),
        ({"type": "string", "pattern": "^(?:a?){100000}$"}, "regex nodes"),
        ({"type": "string", "pattern": r"^(a{5000})\1{100}$"}, "shortest match is 505,000"),
        ({"type": "string", "pattern": "(?#" + "x" * 20_000 + ")a"}, "20,005 characters is longer"),
        ({"type": "object", "properties": {"note": {"type": "string", "minLength": 10**10}}}, "minLength"),
        ({"type": "object", "properties": {"tags": {"type": "array", "minItems": 10**9}}}, "minItems"),
        ({"type": "array", "minItems": 100, "items": {"type": "string", "pattern": "^a{2000}$"}}, "values of at least"),
    ],
)
def test_returns_schemas_that_would_build_huge_values_are_an_invalid_schema_observation(returns, reason):
    observation = call(Simulator(SimulatorConfig()), probe(returns))
    assert observation.error is not None and observation.error.kind == "invalid_schema"
    assert "refused" in observation.error.message and reason in observation.error.message
    assert json.loads(observation.text)["error"]["type"] == "invalid_schema"


def test_a_costly_pattern_in_parameters_is_refused_before_the_regex_engine_compiles_it():
    compiled_before = COMPILED_PATTERNS.nodes
    parameters = {"properties": {"x": {"type": "string", "pattern": HOSTILE}}, "patternProperties": {HOSTILE: {}}}
    observation = call(Simulator(SimulatorConfig()), probe(parameters=parameters), {"x": "aaa"})
    assert observation.error.kind == "invalid_schema" and "regex nodes" in observation.error.message
    assert COMPILED_PATTERNS.nodes == compiled_before
    with pytest.raises(PatternError, match="unrolls into over"):  # and the one door to the engine is shut
        search(HOSTILE, "aaa")


def test_the_string_builder_never_passes_its_limit():
    rng = DetRng(0, "pattern")
    assert string_from_pattern(HOSTILE, rng) is None  # refused on its shortest match, nothing built
    assert string_from_pattern("^(?:(?:a{3}){3}){3}$", rng, max_chars=26) is None
    assert string_from_pattern("^(?:(?:a{3}){3}){3}$", rng, max_chars=27) == "a" * 27
    # Random extra repeats multiply too: whatever is built stays within the limit.
    built = [string_from_pattern("^(?:(?:(?:a{1,4}){1,4}){1,4})$", DetRng(seed), max_chars=10) for seed in range(30)]
    assert all(text is None or len(text) <= 10 for text in built)
    assert None in built and any(text for text in built)


def test_optional_parts_that_outgrow_the_answer_limit_end_as_an_error_not_memory(monkeypatch):
    # Each keyword is small and nothing is required, so only the generator's own count can stop it.
    monkeypatch.setattr(fabricate_module, "MAX_ANSWER_UNITS", 5_000)
    grid = {"type": "array", "minItems": 100, "items": {"type": "array", "minItems": 100, "items": {"type": "integer"}}}
    observation = call(Simulator(SimulatorConfig()), probe({"type": "object", "properties": {"grid": grid}}))
    assert observation.error.kind == "invalid_schema" and "larger than 5,000" in observation.error.message


def test_the_schema_backend_in_process_answers_a_hostile_schema_at_once():
    sim = Simulator(SimulatorConfig(), backend=SchemaBackend(seed=0))
    returns = {"type": "object", "properties": {"code": {"type": "string", "pattern": HOSTILE}}}
    observation = call(sim, probe(returns))
    assert observation.error.kind == "invalid_schema"
    sane = probe({"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}-\\d{4}$"}}})
    assert call(sim, sane).error is None  # the simulator is still fine for everyone else


def test_compiled_patterns_are_bounded_by_their_unrolled_size():
    for index in range(40):
        pattern = f"^z{{{index}}}a{{{MAX_PATTERN_NODES - 100}}}$"  # each just under the per-pattern limit
        assert search(pattern, "a") is False
    assert 0 < COMPILED_PATTERNS.nodes <= MAX_CACHED_PATTERN_NODES


# -- 7. a request over its budget stops its work --------------------------------------------------


def slow_tool(fields: int = 1000):
    # Each field costs one 0.05 s pattern time-out per attempt: minutes of work without a budget.
    properties = {f"f{i}": {"type": "string", "pattern": SLOW} for i in range(fields)}
    return probe({"type": "object", "properties": properties})


def test_the_budget_is_checked_by_the_work_and_nested_budgets_keep_the_earlier_deadline():
    with time_budget(0, "spent"):
        with pytest.raises(OverBudget, match="spent"):
            check_deadline()
        with time_budget(60, "later"), pytest.raises(OverBudget, match="spent"):
            check_deadline()
    check_deadline()  # no budget in force: nothing happens
    assert not issubclass(OverBudget, Exception)  # `except Exception` handlers must not swallow it


def test_in_process_a_call_over_its_budget_stops_and_is_an_over_budget_observation():
    sim = Simulator(SimulatorConfig(call_budget_s=0.3))
    observation = call(sim, slow_tool())
    assert observation.error is not None and observation.error.kind == "over_budget"
    assert "call_budget_s" in observation.error.message
    assert sim.stats.errors["over_budget"] == 1
    assert call(sim, probe()).error is None  # the next call starts with a budget of its own


class Hanging(Backend):
    """A plugin backend that never checks a deadline: it answers only when ``release`` is set."""

    name = "hanging"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.threads: list[str] = []

    def generate(self, request):
        self.threads.append(threading.current_thread().name)
        self.release.wait(30)
        return BackendResult(text='{"ok": true}', data={"ok": True})


class HangingAsync(Backend):
    name = "hanging-async"
    is_async = True

    def __init__(self) -> None:
        self.cancelled = 0

    async def agenerate(self, request):
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return BackendResult(text="{}", data={})  # pragma: no cover


def test_a_plugin_backend_that_hangs_is_cut_off_at_the_call_budget_sync_or_async():
    hanging = Hanging()
    sim = Simulator(SimulatorConfig(call_budget_s=0.3), backend=hanging)
    started = time.monotonic()
    observation = call(sim, probe())
    assert observation.error is not None and observation.error.kind == "over_budget"
    assert "call_budget_s" in observation.error.message
    assert time.monotonic() - started < 10  # without the cut-off: 30 s, the backend's own wait
    assert hanging.threads == ["slca-budgeted-call"]  # run aside, the caller waited for it
    hanging.release.set()  # let the left-behind thread end
    asynchronous = HangingAsync()
    sim = Simulator(SimulatorConfig(call_budget_s=0.3), backend=asynchronous)
    observation = call(sim, probe())
    assert observation.error is not None and observation.error.kind == "over_budget"
    assert asynchronous.cancelled == 1  # an async one is cancelled, not left running


def test_calls_that_never_return_leave_a_bounded_number_of_threads_behind(monkeypatch):
    import slca_grpo.simulator.budget as budget

    for thread in list(budget._abandoned):  # threads an earlier test left to finish
        thread.join()
    monkeypatch.setattr(budget, "MAX_ABANDONED_WORKERS", 3)
    release, started = threading.Event(), []

    def never_returns():
        started.append(threading.current_thread())
        release.wait(30)
        return "late"

    for _ in range(5):
        with time_budget(0.05, "call_budget_s spent"), pytest.raises(OverBudget) as refused:
            budget.run_within_budget(never_returns)
    # Three threads were started and left running; the two calls after them started none.
    assert len(started) == 3 and budget.abandoned_workers() == 3
    assert "3 earlier calls ran over their budget and have not returned" in str(refused.value)
    sim = Simulator(SimulatorConfig(call_budget_s=0.3), backend=Hanging())
    observation = call(sim, probe())
    assert observation.error is not None and observation.error.kind == "over_budget"
    assert "have not returned" in observation.error.message and len(started) == 3
    release.set()
    for thread in started:
        thread.join()
    assert budget.abandoned_workers() == 0
    with time_budget(5.0, "call_budget_s spent"):
        assert budget.run_within_budget(lambda: "answered") == "answered"  # threads again once they ended


def test_a_plugin_backend_within_its_budget_answers_and_its_errors_stay_errors():
    quick = Hanging()
    quick.release.set()
    sim = Simulator(SimulatorConfig(call_budget_s=5.0), backend=quick)
    assert json.loads(call(sim, probe()).text) == {"ok": True}

    class Broken(Backend):
        name = "broken"

        def generate(self, request):
            raise KeyError("oops")

    observation = call(Simulator(SimulatorConfig(call_budget_s=5.0), backend=Broken()), probe())
    assert observation.error.kind == "backend_error" and "KeyError" in observation.error.message

    class Careless(Backend):  # returns its text, not a BackendResult
        name = "careless"

        def generate(self, request):
            return '{"ok": true}'

    observation = call(Simulator(SimulatorConfig(), backend=Careless()), probe())
    assert observation.error.kind == "backend_error"
    assert observation.error.message == (
        "simulator backend failed: WrongResultType: generate returned str, not BackendResult"
    )
    # The built-in backends keep within the budget themselves and run in the caller's thread.
    assert SchemaBackend.bounds_itself and OpenAIBackend.bounds_itself and not Backend.bounds_itself


def test_a_batch_whose_budget_is_spent_answers_the_rest_at_once():
    sim = Simulator(SimulatorConfig())
    items = [(ToolCall("get_weather", {"city": f"c{i}"}), [WEATHER_TOOL], None) for i in range(50)]
    with time_budget(0, "the request's budget is spent"):
        observations = sim.simulate_many(items)
    assert [o.error.kind for o in observations] == ["over_budget"] * 50
    assert sim.stats.backend_calls == 0


class WatchedBackend(SchemaBackend):
    """The schema backend, noting how each generation ended."""

    def __init__(self) -> None:
        super().__init__(seed=0)
        self.ended = threading.Event()
        self.outcome: str | None = None

    def generate(self, request):
        try:
            result = super().generate(request)
            self.outcome = "finished"
            return result
        except BaseException as exc:
            self.outcome = type(exc).__name__
            raise
        finally:
            self.ended.set()


def test_the_service_stops_the_worker_of_a_request_over_budget():
    backend = WatchedBackend()
    sim = Simulator(SimulatorConfig(call_budget_s=None), backend=backend)
    app = create_app(sim, token=TOKEN, request_timeout_s=0.5)
    body = {"tools": [slow_tool()], "call": {"name": "probe", "arguments": {}}}
    with running_app(app) as url:
        response = httpx.post(f"{url}/v1/simulate", json=body, headers=AUTH, timeout=30)
        assert response.status_code == 200 and response.json()["error"]["kind"] == "over_budget"
        # Without the budget in the worker this generation would run for minutes.
        assert backend.ended.wait(timeout=20), "the worker kept running after its request was answered"
        assert backend.outcome == "OverBudget"
        ordinary = {"tools": [WEATHER_TOOL], "call": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
        later = httpx.post(f"{url}/v1/simulate", json=ordinary, headers=AUTH, timeout=30).json()
    assert later["error"] is None and json.loads(later["observation"])["city"] == "Oslo"


# -- 8. a cache path that is not a cache is refused, never moved --------------------------------


def assert_untouched(path, content: bytes) -> None:
    assert path.read_bytes() == content
    leftovers = sorted(p.name for p in path.parent.iterdir() if p.name != path.name)
    assert leftovers == [], leftovers


@pytest.mark.parametrize("content", [b'{"task": "book a flight"}\n' * 50, b"x", b"SQLite format 2\x00 almost"])
def test_a_file_that_is_not_a_database_is_refused_and_left_where_it_is(tmp_path, content):
    path = tmp_path / "train.jsonl"
    path.write_bytes(content)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no CacheCorruptWarning: nothing is moved
        with pytest.raises(ConfigError, match="is not a SQLite database") as refused:
            Simulator(SimulatorConfig(cache_path=str(path)))
    message = str(refused.value)
    assert str(path) in message and "\n" not in message
    assert_untouched(path, content)


def test_a_directory_or_a_device_is_refused_naming_the_path(tmp_path):
    with pytest.raises(ConfigError, match=f"'{tmp_path}' is a directory"):
        ResponseCache(tmp_path)
    if os.path.exists("/dev/null"):
        with pytest.raises(ConfigError, match="'/dev/null' is not a regular file"):
            ResponseCache("/dev/null")


def test_another_programs_sqlite_database_is_refused_and_not_written(tmp_path):
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    content = path.read_bytes()
    with pytest.raises(ConfigError, match="SQLite database of something else.*users"):
        ResponseCache(path)
    assert_untouched(path, content)


def test_an_empty_file_becomes_a_new_cache(tmp_path):
    path = tmp_path / "cache.sqlite"
    path.touch()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cache = ResponseCache(path)
    assert cache.put("k", "v") == "v" and cache.get("k") == "v"
    cache.close()
    assert path.read_bytes().startswith(b"SQLite format 3\x00")
    assert ResponseCache(path).get("k") == "v"  # and it opens as a cache from then on


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="slca")
    simulate_commands.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args)


def test_simulate_with_a_data_file_as_cache_is_one_line_and_the_file_stays(tmp_path, capsys):
    data = tmp_path / "train.jsonl"
    data.write_text('{"prompt": "hello"}\n')
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([WEATHER_TOOL]))
    status = run_cli(
        ["simulate", "--tools", str(tools), "--call", '{"name": "get_weather", "arguments": {"city": "Rome"}}']
        + ["--cache", str(data)]
    )
    err = capsys.readouterr().err.strip()
    assert status == 2 and err.count("\n") == 0
    assert err.startswith("error: ") and str(data) in err and "not a SQLite database" in err
    assert data.read_text() == '{"prompt": "hello"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tools.json", "train.jsonl"]


# -- 14. JSON-string arguments and client disconnects at the service ------------------------------


@pytest.fixture(scope="module")
def service_url():
    with running_app(create_app(Simulator(SimulatorConfig()), token=TOKEN)) as url:
        yield url


def envelope(arguments: str) -> dict:
    return {"tools": [WEATHER_TOOL], "call": {"name": "get_weather", "arguments": arguments}}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("[" * 50_000 + "]" * 50_000, "nested deeper than 100 levels"),
        ('{"city": "Oslo", "n": ' + "7" * 5000 + "}", "more than 4300 digits"),
        ('{"city": "Oslo", "n": -' + "7" * 5000 + "}", "more than 4300 digits"),
        (json.dumps({"city": json.loads("[" * 150 + "]" * 150)}), "nested deeper than 100 levels"),
        ('{"city": "Oslo", "days": NaN}', "NaN is not a JSON number"),
        ('{"city": ', "not valid JSON"),
    ],
    ids=["50000-deep", "5000-digit", "5000-digit-negative", "150-deep", "NaN", "truncated"],
)
def test_json_string_arguments_the_parser_cannot_take_are_400_naming_the_field(service_url, arguments, message):
    response = httpx.post(f"{service_url}/v1/simulate", json=envelope(arguments), headers=AUTH, timeout=30)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error.startswith("body.call.arguments") and message in error
    batch = httpx.post(
        f"{service_url}/v1/simulate_batch", json={"requests": [envelope("{}"), envelope(arguments)]}, headers=AUTH
    )
    assert batch.status_code == 400 and batch.json()["error"].startswith("requests[1].call.arguments")


def test_json_string_arguments_within_the_limits_still_work(service_url):
    arguments = json.dumps({"city": "Oslo", "days": 3})
    response = httpx.post(f"{service_url}/v1/simulate", json=envelope(arguments), headers=AUTH, timeout=30)
    assert response.status_code == 200 and response.json()["error"] is None


def test_in_process_unparsable_string_arguments_are_an_observation_not_an_exception():
    sim = Simulator(SimulatorConfig())
    for arguments in ("[" * 50_000 + "]" * 50_000, '{"n": ' + "7" * 5000 + "}"):
        observation = sim.simulate({"name": "get_weather", "arguments": arguments}, [WEATHER_TOOL])
        assert observation.error.kind == "invalid_arguments"


def test_a_client_disconnect_is_counted_as_one_and_logged_in_one_line(caplog):
    sim = Simulator(SimulatorConfig())
    app = create_app(sim, token=TOKEN)
    with caplog.at_level(logging.INFO, logger="slca_grpo.simulator.service"):
        sent = asyncio.run(hang_up_mid_body(app, TOKEN))
    records = [r for r in caplog.records if r.name == "slca_grpo.simulator.service"]
    assert len(records) == 1 and records[0].exc_info is None and "disconnected" in records[0].getMessage()
    assert "\n" not in records[0].getMessage()
    assert sent[0]["status"] != 500
    metrics = app.state.metrics.render(sim.stats.to_dict(), 0)
    assert 'slca_sim_client_disconnects_total{endpoint="/v1/simulate"} 1' in metrics
    assert 'status="500"' not in metrics
