"""What every command shares."""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path
from typing import Any

# Set by ``slca --debug`` (or SLCA_DEBUG=1): expected errors show their traceback too.
DEBUG = False


def fail(message: str, code: int = 2) -> int:
    """Print a one-line error and return the exit status; with ``--debug``, the traceback of the
    exception being handled first."""
    if DEBUG and sys.exc_info()[0] is not None:
        traceback.print_exc()
    print(f"error: {message}", file=sys.stderr)
    return code


def add_chat_format_arguments(parser: argparse.ArgumentParser) -> None:
    """``--chat-format``, ``--chat-template``, ``--tool-parser`` (as ``model.chat_format``,
    ``model.chat_template`` and ``model.tool_parser`` of a run config), ``--max-new-tokens`` and
    ``--bf16`` for local models."""
    from slca_grpo.chat.syntax import CHAT_FORMATS, TOOL_PARSERS

    parser.add_argument(
        "--chat-format",
        choices=CHAT_FORMATS,
        default="auto",
        help="local models: render with the model's own chat template (native) or the Hermes format; "
        "auto: native when the checkpoint's template is not the built-in Hermes one",
    )
    parser.add_argument(
        "--chat-template",
        metavar="FILE",
        default=None,
        help="local models: a Jinja chat template that replaces the model's own (native format), "
        "as a run's model.chat_template does",
    )
    parser.add_argument(
        "--tool-parser",
        choices=TOOL_PARSERS,
        default="auto",
        help="local models, native format: the syntax calls are written in (auto: found from the template)",
    )

    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=512,
        help="local models: tokens generated per assistant turn at most (default 512); lower it to shrink a run",
    )
    parser.add_argument(
        "--bf16",
        nargs="?",
        const="true",
        default="auto",
        choices=("auto", "true", "false"),
        help="local models: generate under bfloat16 autocast; auto (default): where the device has it natively "
        "(CUDA, AMX / avx512_bf16), as training's bf16: auto does; --bf16 alone is true",
    )


def chat_format_options(args: argparse.Namespace) -> dict[str, Any]:
    """The local-model options of ``add_chat_format_arguments`` (ValueError on a bad one)."""
    if args.max_new_tokens < 1:
        raise ValueError(f"--max-new-tokens must be >= 1, got {args.max_new_tokens}")
    if args.chat_template and args.chat_format == "hermes":
        raise ValueError("--chat-template is a native-format setting; it cannot be used with --chat-format hermes")
    bf16 = {"auto": "auto", "true": True, "false": False}[args.bf16]
    return {
        "chat_format": args.chat_format,
        "chat_template": args.chat_template,
        "tool_parser": args.tool_parser,
        "max_new_tokens": args.max_new_tokens,
        "bf16": bf16,
    }


def default_out_dir(kind: str, policy: str) -> Path:
    """``runs/<kind>/<policy>-<time>``: a new folder for each evaluation, named so it can be found."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in policy)
    return Path("runs") / kind / f"{safe}-{time.strftime('%Y%m%d-%H%M%S')}"
