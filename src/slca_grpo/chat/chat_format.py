"""Which chat format a local model's turns are rendered and read in: the built-in Hermes format or
the model's own chat template (docs/models.md, "Chat formats").

One resolver for every place that renders a model's turns: training (``model.chat_format``,
``model.chat_template``, ``model.tool_parser``), the evaluation agents (``--chat-format``,
``--chat-template``, ``--tool-parser``) and verl's agent loop, which checks that the model writes
its calls in the syntax it reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slca_grpo.chat.formatter import ChatFormatter
from slca_grpo.chat.jinja import hermes_chat_template
from slca_grpo.chat.native_format import NativeFormatter
from slca_grpo.chat.syntax import CHAT_FORMATS
from slca_grpo.config import ConfigError


def read_chat_template(path: str, *, setting: str = "model.chat_template") -> str:
    """The Jinja source of a chat template file; ConfigError naming ``setting`` when it cannot be
    read or is empty."""
    try:
        template = Path(path).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{setting}: cannot read {path}: {exc}") from None
    if not template.strip():  # an empty template would silently mean "no template": the Hermes format
        raise ConfigError(f"{setting}: {path} is empty")
    return template


def install_chat_template(tokenizer: Any, *, chat_format: str = "auto", chat_template: str | None = None) -> None:
    """Give ``tokenizer`` the template its turns are rendered with, so a checkpoint saved with it
    carries the format it was trained in: ``chat_template`` (Jinja source) replaces its own, under
    ``chat_format`` ``hermes`` it gets the built-in Hermes template, otherwise it keeps its own."""
    if chat_template is not None:
        if chat_format == "hermes":
            raise ValueError("chat_template is a native-format setting; it cannot be used with chat_format: hermes")
        tokenizer.chat_template = chat_template
    elif chat_format == "hermes":
        tokenizer.chat_template = hermes_chat_template()


def resolve_chat_format(tokenizer: Any, chat_format: str = "auto") -> str:
    """``hermes`` or ``native``: ``chat_format`` itself, or for ``auto`` ``native`` when the
    tokenizer has a template other than the built-in Hermes one."""
    if chat_format not in CHAT_FORMATS:
        raise ValueError(f"chat_format must be one of {', '.join(CHAT_FORMATS)}, got {chat_format!r}")
    if chat_format != "auto":
        return chat_format
    template = getattr(tokenizer, "chat_template", None)
    return "native" if template and template != hermes_chat_template() else "hermes"


def build_formatter(
    tokenizer: Any, *, chat_format: str = "auto", tool_parser: str = "auto", max_tool_response_tokens: int = 2048
) -> ChatFormatter:
    """The formatter for ``tokenizer`` in the format :func:`resolve_chat_format` picks; a model's
    own template that cannot be used raises ``ChatTemplateError``."""
    if resolve_chat_format(tokenizer, chat_format) == "hermes":
        return ChatFormatter(tokenizer, max_tool_response_tokens=max_tool_response_tokens)
    return NativeFormatter(tokenizer, tool_parser=tool_parser, max_tool_response_tokens=max_tool_response_tokens)
