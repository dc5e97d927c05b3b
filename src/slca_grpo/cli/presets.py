"""CLI: ``slca presets`` — the shipped configurations, and one of them in full."""

from __future__ import annotations

import argparse
from typing import Any

from slca_grpo.cli.common import fail


def register(subparsers: Any) -> None:
    presets = subparsers.add_parser(
        "presets",
        help="list the shipped config presets (slca presets NAME prints one)",
        description="The YAML presets any command that takes a config accepts by name "
        "(slca train NAME, slca study --preset NAME, slca verl data NAME).",
    )
    presets.add_argument("name", nargs="?", help="print this preset's YAML (copy it to start your own config)")
    presets.set_defaults(func=run_presets)


def preset_summary(text: str) -> str:
    """The first sentence of a preset's header comment, on one line."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    summary = " ".join(part for part in lines if part)
    end = summary.find(". ")
    summary = summary if end < 0 else summary[: end + 1]
    return summary if len(summary) <= 160 else summary[:159].rstrip() + "…"


def run_presets(args: argparse.Namespace) -> int:
    from slca_grpo.presets import PRESET_DIR, list_presets

    names = list_presets()
    if args.name is not None:
        name = args.name.removesuffix(".yaml")
        if name not in names:
            return fail(f"no preset {args.name!r} (presets: {', '.join(names)})")
        print((PRESET_DIR / f"{name}.yaml").read_text(encoding="utf-8"), end="")
        return 0
    width = max(len(name) for name in names)
    for name in names:
        summary = preset_summary((PRESET_DIR / f"{name}.yaml").read_text(encoding="utf-8"))
        print(f"{name:<{width}}  {summary}")
    print("\nslca presets NAME prints one; slca train NAME runs it; --set KEY=VALUE overrides any setting.")
    return 0
