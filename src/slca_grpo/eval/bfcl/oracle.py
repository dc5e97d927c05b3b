"""An agent that replays BFCL's gold answers, to prove the harness (and, corrupted, its checks).

Single-turn gold answers list the allowed values of each parameter; the oracle takes the first
allowed value and omits optional parameters whose allowed list contains ``""`` (bfcl-eval's mark
for "may be omitted"). Multi-turn gold answers are Python call strings per turn; the oracle reads
them with :mod:`ast` (literals only), binds positional arguments by the backend method's
signature and emits all of a turn's calls in its first step, then ends the turn with prose.

With ``corrupt > 0`` a deterministic fraction of entries (chosen by a hash of seed and entry id,
see :meth:`BFCLOracleAgent.is_corrupted`) is answered wrongly: ``drop`` answers with prose instead
of the calls (of the first turn that has gold calls), ``alter`` changes the first argument value.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from typing import Any

from slca_grpo.chat.template import render_tool_calls
from slca_grpo.eval.agent import AgentRequest
from slca_grpo.eval.bfcl.calls import bind_positional, parse_call_string
from slca_grpo.eval.bfcl.convert import exposed_names
from slca_grpo.eval.bfcl.data import BFCLEntry, load_entries
from slca_grpo.eval.bfcl.env import load_bfcl
from slca_grpo.types import ToolCall

CORRUPT_MODES = ("drop", "alter")
_OMIT = object()
END_OF_TURN_TEXT = "Done."
NO_CALL_TEXT = "I cannot complete this request with the available functions and information."

# Java/JavaScript source spelling of element types inside collections.
_JAVA_ARRAY_ELEMENT = {
    "integer": "int",
    "String": "String",
    "boolean": "boolean",
    "double": "double",
    "float": "float",
    "long": "long",
    "char": "char",
    "byte": "byte",
    "short": "short",
}


def _pick(allowed: Any, required: bool) -> Any:
    """First allowed value; ``_OMIT`` for an optional parameter that may be left out."""
    if not isinstance(allowed, list):
        return allowed
    options = [option for option in allowed if option != ""]
    if "" in allowed and not required:
        return _OMIT
    if not options:
        # A required parameter whose only allowed value is "" passes the checker as "".
        return "" if "" in allowed else _OMIT
    return options[0]


def _resolve(option: Any) -> Any:
    """A concrete value from one allowed option (dict options map keys to allowed lists)."""
    if isinstance(option, dict):
        resolved = {}
        for key, allowed in option.items():
            value = _pick(allowed, required=False)
            if value is not _OMIT:
                resolved[key] = _resolve(value)
        return resolved
    if isinstance(option, list) and option and all(isinstance(item, dict) for item in option):
        return [_resolve(item) for item in option]
    return option


def _find_doc(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for doc in docs:
        if doc.get("name") == name:
            return doc
    return {}


def _number_text(value: int | float, bfcl_type: str, language: str) -> str:
    if language == "java" and bfcl_type == "long":
        return f"{value}L"
    if language == "java" and bfcl_type == "float":
        return f"{value}f"
    if language == "javascript" and bfcl_type == "Bigint":
        return f"{value}n"
    return str(value)


def _element_text(value: Any, items_type: str, language: str, container: str) -> str:
    """One collection element as the converters of the checker read it back."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _number_text(value, items_type, language)
    if isinstance(value, list):
        return "[" + ", ".join(_element_text(v, "", language, "array") for v in value) + "]"
    text = str(value)
    # Java arrays convert elements by their declared type (String and any keep the text as is);
    # ArrayList strips the quotes of String/char elements; untyped values need quotes.
    if language == "java" and container == "Array" and items_type in ("String", "any", "char"):
        return text
    if language == "java" and container == "ArrayList" and items_type == "any":
        return text
    if language == "java" and items_type == "char":
        return f"'{text}'"
    return json.dumps(text)


def to_source_text(value: Any, schema: dict[str, Any], language: str) -> Any:
    """A gold value as the Java/JavaScript source text the checker's converters read back.

    Strings stay as they are: string parameters take their raw text, and a string where BFCL
    expects a collection names a variable (``"userList"``).
    """
    if language == "python" or isinstance(value, str):
        return value
    bfcl_type = str(schema.get("type", "any"))
    items_type = str((schema.get("items") or {}).get("type", ""))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _number_text(value, bfcl_type, language)
    if language == "java" and isinstance(value, list):
        body = ", ".join(_element_text(v, items_type, language, bfcl_type) for v in value)
        if bfcl_type == "ArrayList":
            return f"new ArrayList<>(Arrays.asList({body}))"
        return f"new {_JAVA_ARRAY_ELEMENT.get(items_type, 'Object')}[]{{{body}}}"
    if language == "java" and isinstance(value, dict):
        puts = " ".join(f"put({json.dumps(k)}, {_element_text(v, '', language, 'HashMap')});" for k, v in value.items())
        return f"new HashMap<String, Object>() {{{{ {puts} }}}}"
    if isinstance(value, list):
        return "[" + ", ".join(_element_text(v, items_type, language, "array") for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_element_text(v, '', language, 'dict')}" for k, v in value.items()) + "}"
    return json.dumps(value)


def gold_single_turn_calls(entry: BFCLEntry) -> list[ToolCall]:
    """The gold calls of a single-turn entry, with checker-ready values and original names."""
    calls: list[ToolCall] = []
    for item in entry.ground_truth:
        name, params = next(iter(item.items()))
        doc_params = _find_doc(entry.functions, name).get("parameters") or {}
        required = set(doc_params.get("required") or [])
        properties = doc_params.get("properties") or {}
        arguments: dict[str, Any] = {}
        for param, allowed in params.items():
            choice = _pick(allowed, required=param in required)
            if choice is _OMIT:
                continue
            arguments[param] = to_source_text(_resolve(choice), properties.get(param) or {}, entry.language)
        calls.append(ToolCall(name=name, arguments=arguments))
    return calls


def gold_multi_turn_calls(entry: BFCLEntry) -> list[list[ToolCall]]:
    """The gold calls of a multi-turn entry per turn, keyword arguments only."""
    bfcl = load_bfcl()
    signatures: dict[str, list[str]] = {}
    for class_name in entry.involved_classes:
        for name, function in inspect.getmembers(bfcl.backend_class(class_name), inspect.isfunction):
            if not name.startswith("_"):
                signatures[name] = [p for p in inspect.signature(function).parameters if p != "self"]
    turns: list[list[ToolCall]] = []
    for gold_turn in entry.ground_truth:
        calls = []
        for call_string in gold_turn:
            name, positional, keywords = parse_call_string(call_string)
            arguments = bind_positional(signatures.get(name, []), positional, keywords)
            calls.append(ToolCall(name=name, arguments=arguments))
        turns.append(calls)
    return turns


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
