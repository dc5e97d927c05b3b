"""Token-level chat formatting shared by rollouts and SFT, so both see the same ids.

Prompts are rendered in the Hermes/ChatML format and tokenised once; everything injected into a
rollout (turn ends, tool responses, the next assistant header) is tokenised piece by piece and
appended with mask 0, never re-tokenised together with sampled text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slca_grpo.chat.parser import TOOL_RESPONSE_CLOSE, TOOL_RESPONSE_OPEN
from slca_grpo.chat.template import IM_END, generation_prompt, render_chat
from slca_grpo.types import Task

TOOL_CALL_STOP = "</tool_call>"
TRUNCATION_MARKER = "\n...[truncated]...\n"


def prompt_tools(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tools as the policy sees them: the OpenAI function format without the simulator-only
    ``returns`` schema (it would only lengthen every prompt)."""
    shown = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and "returns" in function:
            tool = {**tool, "function": {k: v for k, v in function.items() if k != "returns"}}
        elif isinstance(tool, dict) and "returns" in tool:
            tool = {k: v for k, v in tool.items() if k != "returns"}
        shown.append(tool)
    return shown


class ChatFormatter:
    def __init__(self, tokenizer: Any, *, max_tool_response_tokens: int = 2048):
        self.tokenizer = tokenizer
        self.max_tool_response_tokens = max_tool_response_tokens
        self.im_end_id = self._single_token(IM_END)
        self.stop_token_ids = sorted({i for i in (self.im_end_id, tokenizer.eos_token_id) if i is not None})
        # The token that ends an assistant turn (what a final answer is trained to stop with).
        self.end_of_turn_id = self.im_end_id if self.im_end_id is not None else self.stop_token_ids[0]
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.stop_token_ids[0]
        self._turn_close = self.encode(IM_END + "\n")
        self._marker_ids = self.encode(TRUNCATION_MARKER)

    def _single_token(self, text: str) -> int | None:
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return ids[0] if len(ids) == 1 else None

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def prompt_ids(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> list[int]:
        return self.encode(render_chat(messages, prompt_tools(tools), add_generation_prompt=True))

    def task_prompt_ids(self, task: Task) -> list[int]:
        return self.prompt_ids(task.messages, task.tools)

    def truncate_middle(self, ids: list[int]) -> list[int]:
        limit = self.max_tool_response_tokens
        if len(ids) <= limit:
            return ids
        keep = max(limit - len(self._marker_ids), 2)
        head = keep // 2
        return ids[:head] + self._marker_ids + ids[len(ids) - (keep - head) :]

    def tool_results(self, observations: Sequence[str], *, close_turn: bool) -> tuple[list[int], str]:
        """Ids and text injected after a tool-calling turn: optionally the turn's ``<|im_end|>``,
        a user turn of ``<tool_response>`` blocks (each truncated in the middle), and the next
        assistant header."""
        ids: list[int] = list(self._turn_close) if close_turn else []
        text = IM_END + "\n" if close_turn else ""
        header = "<|im_start|>user\n"
        ids += self.encode(header)
        text += header
        for index, observation in enumerate(observations):
            prefix = ("\n" if index else "") + TOOL_RESPONSE_OPEN + "\n"
            closing = "\n" + TOOL_RESPONSE_CLOSE
            body = self.truncate_middle(self.encode(observation))
            ids += self.encode(prefix) + body + self.encode(closing)
            text += prefix + self.decode(body) + closing
        tail = IM_END + "\n" + generation_prompt()
        ids += self.encode(tail)
        return ids, text + tail
