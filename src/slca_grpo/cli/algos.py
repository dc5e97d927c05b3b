"""``slca estimators``: list the registered advantage estimators."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any


def register(subparsers: Any) -> None:
    """Add the algos subcommands to the ``slca`` parser."""
    parser = subparsers.add_parser(
        "estimators",
        help="list the registered advantage estimators",
        description="List the registered advantage estimators and the rewards each one reads.",
    )
    parser.set_defaults(func=run_estimators)


def run_estimators(args: argparse.Namespace) -> int:
    """Print one line per estimator: name, description, rewards it reads, its own settings."""
    from slca_grpo.algos import (  # torch import kept off --help
        estimator_spec,
        list_estimators,
    )

    names = list_estimators()
    width = max((len(name) for name in names), default=0)
    for name in names:
        spec = estimator_spec(name)
        needs = f"  [rewards: {', '.join(spec.rewards)}]" if spec.rewards else ""
        layout = f"  [segments: {spec.layout_name}]" if spec.segmentation != "role" else ""
        own = ""
        if spec.settings is not None:
            keys = [f"rl.advantage.{name}.{field.name}" for field in dataclasses.fields(spec.settings)]
            own = f"  [settings: {', '.join(keys)}]"
        print(f"{name.ljust(width)}  {spec.description}{needs}{layout}{own}")
    return 0
