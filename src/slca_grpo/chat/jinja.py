"""A Jinja chat template that renders exactly what :func:`slca_grpo.chat.render_chat` renders.

It is built from the constants of ``slca_grpo.chat.template`` so the two cannot drift apart in the
fixed text; tests compare them on many conversations. One difference is unavoidable: Jinja cannot
parse JSON, so ``arguments`` given as a JSON *string* are inserted as they are, where
``render_chat`` re-serialises them (equal whenever the string is ``json.dumps`` output).
"""

from __future__ import annotations

import json

from slca_grpo.chat.parser import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, TOOL_RESPONSE_CLOSE, TOOL_RESPONSE_OPEN
from slca_grpo.chat.template import DEFAULT_SYSTEM, IM_END, IM_START, RESERVED_TAGS, TOOLS_POSTAMBLE, TOOLS_PREAMBLE


def _lit(text: str) -> str:
    """A Jinja string literal (JSON escapes are valid Jinja escapes for ASCII text)."""
    return json.dumps(text)


def hermes_chat_template() -> str:
    """The Hermes/Qwen2.5 tool-calling ChatML template as Jinja source."""
    turn_end = _lit(IM_END + "\n")
    return "".join(
        [
            # System turn: the first message if it is a system one (empty -> default), plus tools.
            "{%- if messages and messages[0]['role'] == 'system' and messages[0].get('content') -%}",
            "{%- set system_text = messages[0]['content'] -%}",
            "{%- else -%}",
            "{%- set system_text = " + _lit(DEFAULT_SYSTEM) + " -%}",
            "{%- endif -%}",
            "{{- " + _lit(IM_START + "system\n") + " ~ system_text -}}",
            "{%- if tools -%}",
            "{{- " + _lit("\n\n" + TOOLS_PREAMBLE) + " -}}",
            "{%- for tool in tools -%}{{- '\\n' ~ (tool | tojson) -}}{%- endfor -%}",
            "{{- " + _lit("\n" + TOOLS_POSTAMBLE) + " -}}",
            "{%- endif -%}",
            "{{- " + turn_end + " -}}",
            "{%- for message in messages -%}",
            "{%- set content = message.get('content') if message.get('content') is not none else '' -%}",
            "{%- if loop.first and message['role'] == 'system' -%}",
            # Consecutive tool results share one user turn, as in Qwen2.5's template.
            "{%- elif message['role'] == 'tool' -%}",
            "{%- if loop.previtem is not defined or loop.previtem['role'] != 'tool' -%}",
            "{{- " + _lit(IM_START + "user\n") + " -}}",
            "{%- else -%}{{- '\\n' -}}{%- endif -%}",
            "{{- " + _lit(TOOL_RESPONSE_OPEN + "\n") + " ~ content ~ " + _lit("\n" + TOOL_RESPONSE_CLOSE) + " -}}",
            "{%- if loop.nextitem is not defined or loop.nextitem['role'] != 'tool' -%}",
            "{{- " + turn_end + " -}}",
            "{%- endif -%}",
            "{%- elif message['role'] == 'assistant' -%}",
            "{{- " + _lit(IM_START + "assistant\n") + " ~ content -}}",
            "{%- set calls = message.get('tool_calls') or [] -%}",
            "{%- if calls -%}",
            # One block per step: the call object, or a JSON list of parallel calls.
            "{%- set ns = namespace(items='') -%}",
            "{%- for call in calls -%}",
            "{%- set fn = call.get('function', call) -%}",
            "{%- set arguments = fn.get('arguments', {}) -%}",
            "{%- if arguments is string -%}",
            "{%- set arguments_json = arguments if arguments.strip() else '{}' -%}",
            "{%- else -%}",
            "{%- set arguments_json = (arguments if arguments is not none else {}) | tojson -%}",
            "{%- endif -%}",
            "{%- set ns.items = ns.items ~ ('' if loop.first else ', ') ~ "
            + _lit('{"name": ')
            + " ~ (fn['name'] | tojson) ~ "
            + _lit(', "arguments": ')
            + " ~ arguments_json ~ '}' -%}",
            "{%- endfor -%}",
            "{%- set payload = ns.items if calls | length == 1 else '[' ~ ns.items ~ ']' -%}",
            # Reserved tags inside the JSON are escaped so a value can never open or close a block.
            "{%- set payload = payload"
            + "".join(f" | replace({_lit('<' + tag)}, {_lit(chr(92) + 'u003c' + tag)})" for tag in RESERVED_TAGS)
            + " -%}",
            "{%- if content -%}{{- '\\n' -}}{%- endif -%}",
            "{{- " + _lit(TOOL_CALL_OPEN + "\n") + " ~ payload ~ " + _lit("\n" + TOOL_CALL_CLOSE) + " -}}",
            "{%- endif -%}",
            "{{- " + turn_end + " -}}",
            "{%- else -%}",
            "{{- " + _lit(IM_START) + " ~ message['role'] ~ '\\n' ~ content ~ " + turn_end + " -}}",
            "{%- endif -%}",
            "{%- endfor -%}",
            "{%- if add_generation_prompt -%}{{- " + _lit(IM_START + "assistant\n") + " -}}{%- endif -%}",
        ]
    )
