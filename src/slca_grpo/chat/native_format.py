"""Rollouts and SFT through a model's own chat template (``chat_format: native``).

The template renders the prompt; the model writes a whole assistant turn in its own syntax and
ends it with its own end-of-turn token (sampled, mask 1); what the template puts between that token
and the next assistant turn (the turn's tail, the tool results, the next header) is the difference
of two renderings of the conversation, tokenised and appended with mask 0. SFT renders gold turns
the same way, so it teaches the very tokens rollouts sample.

When the formatter is built, a probe conversation checks what the rest relies on, and a template
that breaks it is refused with one line naming the problem: the tools must show in the prompt, an
assistant turn must continue the generation prompt and end with a special token, and appending
tool results must not change what was rendered before them. The probe also finds the syntax the
template writes calls in (:mod:`slca_grpo.chat.syntax`) and whether it can write parallel calls.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from slca_grpo.chat.formatter import ChatFormatter, Dialogue, TurnReading, prompt_tools
from slca_grpo.chat.messages import assistant_call_message, structured_messages
from slca_grpo.chat.parser import BlockStatus, ToolCallBlock, parse_tool_calls, strip_tool_call_blocks
from slca_grpo.chat.syntax import TOOL_PARSERS, TOOL_SYNTAXES, to_hermes
from slca_grpo.chat.template import IM_END, assistant_text, generation_prompt, render_turn, tool_results_turn
from slca_grpo.datatypes import STOP_EOS, Generation, ToolCall

_PROBE_NAME = "lookup_probe_record"
_PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": _PROBE_NAME,
        "description": "Look up a record by its key.",
        "parameters": {
            "type": "object",
            "properties": {"key": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["key"],
        },
    },
}
_PROBE_CALLS = (ToolCall(_PROBE_NAME, {"key": "alpha", "limit": 3}), ToolCall(_PROBE_NAME, {"key": "beta"}))
_PROBE_MESSAGES = (
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Find the record alpha."},
)
_PROBE_RESULT = '{"record": "alpha-7731"}'
_PLACEHOLDER = ToolCall("invalid_tool_call", {})  # stands for a malformed call when results are rendered


class ChatTemplateError(ValueError):
    """A chat template that cannot be used for token-exact rollouts, or that failed to render."""


def _require_prefix(before: str, after: str, added: str) -> None:
    """ChatTemplateError unless ``after`` (the rendering with ``added``) extends ``before``."""
    if after.startswith(before):
        return
    at = len(os.path.commonprefix([before, after]))
    raise ChatTemplateError(
        f"adding {added} changes how the template renders the turns before it "
        f"(at character {at}: {before[at : at + 30]!r} became {after[at : at + 30]!r})"
    )


def executable_block(blocks: Sequence[ToolCallBlock]) -> ToolCallBlock | None:
    """The block a turn with several blocks executes: the first one that cannot run (so the model
    sees its error), else all calls of the turn as one step of parallel calls."""
    if not blocks:
        return None
    for block in blocks:
        if not block.is_executable:
            return block
    if len(blocks) == 1:
        return blocks[0]
    calls = tuple(call for block in blocks for call in block.calls)
    unknown = [block.error for block in blocks if block.status is BlockStatus.UNKNOWN_TOOL]
    status = BlockStatus.UNKNOWN_TOOL if unknown else BlockStatus.VALID
    return ToolCallBlock(
        body="\n".join(block.body for block in blocks),
        status=status,
        calls=calls,
        error="; ".join(e for e in unknown if e) or None,
    )


class NativeFormatter(ChatFormatter):
    """Prompts, injected tool results and SFT targets rendered by ``tokenizer.apply_chat_template``."""

    chat_format = "native"
    stop_strings: tuple[str, ...] = ()

    def __init__(self, tokenizer: Any, *, tool_parser: str = "auto", max_tool_response_tokens: int = 2048):
        super().__init__(tokenizer, max_tool_response_tokens=max_tool_response_tokens)
        if tool_parser not in TOOL_PARSERS:
            raise ValueError(f"tool_parser must be one of {', '.join(TOOL_PARSERS)}, got {tool_parser!r}")
        if not getattr(tokenizer, "chat_template", None):
            raise ChatTemplateError("the tokenizer has no chat template (use chat_format: hermes)")
        self._specials = self._special_tokens()
        self._probe(tool_parser)

    # -- rendering ---------------------------------------------------------------------------

    def render(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], *, generation: bool) -> str:
        try:
            text = self.tokenizer.apply_chat_template(
                list(messages), tools=list(tools) or None, add_generation_prompt=generation, tokenize=False
            )
        except Exception as exc:  # a template raises whatever its author chose (jinja2, TypeError, ...)
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ChatTemplateError(f"the chat template failed to render: {message[:200]}") from None
        if not isinstance(text, str):
            raise ChatTemplateError("apply_chat_template(tokenize=False) did not return text")
        return text

    def prompt_ids(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> list[int]:
        return self.encode(self.render(structured_messages(messages), prompt_tools(tools), generation=True))

    def dialogue(self, task) -> Dialogue:
        messages = structured_messages(task.messages)
        tools = prompt_tools(task.tools)
        rendered = self.render(messages, tools, generation=True)
        return Dialogue(self.encode(rendered), messages, tools, rendered=rendered)

    # -- the probe ---------------------------------------------------------------------------

    def _special_tokens(self) -> list[str]:
        tokens = set(getattr(self.tokenizer, "all_special_tokens", []) or [])
        for added in (getattr(self.tokenizer, "added_tokens_decoder", None) or {}).values():
            if getattr(added, "special", False):
                tokens.add(str(added))
        return sorted((t for t in tokens if t), key=len, reverse=True)

    def _assistant_tail(self, prompt: str, messages: list[dict[str, Any]], reply: dict[str, Any]) -> tuple[str, str]:
        """The probe conversation with ``reply`` appended, and the reply's part of it (``prompt``
        is the conversation's rendering with the generation prompt)."""
        after = self.render([*messages, reply], [_PROBE_TOOL], generation=False)
        _require_prefix(prompt, after, "an assistant turn")
        return after, after[len(prompt) :]

    def _last_special(self, tail: str) -> str:
        found = [(tail.rfind(token), len(token), token) for token in self._specials if token in tail]
        if not found:
            raise ChatTemplateError(
                f"an assistant turn ends without a special token ({tail[-40:]!r}): cannot tell where a turn ends"
            )
        return max(found)[2]

    def _probe(self, tool_parser: str) -> None:
        messages = list(_PROBE_MESSAGES)
        prompt = self.render(messages, [_PROBE_TOOL], generation=True)
        if _PROBE_NAME not in prompt:
            raise ChatTemplateError("the chat template does not show the tools it is given (use chat_format: hermes)")
        single = assistant_call_message(_PROBE_CALLS[:1], turn=0)
        with_call, tail = self._assistant_tail(prompt, messages, single)
        call_end = self._last_special(tail)
        body = tail[: tail.rfind(call_end)]
        self.tool_parser = self._detect_syntax(body, _PROBE_CALLS[:1], tool_parser)
        _, answer_tail = self._assistant_tail(prompt, messages, {"role": "assistant", "content": "It is alpha-7731."})
        answer_end = self._last_special(answer_tail)
        self.max_calls_per_turn = None if self._renders_parallel_calls(prompt, messages) else 1
        ends = {call_end, answer_end}
        self.stop_token_ids = sorted(
            {self.tokenizer.convert_tokens_to_ids(token) for token in ends}
            | ({self.tokenizer.eos_token_id} if self.tokenizer.eos_token_id is not None else set())
        )
        self.end_of_turn_id = self.tokenizer.convert_tokens_to_ids(answer_end)
        self._end_texts = sorted({*ends, *(self.decode([i]) for i in self.stop_token_ids)}, key=len, reverse=True)
        if self.tokenizer.pad_token_id is None:
            self.pad_id = self.stop_token_ids[0]
        result = {"role": "tool", "tool_call_id": single["tool_calls"][0]["id"], "content": _PROBE_RESULT}
        cut = len(prompt) + tail.rfind(call_end) + len(call_end)
        with_result = self.render([*messages, single, result], [_PROBE_TOOL], generation=True)
        _require_prefix(with_call[:cut], with_result, "a tool result")
        if "alpha-7731" not in with_result[cut:]:
            raise ChatTemplateError("the chat template does not show tool results")
        answer = {"role": "assistant", "content": "It is alpha-7731."}
        after_answer = self.render([*messages, single, result, answer], [_PROBE_TOOL], generation=False)
        _require_prefix(with_result, after_answer, "an answer after a tool result")

    def _detect_syntax(self, body: str, calls: Sequence[ToolCall], tool_parser: str) -> str:
        candidates = TOOL_SYNTAXES if tool_parser == "auto" else (tool_parser,)
        for name in candidates:
            parsed = parse_tool_calls(to_hermes(body, name), [_PROBE_NAME])
            if parsed.calls == list(calls) and all(block.is_valid for block in parsed.blocks):
                return name
        which = "no tool parser" if tool_parser == "auto" else f"tool_parser {tool_parser}"
        raise ChatTemplateError(
            f"the chat template writes calls as {body.strip()[:80]!r}, which {which} reads "
            f"(tool_parser: one of {', '.join(TOOL_SYNTAXES)}, or chat_format: hermes)"
        )

    def _renders_parallel_calls(self, prompt: str, messages: list[dict[str, Any]]) -> bool:
        try:
            _, tail = self._assistant_tail(prompt, messages, assistant_call_message(_PROBE_CALLS, turn=0))
        except ChatTemplateError:  # e.g. "This model only supports single tool-calls at once!"
            return False
        body = tail[: tail.rfind(self._last_special(tail))]
        return parse_tool_calls(to_hermes(body, self.tool_parser), [_PROBE_NAME]).calls == list(_PROBE_CALLS)

    # -- turns -------------------------------------------------------------------------------

    def _turn_end(self, text: str, start: int) -> tuple[int, str]:
        """Where the first end-of-turn token at or after ``start`` lies, and which one it is."""
        found = [(text.find(end, start), end) for end in self._end_texts if text.find(end, start) >= 0]
        if not found:
            raise ChatTemplateError(f"the template ended a turn without an end-of-turn token ({text[-40:]!r})")
        return min(found, key=lambda item: (item[0], -len(item[1])))

    def read_turn(self, generation: Generation, tool_names: Sequence[str]) -> TurnReading:
        """A turn asks for tools when it ended with its end-of-turn token and holds a call."""
        ids = list(generation.token_ids)
        if generation.stop_reason == STOP_EOS and ids and ids[-1] in self.stop_token_ids:
            ids = ids[:-1]
        view = to_hermes(self.decode(ids), self.tool_parser)
        parsed = parse_tool_calls(view, tool_names)
        if generation.stop_reason != STOP_EOS or not (parsed.n_open or parsed.n_close):
            return TurnReading(view, calls_tools=False)
        block = executable_block(parsed.blocks)
        if len(parsed.blocks) > 1 and block is not None and block.calls and block.is_valid:
            # One step of parallel calls reads as one block, as HierR's parallel component expects.
            prose = strip_tool_call_blocks(view)
            view = assistant_text(prose, block.calls)
        return TurnReading(view, calls_tools=True, block=block)

    def answer_text(self, generation: Generation, tool_names: Sequence[str]) -> str:
        return self.read_turn(generation, tool_names).text

    def _shown_observations(self, observations: Sequence[str]) -> list[str]:
        shown = []
        for text in observations:
            ids = self.encode(text)
            shown.append(
                text if len(ids) <= self.max_tool_response_tokens else self.decode(self.truncate_response_ids(ids))
            )
        return shown

    def _assistant_message(self, dialogue: Dialogue, calls: Sequence[ToolCall], results: int) -> dict[str, Any]:
        shown = list(calls)[:results] + [_PLACEHOLDER] * max(0, results - len(calls))
        if self.max_calls_per_turn is not None:
            shown = shown[: self.max_calls_per_turn]
        return assistant_call_message(shown, turn=dialogue.turns)

    def turn_results(
        self, dialogue: Dialogue, calls: Sequence[ToolCall], observations: Sequence[str], *, notice: str | None = None
    ) -> tuple[list[int], str]:
        shown = self._shown_observations(observations)
        reply = self._assistant_message(dialogue, calls, len(shown))
        ids = [call["id"] for call in reply["tool_calls"]]
        results = [
            {"role": "tool", "tool_call_id": ids[min(i, len(ids) - 1)], "content": text} for i, text in enumerate(shown)
        ]
        # The request for a final answer is a user message after the results, as the template renders one.
        added = [reply, *results, *([{"role": "user", "content": notice}] if notice is not None else [])]
        with_reply, position, end = self._with_reply(dialogue, reply)
        cut = position + len(end)
        with_results = self.render([*dialogue.messages, *added], dialogue.tools, generation=True)
        _require_prefix(with_reply[:cut], with_results, "tool results")
        dialogue.messages += added
        dialogue.rendered = with_results
        dialogue.turns += 1
        view = IM_END + "\n" + tool_results_turn(shown) + (render_turn("user", notice) if notice is not None else "")
        return self.encode(with_results[cut:]), view + generation_prompt()

    def call_turns(self, step: Sequence[ToolCall]) -> list[list[ToolCall]]:
        """A template that writes one call per turn makes a parallel step as consecutive turns."""
        return [list(step)] if self.max_calls_per_turn is None else [[call] for call in step]

    def _with_reply(self, dialogue: Dialogue, reply: dict[str, Any]) -> tuple[str, int, str]:
        """The conversation rendered with ``reply`` appended, where the reply's end-of-turn token
        lies in it, and which token that is."""
        rendered = self.render([*dialogue.messages, reply], dialogue.tools, generation=False)
        _require_prefix(dialogue.rendered, rendered, "an assistant turn")
        position, end = self._turn_end(rendered, len(dialogue.rendered))
        return rendered, position, end

    def _reply_ids(self, dialogue: Dialogue, reply: dict[str, Any]) -> list[int]:
        rendered, position, end = self._with_reply(dialogue, reply)
        return self.encode(rendered[len(dialogue.rendered) : position]) + [self.tokenizer.convert_tokens_to_ids(end)]

    def call_ids(self, dialogue: Dialogue, calls: Sequence[ToolCall], text: str = "") -> list[int]:
        return self._reply_ids(dialogue, assistant_call_message(calls, turn=dialogue.turns, content=text))

    def answer_ids(self, dialogue: Dialogue, answer: str) -> list[int]:
        return self._reply_ids(dialogue, {"role": "assistant", "content": answer})


__all__ = ["TOOL_PARSERS", "ChatTemplateError", "NativeFormatter"]
