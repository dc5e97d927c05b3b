"""``slca study --model smollm2``: its budget, its preset (demo-smollm2's SFT start, its own RL and
evaluations) and the options that name its outcomes."""

import argparse

import pytest
import yaml

from slca_grpo.cli.study import add_arguments, plan_from_args
from slca_grpo.config import ConfigError
from slca_grpo.presets import resolve_config_path
from slca_grpo.study.plan import SMOLLM2_BUDGET, STUDY_MODELS


def parse(*argv):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return plan_from_args(parser.parse_args(argv))


def preset(name):
    return yaml.safe_load(resolve_config_path(name).read_text(encoding="utf-8"))


def test_the_study_preset_trains_from_the_demos_sft_start():
    study, demo = preset("study-smollm2"), preset("demo-smollm2")
    # Everything the SFT checkpoint depends on is the demo's, so one checkpoint serves both.
    for section in ("model", "rollout", "simulator", "sft"):
        assert study[section] == demo[section], section
    assert {k: v for k, v in study["data"].items() if k != "n_test"} == {
        k: v for k, v in demo["data"].items() if k != "n_test"
    }
    assert study["data"]["n_test"] >= SMOLLM2_BUDGET.eval_tasks  # that many held-out tasks exist
    # The budget's steps are the preset's own, so `slca train study-smollm2` trains one of its runs.
    assert study["rl"]["steps"] == SMOLLM2_BUDGET.steps
    # Held out greedy and sampled; the probe set before RL and after the last step only.
    assert study["train"]["eval_samples"] > 0 and study["train"]["probe_every"] == study["rl"]["steps"]


def test_the_smollm2_study_from_the_command_line():
    plan = parse("--model", "smollm2")
    assert plan.budget == SMOLLM2_BUDGET and plan.estimators == ("grpo", "slca")
    assert plan.budget.seeds >= 8 and [level.name for level in plan.levels] == ["none"]
    assert plan.budget.primary == "success@0.7" and plan.budget.bfcl == "simple_python,multiple"
    assert plan.budget.bfcl_limit == 50
    changed = parse(
        "--model", "smollm2", "--seeds", "3", "--bfcl", "simple", "--bfcl-limit", "5", "--primary", "name_f1"
    )
    assert (changed.budget.seeds, changed.budget.bfcl, changed.budget.bfcl_limit) == (3, "simple", 5)
    assert changed.budget.primary == "name_f1" and changed.budget.preset == "study-smollm2"
    # The reader's study is unchanged: no BFCL, no primary family, its --quick budget.
    assert parse().budget == STUDY_MODELS["reader"].budget and parse().budget.bfcl == ""
    assert parse("--quick").budget == STUDY_MODELS["reader"].quick


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--model", "smollm2", "--quick"), "--quick: the smollm2 study has no quick budget"),
        (("--primary", "success"), "--primary: 'success' is not a held-out metric (one of: success@0.7"),
        (("--bfcl", "simple,nonsense"), "--bfcl: unknown BFCL category 'nonsense'"),
        (("--bfcl", " , ,"), "--bfcl: ' , ,' names no category"),
        (
            (
                "--bfcl-limit",
                "0",
            ),
            "--bfcl-limit must be >= 1, got 0",
        ),
    ],
)
def test_bad_outcome_options_are_one_line_errors_naming_the_option(argv, message):
    with pytest.raises(ConfigError) as caught:
        parse(*argv)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
