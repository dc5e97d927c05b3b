"""The command line: one package of command modules, and a --help that imports nothing heavy."""

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
