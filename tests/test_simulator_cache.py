"""The SQLite response cache: replay across processes, concurrent writers, corrupt-file recovery."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest
from simulator_helpers import ORDER_TOOLS, WEATHER_TOOL, FakeChatServer, completion

from slca_grpo.datatypes import ToolCall
from slca_grpo.simulator import ErrorInjectionConfig, Simulator, SimulatorConfig
from slca_grpo.simulator.cache import CacheCorruptWarning, ResponseCache

SRC = str(Path(__file__).resolve().parents[1] / "src")

_REPLAY_SCRIPT = """
import json, sys
sys.path.insert(0, {src!r})
from slca_grpo.config import from_dict
from slca_grpo.simulator import Simulator, SimulatorConfig
from slca_grpo.datatypes import ToolCall
config, tools = json.loads(sys.argv[1]), json.loads(sys.argv[2])
sim = Simulator(from_dict(SimulatorConfig, config))
obs = sim.simulate(ToolCall("get_weather", {{"city": "Paris"}}), tools, "episode-1")
print(json.dumps({{"text": obs.text, "cached": obs.cached, "error": obs.error and obs.error.kind,
                  "hits": sim.stats.cache_hits, "misses": sim.stats.cache_misses}}))
"""


def run_replay(config: dict, tools: list) -> dict:
    script = _REPLAY_SCRIPT.format(src=SRC)
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(config), json.dumps(tools)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_model_answer_is_replayed_by_another_process(tmp_path):
    counter = {"n": 0}

    def reply(body, index):  # a different answer every time the model is asked
        counter["n"] += 1
        return (
            200,
            completion(json.dumps({"city": "Paris", "temperature": 10 + counter["n"], "condition": "rain"})),
            0.0,
        )

    with FakeChatServer(reply) as server:
        config = {
            "backend": "openai",
            "cache_path": str(tmp_path / "cache.sqlite"),
            "openai": {"base_url": server.base_url, "model": "sim", "max_retries": 0},
        }
        first = run_replay(config, [WEATHER_TOOL])
        second = run_replay(config, [WEATHER_TOOL])
    assert first["error"] is None and first["cached"] is False and first["misses"] == 1
    assert second == {**first, "cached": True, "hits": 1, "misses": 0}
    assert json.loads(second["text"])["temperature"] == 11
    assert counter["n"] == 1  # the second process never reached the model


def test_the_cache_key_covers_seed_and_session_state(tmp_path):
    path = str(tmp_path / "c.sqlite")
    call = ToolCall("get_weather", {"city": "Oslo"})
    a = Simulator(SimulatorConfig(cache_path=path, seed=1))
    first = a.simulate(call, [WEATHER_TOOL], "s")
    assert a.simulate(call, [WEATHER_TOOL], "t").cached is True  # same (empty) state, other session
    assert a.simulate(call, [WEATHER_TOOL], "s").cached is False  # state of "s" has moved on
    b = Simulator(SimulatorConfig(cache_path=path, seed=2))
    assert b.simulate(call, [WEATHER_TOOL], "s").cached is False
    c = Simulator(SimulatorConfig(cache_path=path, seed=1))
    again = c.simulate(call, [WEATHER_TOOL], "s")
    assert again.cached is True and again.text == first.text
    assert (a.stats.cache_hits, a.stats.cache_misses) == (1, 2)


def test_no_cache_path_means_no_cache():
    sim = Simulator(SimulatorConfig(cache_path=None))
    for _ in range(2):
        assert sim.simulate(ToolCall("get_weather", {"city": "Oslo"}), [WEATHER_TOOL]).cached is False
    assert sim.cache is None and sim.stats.cache_hits == sim.stats.cache_misses == 0


def test_injected_errors_and_validation_errors_are_not_cached(tmp_path):
    sim = Simulator(
        SimulatorConfig(cache_path=str(tmp_path / "c.sqlite"), errors=ErrorInjectionConfig(server_error_rate=1.0))
    )
    assert sim.simulate(ToolCall("get_weather", {"city": "Oslo"}), [WEATHER_TOOL]).error.kind == "server_error"
    assert sim.simulate(ToolCall("get_weather", {}), [WEATHER_TOOL]).error.kind == "missing_required"
    assert len(sim.cache) == 0


_WRITER_SCRIPT = """
import json, sys
sys.path.insert(0, {src!r})
from slca_grpo.simulator.cache import ResponseCache
cache = ResponseCache(sys.argv[1])
name = sys.argv[2]
seen = {{f"k{{i}}": cache.put(f"k{{i}}", f"{{name}}-{{i}}") for i in range(150)}}
seen.update({{f"own{{i}}": cache.put(f"{{name}}-own{{i}}", "x") for i in range(50)}})
reads = [cache.get(f"k{{i}}") for i in range(150)]
print(json.dumps({{"seen": seen, "reads": reads, "errors": cache.errors}}))
"""


def test_concurrent_writer_processes_agree_on_every_answer(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    script = _WRITER_SCRIPT.format(src=SRC)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, path, f"p{n}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(4)
    ]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        outputs.append(json.loads(out))
    for i in range(150):
        answers = {o["seen"][f"k{i}"] for o in outputs} | {o["reads"][i] for o in outputs}
        assert len(answers) == 1  # whoever wrote first, everyone replays that answer
    assert all(o["errors"] == 0 for o in outputs)
    assert len(ResponseCache(path)) == 150 + 4 * 50


def test_threads_sharing_one_simulator_and_cache(tmp_path):
    sim = Simulator(SimulatorConfig(cache_path=str(tmp_path / "c.sqlite")))
    results: dict[int, list[str]] = {}

    def work(n: int) -> None:
        results[n] = [
            sim.simulate(ToolCall("get_order", {"order_id": f"ORD-{i}"}), ORDER_TOOLS).text for i in range(40)
        ]

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(results[n] == results[0] for n in results)
    assert sim.stats.cache_hits + sim.stats.cache_misses == 240
    assert len(sim.cache) == 40


def test_a_corrupt_cache_file_is_moved_aside_and_rebuilt(tmp_path):
    path = tmp_path / "cache.sqlite"
    damaged = b"SQLite format 3\x00" + b"this is not a database " * 500  # a SQLite header, then garbage
    path.write_bytes(damaged)
    with pytest.warns(CacheCorruptWarning, match="moved it to"):
        sim = Simulator(SimulatorConfig(cache_path=str(path)))
    moved = list(tmp_path.glob("cache.sqlite.corrupt-*"))
    assert len(moved) == 1 and moved[0].read_bytes() == damaged
    first = sim.simulate(ToolCall("get_weather", {"city": "Oslo"}), [WEATHER_TOOL])
    assert first.error is None and first.cached is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rebuilt file opens cleanly
        again = Simulator(SimulatorConfig(cache_path=str(path))).simulate(
            ToolCall("get_weather", {"city": "Oslo"}), [WEATHER_TOOL]
        )
    assert again.cached is True and again.text == first.text


def test_a_briefly_locked_new_file_is_waited_for_not_counted_as_an_error(tmp_path, monkeypatch):
    import sqlite3

    real_connect = sqlite3.connect
    refusals = {"left": 2}

    class Busy:
        """A connection whose first statements meet another process creating the same file."""

        def __init__(self, conn):
            self.conn = conn

        def execute(self, sql, *args):
            if sql.startswith("PRAGMA journal_mode") and refusals["left"]:
                refusals["left"] -= 1
                raise sqlite3.OperationalError("database is locked")
            return self.conn.execute(sql, *args)

        def __getattr__(self, name):
            return getattr(self.conn, name)

    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: Busy(real_connect(*a, **k)))
    cache = ResponseCache(tmp_path / "new.sqlite", busy_timeout_s=5.0)
    assert cache.put("k", "v") == "v" and cache.get("k") == "v"
    assert refusals["left"] == 0 and cache.errors == 0
    refusals["left"] = 10**6  # locked for good: a clear error at start-up once the busy timeout passes
    with pytest.raises(OSError, match="cannot open the simulator cache .*other.sqlite: database is locked"):
        ResponseCache(tmp_path / "other.sqlite", busy_timeout_s=0.05)
