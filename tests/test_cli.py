"""The command line: one package of command modules, and a --help that imports nothing heavy."""

import os
import subprocess
import sys

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
