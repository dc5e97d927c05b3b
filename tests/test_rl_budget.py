"""benchmarks/rl_budget.py: each model's candidates become small studies, and the report row says
the gains, the minutes and the chosen gain per hour."""

import importlib.util
import sys
from pathlib import Path

import pytest

from slca_grpo.config import load_yaml_config
from slca_grpo.presets import resolve_config_path
from slca_grpo.study.runner import base_config
from slca_grpo.trainer.run_config import RunConfig

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "rl_budget.py"
_spec = importlib.util.spec_from_file_location("benchmarks_rl_budget", _PATH)
rl_budget = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = rl_budget  # dataclasses look their module up while the class is made
_spec.loader.exec_module(rl_budget)


@pytest.mark.parametrize("model", sorted(rl_budget.MODELS))
def test_every_candidate_is_a_valid_run_of_its_models_preset(model):
    spec = rl_budget.MODELS[model]
    for name, (steps, _) in spec.candidates.items():
        plan = rl_budget.candidate_plan(spec, name, 2, ("grpo",), ("train.torch_threads=2",))
        config = base_config(plan)  # the preset, the budget, then the overrides: refused if any is bad
        assert config.rl.steps == steps and config.train.eval_tasks == spec.eval_tasks
        assert config.data.n_test == spec.eval_tasks and config.train.torch_threads == 2


def test_smollm2_candidates_change_what_they_name_and_sample_the_probe():
    spec = rl_budget.MODELS["smollm2"]
    preset = load_yaml_config(RunConfig, resolve_config_path(spec.preset))
    today = base_config(rl_budget.candidate_plan(spec, "today", 1, ("grpo",), ()))
    lora = base_config(rl_budget.candidate_plan(spec, "lora-r16-lr-1e-4", 1, ("grpo",), ()))
    g8 = base_config(rl_budget.candidate_plan(spec, "g8-lr-1e-5", 1, ("grpo",), ()))
    assert (today.rl.lr, today.rollout.group_size, today.model.lora.r) == (preset.rl.lr, preset.rollout.group_size, 0)
    assert (lora.model.lora.r, lora.rl.lr) == (16, 1e-4) and g8.rollout.group_size == 8
    assert today.train.probe_samples == 2 and today.rollout.answer_at_limit  # the preset's own rollouts
    assert spec.gain_metrics[0] == "r_tool"  # chosen by the greedy policy the evaluations score


def _gain(mean):
    return {"mean": mean, "low": mean - 0.1, "high": mean + 0.1, "p": 0.5}


def test_a_report_row_gives_the_chosen_gain_per_hour():
    spec = rl_budget.MODELS["smollm2"]
    metrics = spec.gain_metrics
    cell = {
        "probe_delta": {m: _gain(0.06 if m == "r_tool" else 0.01) for m in metrics},
        "probe": {m: {"mean": [0.5]} for m in metrics},
        "train_truncated": {"mean": 0.1},
    }
    report = {
        "settings": {"steps": 10, "seeds": 2},
        "seconds": {"run_mean": 1800.0},
        "cells": {"none": {"grpo": cell, "slca": {**cell, "probe_delta": {m: _gain(0.02) for m in metrics}}}},
    }
    row = rl_budget.summarise(spec, "g8-lr-1e-5", report, ("grpo", "slca"))
    assert (row["rollouts_per_step"], row["updates_per_step"], row["minutes_per_run"]) == (32, 1, 30.0)
    assert row["gain_per_hour"] == pytest.approx((0.06 + 0.02) / 2 / 0.5)  # the greedy R_tool gain, per hour
    table = rl_budget.markdown([row], spec, ("grpo", "slca"), "F")
    assert "| g8-lr-1e-5 | 10 | 32 | 1 | 2 | 0.500 / 0.500 / 0.500 / 0.500 |" in table
    assert "| 30.0 | +0.080 | 10.0 / 10.0 |" in table
    header, rule = table.splitlines()[4:6]
    assert header.count("|") == rule.count("|")  # one column rule per header
