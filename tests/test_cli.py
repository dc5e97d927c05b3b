"""The command line: one package of command modules, and a --help that imports nothing heavy."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from slca_grpo.cli import COMMAND_MODULES, build_parser


def test_every_command_module_lives_in_the_cli_package():
    assert all(name.startswith("slca_grpo.cli.") for name in COMMAND_MODULES)
    commands = build_parser()._subparsers._group_actions[0].choices  # noqa: SLF001
    assert {"train", "demo", "report", "study", "eval", "serve-sim", "simulate", "score", "estimators"} <= set(commands)


def test_building_the_parser_imports_no_heavy_library():
    code = (
        "import sys; from slca_grpo.cli import build_parser; build_parser(); "
        "print(','.join(m for m in ('torch', 'transformers', 'tau2', 'litellm', 'httpx', 'fastapi', 'jsonschema') "
        "if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == ""


def test_the_tau2_domains_of_the_cli_are_the_harness_domains():
    from slca_grpo.cli.tau2 import TAU2_DOMAINS
    from slca_grpo.eval.tau2 import DOMAINS

    assert TAU2_DOMAINS == DOMAINS


FIXTURE = "tests/fixtures/datasets/xlam.json"


def test_a_reader_that_goes_away_ends_the_command_quietly():
    read_end, write_end = os.pipe()
    os.close(read_end)  # like `| head` that has already exited: every write is EPIPE
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"}
    for extra in ({}, {"PYTHONUNBUFFERED": "1"}):  # the error comes at a write or at the final flush
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from slca_grpo.cli import main; sys.exit(main())",
                "data",
                "inspect",
                FIXTURE,
            ],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env={**environment, **extra},
            timeout=120,
        )
        assert result.returncode == 141 and result.stderr == "", result.stderr
    os.close(write_end)


def test_an_expected_error_is_one_line_and_debug_shows_its_traceback(tmp_path):
    def run(*argv, **env):
        code = "import sys; from slca_grpo.cli import main; sys.exit(main())"
        return subprocess.run(
            [sys.executable, "-c", code, *argv],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
            timeout=120,
        )

    missing = str(tmp_path / "nothing.json")
    quiet = run("data", "inspect", missing)
    assert quiet.returncode == 2 and quiet.stderr.count("\n") == 1 and "nothing.json" in quiet.stderr
    for loud in (run("--debug", "data", "inspect", missing), run("data", "inspect", missing, SLCA_DEBUG="1")):
        assert loud.returncode == 2 and "Traceback (most recent call last)" in loud.stderr
        assert loud.stderr.strip().splitlines()[-1] == quiet.stderr.strip()


def test_presets_are_listed_with_a_summary_and_print_as_loadable_yaml(capsys, tmp_path):
    from slca_grpo.cli import main
    from slca_grpo.config import load_yaml_config
    from slca_grpo.presets import list_presets
    from slca_grpo.trainer.run import RunConfig

    assert main(["presets"]) == 0
    listed = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[: len(list_presets())]}
    assert set(listed) == set(list_presets()) and all(len(line.split()) > 2 for line in listed.values())
    assert main(["presets", "demo-quick"]) == 0
    copy = tmp_path / "mine.yaml"
    copy.write_text(capsys.readouterr().out)
    assert load_yaml_config(RunConfig, copy).model.name == "reader"
    assert main(["presets", "no-such-preset"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "no preset 'no-such-preset' (presets: demo," in error


def test_a_folder_named_like_a_preset_does_not_hide_the_preset(tmp_path, monkeypatch):
    # `slca demo --model smollm2 --out demo-smollm2` makes such a folder, then reads the preset.
    from slca_grpo.presets import PRESET_DIR, resolve_config_path

    monkeypatch.chdir(tmp_path)
    (tmp_path / "demo-quick-tiny").mkdir()
    assert resolve_config_path("demo-quick-tiny") == PRESET_DIR / "demo-quick-tiny.yaml"
    (tmp_path / "mine").mkdir()
    with pytest.raises(FileNotFoundError, match="'mine' is a folder, not a config file, and no preset has that name"):
        resolve_config_path("mine")
    with pytest.raises(FileNotFoundError, match="'absent' is no config file and no preset has that name"):
        resolve_config_path("absent")
    (tmp_path / "demo-quick").write_text("model: {name: tiny}\n")
    assert resolve_config_path("demo-quick") == Path("demo-quick")  # a file of that name is the user's config


def test_every_evaluation_caps_generated_tokens_per_turn(tmp_path, capsys, monkeypatch):
    from slca_grpo.cli import main
    from slca_grpo.eval import policies

    made = []
    monkeypatch.setattr(policies, "resolve_model_agent", lambda spec, **options: made.append(options) or 1 / 0)
    out = str(tmp_path)
    for argv in (
        ["eval", "indomain", "--policy", "reader", "--tasks", "synthetic", "--limit", "1", "--out", out],
        [
            "eval",
            "tau2",
            "--policy",
            "reader",
            "--domain",
            "airline",
            "--user",
            "scripted",
            "--limit",
            "1",
            "--out",
            out,
        ],
    ):
        with pytest.raises(ZeroDivisionError):  # stops right after the agent is asked for
            main([*argv, "--max-new-tokens", "24"])
        assert made.pop()["max_new_tokens"] == 24
        assert main([*argv, "--max-new-tokens", "0"]) == 2
        assert "--max-new-tokens must be >= 1" in capsys.readouterr().err


def test_a_missing_dataset_names_its_key_and_what_to_give(tmp_path, capsys, monkeypatch):
    from slca_grpo.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["verl", "data", "qwen2.5-7b", "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("error: data.train: data/slca_train.jsonl does not exist.")
    assert "--set data.train=PATH" in error and not (tmp_path / "out").exists()
