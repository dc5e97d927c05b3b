"""An agent that replays BFCL's gold answers, to prove the harness (and, corrupted, its checks).

The gold calls come from :mod:`slca_grpo.data.bfcl.gold`. A single-turn entry is answered with its
calls; a multi-turn entry gets all of a turn's calls in the turn's first step, then prose that ends
the turn.

With ``corrupt > 0`` a deterministic fraction of entries (chosen by a hash of seed and entry id,
see :meth:`BFCLOracleAgent.is_corrupted`) is answered wrongly: ``drop`` answers with prose instead
of the calls (of the first turn that has gold calls), ``alter`` changes the first argument value.
"""

from __future__ import annotations

import hashlib
from typing import Any

from slca_grpo.chat.template import render_tool_calls
from slca_grpo.data.bfcl.convert import exposed_names
from slca_grpo.data.bfcl.entries import BFCLEntry, load_entries
from slca_grpo.data.bfcl.gold import gold_multi_turn_calls, gold_single_turn_calls
from slca_grpo.datatypes import ToolCall
from slca_grpo.eval.agent import AgentRequest

CORRUPT_MODES = ("drop", "alter")
END_OF_TURN_TEXT = "Done."
NO_CALL_TEXT = "I cannot complete this request with the available functions and information."


def _altered(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + " altered"
    if isinstance(value, list):
        return value + value[:1] if value else ["altered"]
    if isinstance(value, dict):
        return {**value, "altered": "altered"}
    return "altered"


def _alter_first_argument(calls: list[ToolCall]) -> list[ToolCall] | None:
    """The calls with one argument of the first call changed (its first string argument, else
    its first argument); ``None`` when the first call has no arguments."""
    if not calls or not calls[0].arguments:
        return None
    first = calls[0]
    strings = [key for key, value in first.arguments.items() if isinstance(value, str)]
    key = strings[0] if strings else next(iter(first.arguments))
    changed = ToolCall(first.name, {**first.arguments, key: _altered(first.arguments[key])})
    return [changed] + list(calls[1:])


class BFCLOracleAgent:
    """Answers BFCL requests from the gold data (``AgentRequest.key`` is the entry id)."""

    def __init__(self, corrupt: float = 0.0, corrupt_mode: str = "drop", seed: int = 0) -> None:
        if not 0.0 <= corrupt <= 1.0:
            raise ValueError(f"corrupt must be a fraction in [0, 1], got {corrupt}")
        if corrupt_mode not in CORRUPT_MODES:
            raise ValueError(f"corrupt_mode must be one of {CORRUPT_MODES}, got {corrupt_mode!r}")
        self.corrupt = corrupt
        self.corrupt_mode = corrupt_mode
        self.seed = seed
        self.name = "bfcl-oracle" if corrupt == 0 else f"bfcl-oracle-{corrupt_mode}-{corrupt:g}"
        self._entries: dict[str, BFCLEntry] = {}
        self._multi_turn_gold: dict[str, list[list[ToolCall]]] = {}

    def is_corrupted(self, entry_id: str) -> bool:
        """Whether this oracle answers ``entry_id`` wrongly (a stable hash, not a random draw)."""
        if self.corrupt <= 0:
            return False
        digest = hashlib.sha256(f"{self.seed}:{entry_id}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < self.corrupt

    def respond(self, requests: list[AgentRequest]) -> list[str]:
        return [self._answer(request) for request in requests]

    def _entry(self, request: AgentRequest) -> BFCLEntry:
        if request.key not in self._entries:
            category = request.metadata.get("category") or request.key.rsplit("_", 1)[0]
            for entry in load_entries(category):
                self._entries[entry.id] = entry
        if request.key not in self._entries:
            raise KeyError(f"no BFCL entry {request.key!r} in category {request.metadata.get('category')!r}")
        return self._entries[request.key]

    def _answer(self, request: AgentRequest) -> str:
        entry = self._entry(request)
        corrupted = self.is_corrupted(entry.id)
        if not entry.multi_turn:
            calls = gold_single_turn_calls(entry)
            if corrupted:
                calls = _alter_first_argument(calls) if self.corrupt_mode == "alter" else None
            return self._render(calls, exposed_names(entry.prompt_functions))
        turn = int(request.metadata.get("turn", 0))
        if int(request.metadata.get("turn_step", 0)) > 0:
            return END_OF_TURN_TEXT
        if entry.id not in self._multi_turn_gold:
            self._multi_turn_gold[entry.id] = gold_multi_turn_calls(entry)
        gold = self._multi_turn_gold[entry.id]
        calls: list[ToolCall] | None = gold[turn] if turn < len(gold) else []
        if corrupted and turn == next((i for i, g in enumerate(gold) if g), -1):
            calls = _alter_first_argument(calls or []) if self.corrupt_mode == "alter" else None
        return self._render(calls, exposed_names(entry.all_prompt_functions()))

    @staticmethod
    def _render(calls: list[ToolCall] | None, names: dict[str, str]) -> str:
        if not calls:
            return NO_CALL_TEXT
        return render_tool_calls(ToolCall(names.get(c.name, c.name), c.arguments) for c in calls)
