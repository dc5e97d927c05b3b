"""Multi-turn BFCL categories on bfcl-eval's own backends (file system, trading, travel, ...).

Per user turn the agent is asked repeatedly; the calls of each answer are validated, turned into
call strings (:mod:`slca_grpo.data.bfcl.calls`), executed on this rollout's backend instances and
fed back as ``tool`` messages. An answer without a decodable call ends the turn, as in bfcl-eval's
own inference loop. At the end, bfcl-eval's ``multi_turn_checker`` replays the executed calls on
fresh instances and compares state and outputs with the gold calls.

bfcl-eval keeps backend instances in its module globals under ``<model>_<entry id>_<class>``;
each rollout gets a unique model name, and :meth:`MultiTurnEpisode.close` deletes its instances.
"""

from __future__ import annotations

import inspect
import re
import uuid
from typing import Any

from slca_grpo.chat import parse_tool_calls, strip_tool_call_blocks
from slca_grpo.data.bfcl.calls import UnsafeCallError, build_call_string
from slca_grpo.data.bfcl.convert import docs_to_tools, exposed_names
from slca_grpo.data.bfcl.entries import BFCLEntry
from slca_grpo.data.bfcl.package import BFCL, load_bfcl
from slca_grpo.eval.agent import AgentRequest
from slca_grpo.eval.bfcl.results import EntryResult, short_error
from slca_grpo.eval.bfcl.single_turn import request_metadata

ROLLOUT_NAME_PREFIX = "slcabfcl"
_INSTANCE_NAME_SEPARATORS = re.compile(r"[-./:]")  # what bfcl-eval replaces by "_" in instance names


def new_rollout_name() -> str:
    """A model name no other rollout uses (bfcl-eval keys its backend instances by it)."""
    return f"{ROLLOUT_NAME_PREFIX}{uuid.uuid4().hex}"


def live_instance_names(rollout_name: str | None = None) -> list[str]:
    """Backend instances bfcl-eval currently holds for one rollout (or for all of ours)."""
    prefix = _INSTANCE_NAME_SEPARATORS.sub("_", rollout_name or ROLLOUT_NAME_PREFIX)
    namespace = vars(load_bfcl().multi_turn_utils)
    return [key for key in namespace if key.startswith(prefix) and key.endswith("_instance")]


def release_instances(rollout_name: str) -> int:
    """Delete a rollout's backend instances (including the checker's replays); how many."""
    namespace = vars(load_bfcl().multi_turn_utils)
    names = live_instance_names(rollout_name)
    for key in names:
        namespace.pop(key, None)
    return len(names)


def backend_methods(bfcl: BFCL, class_names: list[str]) -> set[str]:
    """Public method names of the entry's backend classes (what the executor can dispatch)."""
    methods: set[str] = set()
    for class_name in class_names:
        cls = bfcl.backend_class(class_name)
        methods.update(name for name, _ in inspect.getmembers(cls, inspect.isfunction) if not name.startswith("_"))
    return methods


