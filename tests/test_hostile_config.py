"""Hostile and careless configs: every bad value is one ConfigError line naming the key, raised
when the config is loaded (or, for names a plugin may register, when the part is built), before any
work starts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from slca_grpo.cli import main
from slca_grpo.config import ConfigError, load_yaml_config
from slca_grpo.presets import resolve_config_path
from slca_grpo.trainer.build import make_simulator
from slca_grpo.trainer.run_config import RunConfig


def load(*overrides: str) -> RunConfig:
    return load_yaml_config(RunConfig, resolve_config_path("demo-quick-tiny"), list(overrides))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("sft.bucket_batches=0", "sft.bucket_batches must be >= 1, got 0"),
        ("sft.batch_size=0", "sft.batch_size must be >= 1"),
        ("simulator_service.url=ftp://host", "simulator_service.url must be an http(s) URL"),
        ("simulator_service.timeout_s=0", "simulator_service.timeout_s must be > 0"),
        ("simulator_service.max_retries=-1", "max_retries >= 0"),
        ("model.dtype=float16", "model.dtype must be one of float32, bfloat16, got 'float16'"),
        ("data.n_train=0", "data.n_train must be >= 1, got 0"),
        ("data.tools_per_task=[3, 1]", "data.tools_per_task must be [min, max]"),
        ("rollout.group_size=0", "rollout.group_size must be >= 1, got 0"),
        ("rollout.top_p=0", "rollout.top_p must be in (0, 1]"),
        ("rl.prompts_per_step=0", "rl.prompts_per_step must be >= 1"),
        ("rl.clip=1.5", "rl.clip must be in (0, 1)"),
        ("rl.schedule=step", "rl.schedule must be one of constant, linear, cosine, got 'step'"),
        ("rl.lr=-1", "rl.lr must be >= 0"),
        ("rl.advantage.eps=-1", "rl.advantage.eps must be >= 0"),
        ("reward.rltr_checks=0", "reward.rltr_checks must be >= 1"),
        ("reward.weights.fmt=-1", "reward.weights.fmt must be >= 0"),
        ("simulator.backend=''", "simulator.backend must name a registered simulator backend"),
        ("simulator.errors.timeout_rate=2", "simulator.errors.timeout_rate must be in [0, 1]"),
        ("train.keep_last=0", "train.keep_last must be >= 1"),
        ("rl.lr=.inf", "rl.lr must be a finite number, got inf"),
        ("rl.lr=.nan", "rl.lr must be a finite number, got nan"),
        ("rl.lr=fast", "rl.lr: expected a number, got 'fast'"),
        ("rl.clip=-0.1", "rl.clip must be in (0, 1)"),
        ("rl.kl_coef=-1e-3", "rl.kl_coef must be >= 0"),
        ("rl.ppo_epochs=0", "rl.ppo_epochs must be >= 1"),
        ("rl.micro_batch_rollouts=0", "rl.micro_batch_rollouts must be >= 1"),
        ("rl.steps=-1", "rl.steps must be >= 0"),
        ("rollout.temperature=-0.5", "rollout.temperature must be >= 0"),
        # Logits over a tinier temperature overflow and the softmax is NaN (once blamed on rl.lr).
        ("rollout.temperature=1e-300", "rollout.temperature must be 0 (greedy) or at least 0.01, got 1e-300"),
        ("rollout.temperature=.nan", "rollout.temperature must be a finite number, got nan"),
        ("data.tools_per_task=[1, 100000]", "data.tools_per_task must be [min, max] with 1 <= min <= max <= 38"),
        ("train.eval_tasks=-1", "train.eval_tasks must be >= 0"),
        ("train.save_every=-1", "train.save_every must be >= 0"),
        ("train.torch_threads=-2", "train.torch_threads must be >= 0"),
        ("sft.lr=-1e-4", "sft.lr must be >= 0"),
        ("sft.schedule=exp", "sft.schedule must be one of constant, linear, cosine"),
        ("rl.estimatr=grpo", "unknown setting"),
        ("rollout.group_size=many", "rollout.group_size: expected an integer"),
    ],
)
def test_bad_values_are_one_line_errors_naming_the_key(override, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as error:
        load(override)
    assert "\n" not in str(error.value)


def test_float_spellings_people_write_are_accepted():
    config = load("rl.lr=1e-3", "sft.lr=5E-4", "rl.kl_coef=0", "rollout.temperature=1")
    assert (config.rl.lr, config.sft.lr, config.rl.kl_coef, config.rollout.temperature) == (1e-3, 5e-4, 0.0, 1.0)
    assert load("rollout.temperature=0").rollout.temperature == 0  # greedy
    assert load("rollout.temperature=0.01").rollout.temperature == 0.01


def test_a_config_name_with_a_folder_in_it_is_the_users_file_never_a_preset(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert resolve_config_path("demo-quick").name == "demo-quick.yaml"  # a bare name: the preset
    for name in ("../configs/demo-quick", "configs/demo-quick.yaml", str(tmp_path / "demo-quick")):
        with pytest.raises(FileNotFoundError, match="is not a file"):
            resolve_config_path(name)
    mine = tmp_path / "configs" / "demo-quick.yaml"
    mine.parent.mkdir()
    mine.write_text("rl: {steps: 1}\n")
    assert resolve_config_path("configs/demo-quick.yaml") == Path("configs/demo-quick.yaml")
    assert main(["train", "../configs/demo-quick"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: '../configs/demo-quick' is not a file") and len(err.splitlines()) == 1


def test_a_backend_name_is_checked_when_the_simulator_is_built():
    with pytest.raises(ConfigError, match="simulator.backend: unknown backend 'magic'; registered: schema, openai"):
        make_simulator(load("simulator.backend=magic"))


def test_bad_config_files_and_empty_data_are_one_line_cli_errors(tmp_path, capsys):
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(bytes(range(256)))
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n- 2\n")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    for argv, message in (
        (["train", str(binary)], "binary.yaml"),
        (["train", str(listed)], "the top level must be a mapping"),
        (["train", "demo-quick-tiny", "--set", "rl.lr=.inf"], "rl.lr must be a finite number"),
        (
            ["train", "demo-quick-tiny", "--set", f"data.train={empty}", "--set", f"train.out_dir={tmp_path / 'o'}"],
            "empty",
        ),
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1, (argv, err)
