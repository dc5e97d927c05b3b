"""`slca simulate` and `slca serve-sim`."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from simulator_helpers import SEARCH_TOOL, WEATHER_TOOL, free_port

from slca_grpo.cli import simulate as commands
from slca_grpo.datatypes import ToolCall
from slca_grpo.simulator import SimulatorClient, SimulatorServiceConfig

SRC = str(Path(__file__).resolve().parents[1] / "src")


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="slca")
    commands.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture
def tools_file(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([WEATHER_TOOL, SEARCH_TOOL]))
    return path


def test_the_commands_are_registered_with_the_main_cli():
    from slca_grpo.cli import COMMAND_MODULES

    assert "slca_grpo.cli.simulate" in COMMAND_MODULES


def test_simulate_prints_one_observation_as_json(tools_file, capsys):
    code = run(
        [
            "simulate",
            "--tools",
            str(tools_file),
            "--call",
            '{"name": "get_weather", "arguments": {"city": "Oslo"}}',
            "--seed",
            "3",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["error"] is None and json.loads(out["observation"])["city"] == "Oslo"
    run(
        [
            "simulate",
            "--tools",
            str(tools_file),
            "--call",
            '{"name": "get_weather", "arguments": {"city": "Oslo"}}',
            "--seed",
            "3",
        ]
    )
    assert json.loads(capsys.readouterr().out)["observation"] == out["observation"]  # deterministic


def test_simulate_accepts_a_single_tool_a_tools_object_yaml_config_and_call_files(tmp_path, capsys):
    single = tmp_path / "one.json"
    single.write_text(json.dumps(WEATHER_TOOL))
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({"tools": [WEATHER_TOOL]}))
    call = tmp_path / "call.json"
    call.write_text('{"name": "get_weather", "arguments": {"city": "Rome"}}')
    config = tmp_path / "sim.yaml"
    config.write_text("simulator:\n  seed: 4\n  errors:\n    server_error_rate: 1.0\n")
    assert run(["simulate", "--tools", str(single), "--call", f"@{call}"]) == 0
    assert json.loads(json.loads(capsys.readouterr().out)["observation"])["city"] == "Rome"
    assert run(["simulate", "--tools", str(wrapped), "--call", f"@{call}", "--config", str(config)]) == 0
    assert json.loads(capsys.readouterr().out)["error"]["kind"] == "server_error"
    assert (
        run(
            [
                "simulate",
                "--tools",
                str(wrapped),
                "--call",
                f"@{call}",
                "--config",
                str(config),
                "--server-error-rate",
                "0",
            ]
        )
        == 0
    )  # flags override the file
    assert json.loads(capsys.readouterr().out)["error"] is None


@pytest.mark.parametrize(
    ("make_tools", "call", "message"),
    [
        (None, '{"name": "get_weather"}', "cannot read --tools"),
        ("{broken", '{"name": "get_weather"}', "is not valid JSON"),
        ("[1, 2]", '{"name": "get_weather"}', "must hold a list of tool schemas"),
        ("[]", "{oops", "--call is not valid JSON"),
        ("[]", '["get_weather"]', '--call must be a JSON object with a string "name"'),
        ("[]", "@/does/not/exist.json", "cannot read --call file"),
    ],
)
def test_simulate_input_errors_are_one_line_and_exit_2(tmp_path, capsys, make_tools, call, message):
    path = tmp_path / "tools.json"
    if make_tools is not None:
        path.write_text(make_tools)
    assert run(["simulate", "--tools", str(path), "--call", call]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_bad_settings_exit_2(tools_file, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("simulator:\n  bogus: 1\n")
    assert run(["simulate", "--tools", str(tools_file), "--call", '{"name": "x"}', "--config", str(bad)]) == 2
    assert "unknown setting(s): simulator.bogus" in capsys.readouterr().err
    assert run(["simulate", "--tools", str(tools_file), "--call", '{"name": "x"}', "--backend", "openai"]) == 2
    assert "openai.model is required" in capsys.readouterr().err


@pytest.fixture
def fake_serve(monkeypatch):
    """serve() replaced: the keyword arguments of each call, and no server ever starts."""
    from slca_grpo.simulator import server

    calls: list[dict] = []
    monkeypatch.setattr(server, "serve", lambda simulator, **kwargs: calls.append(kwargs))
    monkeypatch.delenv("SLCA_SIM_TOKEN", raising=False)
    return calls


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--request-budget", "0"], "--request-budget must be a finite number of seconds > 0, got 0.0"),
        (["--request-budget", "-5"], "--request-budget must be a finite number of seconds > 0, got -5.0"),
        (["--request-budget", "nan"], "--request-budget must be a finite number of seconds > 0, got nan"),
        (["--request-budget", "inf"], "--request-budget must be a finite number of seconds > 0, got inf"),
        (["--port", "70000"], "--port must be an integer from 1 to 65535, got 70000"),
        (["--port", "-1"], "--port must be an integer from 1 to 65535, got -1"),
        (["--port", "0"], "--port must be an integer from 1 to 65535, got 0"),
        (["--max-body-bytes", "-1"], "--max-body-bytes must be >= 1, got -1"),
        (["--max-body-bytes", "0"], "--max-body-bytes must be >= 1, got 0"),
        (["--session-ttl", "nan"], "--session-ttl must be > 0 seconds, got nan"),
        (["--session-ttl", "0"], "--session-ttl must be > 0 seconds, got 0.0"),
        (["--header-timeout", "nan"], "--header-timeout must be a finite number of seconds > 0, got nan"),
        (["--header-timeout", "0"], "--header-timeout must be a finite number of seconds > 0, got 0.0"),
        (["--keep-alive", "-1"], "--keep-alive must be a finite number of seconds > 0, got -1.0"),
        (["--keep-alive", "inf"], "--keep-alive must be a finite number of seconds > 0, got inf"),
        (["--max-connections", "0"], "--max-connections must be >= 1, got 0"),
        (["--max-sessions", "0"], "--max-sessions must be >= 1, got 0"),
        (["--request-timeout", "nan"], "--request-timeout must be a finite number of seconds > 0, got nan"),
        (["--temperature", "nan"], "--temperature must be a finite number >= 0, got nan"),
        (["--timeout-rate", "nan"], "--timeout-rate must be in [0, 1], got nan"),
    ],
)
def test_bad_serve_options_are_one_line_errors_before_the_server_starts(capsys, fake_serve, options, message):
    assert run(["serve-sim", *options]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {message}\n"
    assert fake_serve == []


def test_a_nan_session_ttl_is_refused_by_simulate_too(tools_file, capsys):
    assert run(["simulate", "--tools", str(tools_file), "--call", '{"name": "x"}', "--session-ttl", "nan"]) == 2
    assert capsys.readouterr().err == "error: --session-ttl must be > 0 seconds, got nan\n"


def test_serve_options_reach_the_server_and_defaults_match_the_library(capsys, fake_serve):
    from slca_grpo.simulator import server, service

    assert run(["serve-sim"]) == 0
    defaults = fake_serve.pop()
    assert defaults["host"] == "127.0.0.1" and defaults["port"] == 8765
    assert defaults["max_body_bytes"] == service.DEFAULT_MAX_BODY_BYTES
    assert defaults["request_timeout_s"] == service.DEFAULT_REQUEST_TIMEOUT_S
    assert defaults["header_timeout_s"] == server.DEFAULT_HEADER_TIMEOUT_S
    assert defaults["keep_alive_s"] == server.DEFAULT_KEEP_ALIVE_S
    assert 16 <= defaults["max_connections"] <= server.DEFAULT_MAX_CONNECTIONS
    options = ["--port", "9001", "--header-timeout", "2.5", "--keep-alive", "3", "--max-connections", "50"]
    assert run(["serve-sim", *options, "--request-budget", "7", "--max-body-bytes", "1000"]) == 0
    given = fake_serve.pop()
    assert (given["port"], given["header_timeout_s"], given["keep_alive_s"], given["max_connections"]) == (
        9001,
        2.5,
        3.0,
        50,
    )
    assert given["request_timeout_s"] == 7.0 and given["max_body_bytes"] == 1000


def test_serve_refuses_a_public_address_without_a_token(capsys, monkeypatch):
    monkeypatch.delenv("SLCA_SIM_TOKEN", raising=False)
    assert run(["serve-sim", "--host", "0.0.0.0", "--port", "1"]) == 2
    assert "refusing to serve on non-loopback host '0.0.0.0' without a token" in capsys.readouterr().err


_SERVE = (
    "import argparse, sys; sys.path.insert(0, {src!r}); from slca_grpo.cli import simulate as commands; "
    "p = argparse.ArgumentParser(); commands.register(p.add_subparsers()); a = p.parse_args(sys.argv[1:]); "
    "sys.exit(a.func(a))"
)


def test_serve_sim_runs_a_working_service(tmp_path):
    port = free_port()
    env = {**os.environ, "SLCA_SIM_TOKEN": "from-env"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _SERVE.format(src=SRC),
            "serve-sim",
            "--port",
            str(port),
            "--cache",
            str(tmp_path / "c.sqlite"),
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "service did not start"
            time.sleep(0.1)
        assert httpx.post(f"{url}/v1/simulate", json={}, timeout=5).status_code == 401
        with SimulatorClient(SimulatorServiceConfig(url=url), token="from-env") as client:
            obs = client.simulate(ToolCall("get_weather", {"city": "Kyiv"}), [WEATHER_TOOL])
        assert obs.error is None and json.loads(obs.text)["city"] == "Kyiv"
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert "token required" in err