class MultiTurnEpisode:
    """One rollout of a multi-turn entry, driven one agent answer at a time."""

    def __init__(self, entry: BFCLEntry, max_steps_per_turn: int | None = None) -> None:
        if not entry.multi_turn:
            raise ValueError(f"{entry.id} is not a multi-turn entry")
        self.bfcl = load_bfcl()
        self.entry = entry
        self.max_steps_per_turn = (
            self.bfcl.max_steps_per_turn if max_steps_per_turn is None else int(max_steps_per_turn)
        )
        self.rollout_name = new_rollout_name()
        self.names = exposed_names(entry.all_prompt_functions())  # stable across turns
        self.original = {exposed: name for name, exposed in self.names.items()}
        self.methods = backend_methods(self.bfcl, entry.involved_classes)
        self.available_docs: list[dict[str, Any]] = list(entry.prompt_functions)
        self.tools = docs_to_tools(self.available_docs, self.names)
        self.messages: list[dict[str, Any]] = []
        self.decoded: list[list[list[str]]] = []  # per turn, per executed step: call strings
        self.responses: list[str] = []
        self.calls: list[list[dict[str, Any]]] = []
        self.turns: list[list[int]] = []
        self.turn = -1
        self.turn_step = 0
        self.force_quit = False
        self.done = False
        self._closed = False
        # Create the instances now so the first answer sees the entry's initial state.
        self._execute([])
        self._start_next_turn()

    # -- driving -------------------------------------------------------------------------------

    def next_request(self) -> AgentRequest | None:
        if self.done:
            return None
        return AgentRequest(
            messages=list(self.messages),
            tools=self.tools,
            key=self.entry.id,
            step=len(self.responses),
            metadata=request_metadata(self.entry, self.turn, self.turn_step),
        )

    def receive(self, text: str) -> None:
        if self.done:
            raise RuntimeError(f"episode {self.entry.id} is finished")
        text = text if isinstance(text, str) else ("" if text is None else str(text))
        self.turns[self.turn].append(len(self.responses))
        self.responses.append(text)
        parsed = parse_tool_calls(text, allowed_tools=self._available_exposed())
        requested = [call for block in parsed.blocks if block.is_executable for call in block.calls]
        if not requested:
            # Nothing decodable: the agent is done with this turn (bfcl-eval's rule).
            self.calls.append([])
            self.messages.append({"role": "assistant", "content": strip_tool_call_blocks(parsed.text)})
            self._start_next_turn()
            return
        allowed = self._allowed_methods()
        strings: list[str] = []
        outputs: list[str | None] = []
        records: list[dict[str, Any]] = []
        for call in requested:
            name = self.original.get(call.name, call.name)
            record: dict[str, Any] = {"name": name, "arguments": call.arguments}
            try:
                strings.append(build_call_string(name, call.arguments, allowed))
                outputs.append(None)
            except UnsafeCallError as exc:
                outputs.append(f"Error: invalid call: {exc}")
                record["error"] = str(exc)
            records.append(record)
        results = iter(self._execute(strings) if strings else [])
        outputs = [next(results) if output is None else output for output in outputs]
        if strings:
            self.decoded[self.turn].append(strings)
        self.calls.append(records)
        self.messages.append(
            {
                "role": "assistant",
                "content": strip_tool_call_blocks(parsed.text),
                "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in requested],
            }
        )
        for call, output in zip(requested, outputs, strict=True):
            self.messages.append({"role": "tool", "name": call.name, "content": output})
        self.turn_step += 1
        if self.turn_step > self.max_steps_per_turn:
            self.force_quit = True
            self.done = True

    def finish(self) -> EntryResult:
        """Score with bfcl-eval's ``multi_turn_checker`` and release the backend instances."""
        result = EntryResult(
            id=self.entry.id,
            category=self.entry.category,
            valid=False,
            responses=self.responses,
            calls=self.calls,
            turns=self.turns,
        )
        try:
            if len(self.decoded) != len(self.entry.ground_truth):
                result.error_type = "multi_turn:force_terminated"
                result.error = (
                    f"the agent exceeded {self.max_steps_per_turn} steps in turn {self.turn}; "
                    f"{len(self.decoded)} of {len(self.entry.ground_truth)} turns were run"
                )
                return result
            test_entry = {
                "id": self.entry.id,
                "initial_config": self.entry.initial_config,
                "involved_classes": self.entry.involved_classes,
            }
            try:
                verdict = self.bfcl.multi_turn_checker(
                    self.decoded, self.entry.ground_truth, test_entry, self.entry.category, self.rollout_name
                )
            except Exception as exc:  # e.g. its internal asserts on mismatched instances
                result.error_type = "multi_turn:checker_exception"
                result.error = short_error(f"{type(exc).__name__}: {exc}")
                return result
            result.valid = bool(verdict.get("valid"))
            if not result.valid:
                result.error_type = str(verdict.get("error_type", "multi_turn:invalid"))
                result.error = short_error(verdict.get("error_message", verdict.get("details")))
            return result
        finally:
            self.close()

    def close(self) -> None:
        """Delete this rollout's backend instances (idempotent)."""
        if not self._closed:
            release_instances(self.rollout_name)
            self._closed = True

    # -- helpers -------------------------------------------------------------------------------

    def _execute(self, call_strings: list[str]) -> list[str]:
        results, _ = self.bfcl.execute_multi_turn_func_call(
            call_strings,
            self.entry.initial_config,
            self.entry.involved_classes,
            self.rollout_name,
            self.entry.id,
            long_context=self.entry.long_context,
            is_evaL_run=False,
        )
        return [str(result) for result in results]

    def _available_exposed(self) -> set[str]:
        return {self.names[str(doc["name"])] for doc in self.available_docs}

    def _allowed_methods(self) -> set[str]:
        return {str(doc["name"]) for doc in self.available_docs} & self.methods

    def _start_next_turn(self) -> None:
        self.turn += 1
        self.turn_step = 0
        if self.turn >= len(self.entry.question):
            self.done = True
            return
        messages = [dict(message) for message in self.entry.question[self.turn]]
        held_out = self.entry.missed_functions.get(self.turn)
        if held_out:
            self.available_docs = self.available_docs + list(held_out)
            self.tools = docs_to_tools(self.available_docs, self.names)
            if not messages:  # bfcl-eval's miss_func turns carry no user text of their own
                messages = [{"role": "user", "content": self.bfcl.additional_function_prompt}]
        self.messages.extend(messages)
        self.decoded.append([])
        self.turns.append([])
