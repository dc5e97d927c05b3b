"""Single-turn BFCL categories: one agent answer per entry, scored by bfcl-eval's AST checker."""

from __future__ import annotations

from typing import Any

from slca_grpo.chat import parse_tool_calls
from slca_grpo.data.bfcl.convert import calls_to_checker_format, docs_to_tools, exposed_names
from slca_grpo.data.bfcl.entries import BFCLEntry
from slca_grpo.data.bfcl.package import CHECKER_MODEL_NAME, load_bfcl
from slca_grpo.eval.agent import AgentRequest
from slca_grpo.eval.bfcl.results import EntryResult, short_error


def request_metadata(entry: BFCLEntry, turn: int, turn_step: int) -> dict[str, Any]:
    """What an agent may know about a pending request besides its messages."""
    return {"benchmark": "bfcl", "category": entry.category, "turn": turn, "turn_step": turn_step}


class SingleTurnEpisode:
    """One request (the entry's question with its tools), one answer, one checker verdict."""

    def __init__(self, entry: BFCLEntry) -> None:
        if entry.multi_turn:
            raise ValueError(f"{entry.id} is a multi-turn entry")
        self.entry = entry
        self.names = exposed_names(entry.prompt_functions)  # original -> exposed
        self.tools = docs_to_tools(entry.prompt_functions, self.names)
        self._text: str | None = None

    def next_request(self) -> AgentRequest | None:
        if self._text is not None:
            return None
        messages = [dict(message) for turn in self.entry.question for message in turn]
        return AgentRequest(
            messages=messages,
            tools=self.tools,
            key=self.entry.id,
            step=0,
            metadata=request_metadata(self.entry, 0, 0),
        )

    def receive(self, text: str) -> None:
        self._text = text if isinstance(text, str) else ("" if text is None else str(text))

    def finish(self) -> EntryResult:
        return score_single_turn(self.entry, self._text or "", self.names)

    def close(self) -> None:
        """Nothing to release (kept for symmetry with multi-turn episodes)."""


def score_single_turn(entry: BFCLEntry, text: str, names: dict[str, str] | None = None) -> EntryResult:
    """Parse an answer and score it with bfcl-eval's ``ast_checker``.

    A response with a malformed or unknown-tool ``<tool_call>`` block, or with no call at all,
    is invalid before the checker runs (bfcl-eval's decoders fail on such output too).
    """
    bfcl = load_bfcl()
    names = names if names is not None else exposed_names(entry.prompt_functions)
    original = {exposed: name for name, exposed in names.items()}
    parsed = parse_tool_calls(text, allowed_tools=set(original))
    calls = parsed.calls
    recorded = [{"name": original.get(c.name, c.name), "arguments": c.arguments} for c in calls]
    result = EntryResult(id=entry.id, category=entry.category, valid=False, responses=[text], calls=[recorded])
    bad_blocks = [block for block in parsed.blocks if not block.is_valid]
    if bad_blocks:
        result.error_type = f"ast_decoder:{bad_blocks[0].status.value}"
        result.error = short_error(bad_blocks[0].error)
        return result
    if not calls:
        result.error_type = "ast_decoder:no_function_call"
        result.error = "the response holds no tool call"
        return result
    model_output = calls_to_checker_format(calls, original, entry.language)
    try:
        verdict = bfcl.ast_checker(
            entry.functions,
            model_output,
            entry.ground_truth,
            bfcl.language(entry.language),
            entry.category,
            CHECKER_MODEL_NAME,
        )
    except Exception as exc:  # the checker assumes well-typed input; report, don't crash the run
        result.error_type = "ast_checker:exception"
        result.error = short_error(f"{type(exc).__name__}: {exc}")
        return result
    result.valid = bool(verdict.get("valid"))
    if not result.valid:
        result.error_type = str(verdict.get("error_type", "ast_checker:invalid"))
        result.error = short_error(verdict.get("error"))
    return result
