"""The examples run as shipped (with smaller budgets)."""

import importlib.util
import math
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_minimal_slca_runs_top_to_bottom(capsys):
    metrics = load_example("minimal_slca").main(
        ["--sft-steps", "30", "--rl-steps", "2", "--prompts", "2", "--group-size", "3"]
    )
    assert capsys.readouterr().out.count("step ") == 2
    assert all(math.isfinite(value) for value in metrics.values())
    assert -0.5 <= metrics["score"] <= 2.0 and 0.0 <= metrics["r_tool"] <= 1.0 and 0.0 <= metrics["r_sum"] <= 1.0
    assert metrics["tokens"] > 0  # the loss saw learnable tokens
