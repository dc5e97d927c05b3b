"""Chat formats: rendering tools, calls and tool results into a model's turns, and parsing tool
calls out of its text (malformed output is a value, never an exception).

Its doors are the names below (the Hermes/Qwen2.5 format); beside them ``formatter.ChatFormatter``
(token-level formatting shared by rollouts and SFT), ``chat_format`` and ``native_format`` (a
model's own template), ``syntax`` (other tool-call syntaxes read into the Hermes view).
"""

from slca_grpo.chat.jinja import hermes_chat_template
from slca_grpo.chat.parser import (
    BlockStatus,
    ParsedResponse,
    ToolCallBlock,
    clean_answer,
    is_call_turn,
    last_turn_text,
    parse_block,
    parse_tool_calls,
    strip_think,
    strip_tool_call_blocks,
)
from slca_grpo.chat.template import (
    render_chat,
    render_tool_calls,
    render_tool_response,
    render_tools_system_prompt,
    tool_results_turn,
)

__all__ = [
    "BlockStatus",
    "ParsedResponse",
    "ToolCallBlock",
    "clean_answer",
    "hermes_chat_template",
    "is_call_turn",
    "last_turn_text",
    "parse_block",
    "parse_tool_calls",
    "strip_think",
    "strip_tool_call_blocks",
    "render_chat",
    "render_tool_calls",
    "render_tool_response",
    "render_tools_system_prompt",
    "tool_results_turn",
]
