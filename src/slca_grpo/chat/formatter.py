"""Token-level chat formatting shared by rollouts and SFT, so both see the same ids.

Two formats implement one interface. :class:`ChatFormatter` is the built-in Hermes/ChatML format
(our tiny models, SmolLM2, any model set to ``chat_format: hermes``): a turn that calls tools
stops at ``</tool_call>`` and the turn end is injected. :class:`~slca_grpo.chat.native_format.NativeFormatter`
renders through the model's own chat template. In both, prompts are tokenised once; everything
injected into a rollout (turn ends, tool responses, the next assistant header) is tokenised piece
by piece and appended with mask 0, never re-tokenised together with sampled text.

A turn is also read into the Hermes view (``<tool_call>`` blocks), the text that rewards, metrics
and the benchmark harnesses parse, whatever syntax the model writes its calls in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slca_grpo.chat.parser import TOOL_RESPONSE_CLOSE, TOOL_RESPONSE_OPEN, ToolCallBlock, parse_tool_calls
from slca_grpo.chat.template import IM_END, assistant_text, generation_prompt, render_chat, render_turn
from slca_grpo.datatypes import STOP_STRING, Generation, Task, ToolCall

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


@dataclass
class Dialogue:
    """One conversation as it grows: the chat messages so far (for formats that render them with
    a template) and the prompt ids it started from."""

    prompt_ids: list[int]
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    rendered: str = ""  # the template's text of ``messages`` with the generation prompt
    turns: int = 0  # assistant turns so far

    def fork(self) -> Dialogue:
        """A copy that grows on its own (one per rollout of a shared prompt)."""
        return Dialogue(list(self.prompt_ids), list(self.messages), self.tools, self.rendered, self.turns)


@dataclass(frozen=True)
class TurnReading:
    """One sampled assistant turn, read: its Hermes view, whether it asks for tool results, and the
    block to execute (``None`` when it asks but closed no block)."""

    text: str
    calls_tools: bool
    block: ToolCallBlock | None = None


class ChatFormatter:
    """The Hermes/ChatML format, rendered by :func:`slca_grpo.chat.render_chat`."""

    chat_format = "hermes"
    stop_strings: tuple[str, ...] = (TOOL_CALL_STOP,)
    max_calls_per_turn: int | None = None  # None: as many as the rollout allows

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

    def dialogue(self, task: Task) -> Dialogue:
        """A conversation starting at ``task``'s prompt (the Hermes format needs only its ids)."""
        return Dialogue(self.task_prompt_ids(task))

    def read_turn(self, generation: Generation, tool_names: Sequence[str]) -> TurnReading:
        """A turn asks for tools when it stopped at ``</tool_call>``; it executes its last block."""
        text = self.decode(generation.token_ids)
        if generation.stop_reason != STOP_STRING:
            return TurnReading(text, calls_tools=False)
        parsed = parse_tool_calls(text, tool_names)
        return TurnReading(text, calls_tools=True, block=parsed.blocks[-1] if parsed.blocks else None)

    def answer_text(self, generation: Generation, tool_names: Sequence[str]) -> str:
        """A text-level agent's answer: the turn's Hermes view without its end-of-turn token."""
        ids = generation.token_ids
        if ids and ids[-1] in self.stop_token_ids:
            ids = ids[:-1]
        return self.decode(ids)

    def turn_results(
        self, dialogue: Dialogue, calls: Sequence[ToolCall], observations: Sequence[str], *, notice: str | None = None
    ) -> tuple[list[int], str]:
        """Ids and Hermes text injected after a turn that called tools (see :meth:`tool_results`);
        ``notice``, when given, follows the results as a user turn of its own (the agent loop's
        request for a final answer without tools)."""
        dialogue.turns += 1
        return self.tool_results(observations, close_turn=True, notice=notice)

    def call_turns(self, step: Sequence[ToolCall]) -> list[list[ToolCall]]:
        """The assistant turns that make one gold step of parallel calls (one turn here)."""
        return [list(step)]

    def call_ids(self, dialogue: Dialogue, calls: Sequence[ToolCall], text: str = "") -> list[int]:
        """SFT: the learnable ids of a turn making ``calls`` (after ``text`` said with them, joined
        as ``render_chat`` joins them), up to the ``</tool_call>`` stop."""
        return self.encode(assistant_text(text, calls))

    def answer_ids(self, dialogue: Dialogue, answer: str) -> list[int]:
        """SFT: the learnable ids of a final answer, with the end-of-turn token."""
        return self.encode(answer) + [self.end_of_turn_id]

    def truncate_response_ids(self, ids: list[int]) -> list[int]:
        """A tool response's ids within ``max_tool_response_tokens``: head and tail, a marker between."""
        limit = self.max_tool_response_tokens
        if len(ids) <= limit:
            return ids
        keep = max(limit - len(self._marker_ids), 2)
        head = keep // 2
        return ids[:head] + self._marker_ids + ids[len(ids) - (keep - head) :]

    def tool_results(
        self, observations: Sequence[str], *, close_turn: bool, notice: str | None = None
    ) -> tuple[list[int], str]:
        """Ids and text injected after a tool-calling turn: optionally the turn's ``<|im_end|>``,
        a user turn of ``<tool_response>`` blocks (each truncated in the middle), optionally a user
        turn saying ``notice``, and the next assistant header."""
        ids: list[int] = list(self._turn_close) if close_turn else []
        text = IM_END + "\n" if close_turn else ""
        header = "<|im_start|>user\n"
        ids += self.encode(header)
        text += header
        for index, observation in enumerate(observations):
            prefix = ("\n" if index else "") + TOOL_RESPONSE_OPEN + "\n"
            closing = "\n" + TOOL_RESPONSE_CLOSE
            body = self.truncate_response_ids(self.encode(observation))
            ids += self.encode(prefix) + body + self.encode(closing)
            text += prefix + self.decode(body) + closing
        tail = IM_END + "\n" + (render_turn("user", notice) if notice is not None else "") + generation_prompt()
        ids += self.encode(tail)
        return ids, text + tail
