"""The examples run as shipped (with smaller budgets)."""

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_minimal_slca_runs_top_to_bottom(capsys):
    metrics = load_example("minimal_slca").main(
        ["--sft-steps", "10", "--rl-steps", "2", "--prompts", "2", "--group-size", "3"]
    )
    assert capsys.readouterr().out.count("step ") == 2
    assert all(math.isfinite(value) for value in metrics.values())
    assert -0.5 <= metrics["score"] <= 2.0 and 0.0 <= metrics["r_tool"] <= 1.0 and 0.0 <= metrics["r_sum"] <= 1.0
    assert metrics["tokens"] > 0  # the loss saw learnable tokens


def slca(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    """``slca ARGV`` in a fresh process, so the example plugins' registrations do not leak."""
    command = [sys.executable, "-c", "import sys; from slca_grpo.cli import main; sys.exit(main())", *argv]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_plugin_examples_extend_the_cli_as_documented(tmp_path):
    plugins = EXAMPLES / "plugins"
    listed = slca("--plugin", str(plugins / "calls_grpo.py"), "estimators", cwd=tmp_path)
    assert listed.returncode == 0 and "calls_grpo" in listed.stdout and "[rewards: valid_calls]" in listed.stdout

    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]))
    call = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
    echoed = slca(
        "--plugin", str(plugins / "echo_backend.py"), "simulate", "--backend", "echo", "--tools", str(tools),
        "--call", call, cwd=tmp_path,
    )  # fmt: skip
    assert echoed.returncode == 0, echoed.stderr
    assert json.loads(json.loads(echoed.stdout)["observation"]) == {
        "tool": "get_weather",
        "arguments": {"city": "Oslo"},
        "note": "",
    }

    bench = plugins / "tool_choice_benchmark.py"
    scored = slca(
        "--plugin", str(bench), "eval", "tool-choice", "--items", str(plugins / "tool_choice.jsonl"),
        "--policy", "oracle", "--out", str(tmp_path / "tc"), cwd=tmp_path,
    )  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    summary = json.loads((tmp_path / "tc" / "summary.json").read_text())
    assert summary["benchmark"] == "tool-choice" and summary["metrics"] == {"accuracy": 1.0} and summary["n"] == 6
    reported = slca("report", str(tmp_path / "tc"), "--out", str(tmp_path / "report"), cwd=tmp_path)
    assert reported.returncode == 0, reported.stderr
    assert "| tc (oracle) | 100.00 |" in (tmp_path / "report" / "report.md").read_text()

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    refused = slca(
        "--plugin", str(bench), "eval", "tool-choice", "--items", str(bad), "--policy", "oracle", cwd=tmp_path
    )
    assert refused.returncode == 2 and f"{bad}:1: not a tool-choice item" in refused.stderr
