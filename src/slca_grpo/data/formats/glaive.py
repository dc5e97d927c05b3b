"""Glaive function-calling v2 rows: ``system`` (tools as JSON objects after the intro) and ``chat``.

``chat`` is one string of ``USER:``, ``ASSISTANT:`` and ``FUNCTION RESPONSE:`` turns, assistant
turns ending in ``<|endoftext|>``. A call is ``<functioncall> {"name": "f", "arguments": '{"a": 1}'}``:
the arguments are a JSON object inside a single-quoted string, so the body is not JSON. It is read
as JSON when it is, else as a Python literal (:func:`ast.literal_eval`, constants only), else by
cutting the quoted arguments out and reading them as JSON; nothing is evaluated.
"""

from __future__ import annotations

import json
import re
from typing import Any

from slca_grpo.data.formats.conversation import RecordedMessage, build_task
from slca_grpo.data.formats.fields import call_arguments, literal, openai_tool, require
from slca_grpo.data.tasks import TaskFormatError
from slca_grpo.datatypes import Task, ToolCall

CALL_MARKER = "<functioncall>"
END_MARKER = "<|endoftext|>"
_SPEAKER = re.compile(r"(?:^|\n)[ \t]*(USER|ASSISTANT|FUNCTION RESPONSE):[ \t]?")
_QUOTED_ARGUMENTS = re.compile(r'^\{\s*"name"\s*:\s*"([^"]+)"\s*,\s*"arguments"\s*:\s*\'(.*)\'\s*\}$', re.DOTALL)
_ROLES = {"USER": "user", "ASSISTANT": "assistant", "FUNCTION RESPONSE": "tool"}


def detect(row: dict[str, Any]) -> bool:
    return isinstance(row.get("chat"), str) and "system" in row


def system_tools(system: str) -> tuple[str, list[dict[str, Any]]]:
    """(the intro text, the tools) of a Glaive system string."""
    text = system.strip().removeprefix("SYSTEM:").strip()
    start = text.find("{")
    if start < 0:
        return text, []
    decoder = json.JSONDecoder()
    tools, position = [], start
    while position < len(text) and text[position] == "{":
        try:
            value, position = decoder.raw_decode(text, position)
        except (ValueError, RecursionError):
            raise TaskFormatError(f"function {len(tools) + 1} is not valid JSON", field="system") from None
        tools.append(openai_tool(value, f"system.functions[{len(tools)}]"))
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
    return text[:start].strip(), tools


def parse_call(body: str, field: str) -> ToolCall:
    """One ``<functioncall>`` body (see the module docstring)."""
    body = body.strip()
    try:
        value = literal(body, field)
    except TaskFormatError:
        match = _QUOTED_ARGUMENTS.match(body)
        if match is None:
            raise TaskFormatError(f"a function call that cannot be read: {body[:80]!r}", field=field) from None
        value = {"name": match.group(1), "arguments": match.group(2)}
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise TaskFormatError("a function call must be an object with a string 'name'", field=field)
    return ToolCall(value["name"], call_arguments(value.get("arguments"), f"{field}.arguments"))


def chat_turns(chat: str) -> list[RecordedMessage]:
    parts = _SPEAKER.split(chat)
    if parts[0].strip():
        raise TaskFormatError(f"text before the first speaker: {parts[0].strip()[:60]!r}", field="chat")
    turns = []
    for number, (speaker, text) in enumerate(zip(parts[1::2], parts[2::2]), start=1):
        where = f"chat.turn[{number}]"
        text = text.replace(END_MARKER, "").strip()
        role = _ROLES[speaker]
        if role == "assistant" and CALL_MARKER in text:
            head, *bodies = text.split(CALL_MARKER)
            calls = [parse_call(body, f"{where}.functioncall") for body in bodies]
            turns.append(RecordedMessage("assistant", head.strip(), calls=calls, field=where))
        else:
            turns.append(RecordedMessage(role, text, field=where))
    return turns


def convert(row: dict[str, Any], task_id: str) -> Task:
    system = require(row, "system", str)
    intro, tools = system_tools(system)
    turns = chat_turns(require(row, "chat", str))
    if intro:
        turns.insert(0, RecordedMessage("system", intro, field="system"))
    return build_task(task_id, turns, tools, where="chat")
