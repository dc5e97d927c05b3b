"""Chat templates in the styles of the model families the native format must handle, written
here for the tests (none is any model's actual file): their tool-call syntax, special tokens and
turn structure follow the published conventions of each family."""

from __future__ import annotations

# Qwen2.5 style: tools in the system turn, one <tool_call> block per call (so parallel calls are
# several blocks), consecutive tool results in one user turn, turns closed by <|im_end|>.
CHATML_BLOCKS = (
    "{%- set system = messages[0]['content'] if messages and messages[0]['role'] == 'system' "
    "else 'You are a helpful assistant.' -%}"
    "{{- '<|im_start|>system\\n' ~ system -}}"
    "{%- if tools -%}"
    "{{- '\\n\\n# Tools\\n<tools>' -}}"
    "{%- for tool in tools -%}{{- '\\n' ~ (tool | tojson) -}}{%- endfor -%}"
    '{{- \'\\n</tools>\\nCall a function with <tool_call>{"name": ..., "arguments": ...}</tool_call>.\' -}}'
    "{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' and loop.first -%}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{- '<|im_start|>assistant\\n' ~ (message['content'] or '') -}}"
    "{%- for call in message.get('tool_calls') or [] -%}"
    "{{- '\\n<tool_call>\\n{\"name\": ' ~ (call['function']['name'] | tojson) ~ ', \"arguments\": '"
    " ~ (call['function']['arguments'] | tojson) ~ '}\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- elif message['role'] == 'tool' -%}"
    "{%- if loop.previtem is not defined or loop.previtem['role'] != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}"
    "{{- '\\n<tool_response>\\n' ~ message['content'] ~ '\\n</tool_response>' -}}"
    "{%- if loop.nextitem is not defined or loop.nextitem['role'] != 'tool' -%}{{- '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- else -%}"
    "{{- '<|im_start|>' ~ message['role'] ~ '\\n' ~ message['content'] ~ '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

# Llama 3.1 style: header tokens, a call is the whole turn as {"name", "parameters"}, one call per
# turn (the template refuses more), results in an "ipython" turn, turns closed by <|eot_id|>.
HEADER_JSON = (
    "{{- '<|begin_of_text|>' -}}"
    "{%- set system = messages[0]['content'] if messages and messages[0]['role'] == 'system' "
    "else 'You are a helpful assistant.' -%}"
    "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' ~ system -}}"
    "{%- if tools -%}"
    '{{- \'\\n\\nTo call a function reply with {"name": function name, "parameters": arguments}.\' -}}'
    "{%- for tool in tools -%}{{- '\\n' ~ (tool | tojson) -}}{%- endfor -%}"
    "{%- endif -%}"
    "{{- '<|eot_id|>' -}}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' and loop.first -%}"
    "{%- elif message['role'] == 'assistant' and message.get('tool_calls') -%}"
    "{%- if message['tool_calls'] | length != 1 -%}{{- raise_exception('one tool call per turn') -}}{%- endif -%}"
    "{%- set call = message['tool_calls'][0]['function'] -%}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n{\"name\": ' ~ (call['name'] | tojson) ~ "
    "', \"parameters\": ' ~ (call['arguments'] | tojson) ~ '}<|eot_id|>' -}}"
    "{%- elif message['role'] == 'tool' -%}"
    "{{- '<|start_header_id|>ipython<|end_header_id|>\\n\\n' ~ message['content'] ~ '<|eot_id|>' -}}"
    "{%- else -%}"
    "{{- '<|start_header_id|>' ~ message['role'] ~ '<|end_header_id|>\\n\\n' ~ (message['content'] or '')"
    " ~ '<|eot_id|>' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}{%- endif -%}"
)
HEADER_JSON_SPECIALS = ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]

# Mistral style: tools before the first [INST], calls as [TOOL_CALLS] and a JSON list with call ids,
# results in [TOOL_RESULTS] naming the call, every assistant turn closed by </s>, no header.
MISTRAL_LIKE = (
    "{%- set ns = namespace(tools_shown=false, system='') -%}"
    "{%- if messages and messages[0]['role'] == 'system' -%}"
    "{%- set ns.system = messages[0]['content'] ~ '\\n\\n' -%}{%- endif -%}"
    "{{- '<s>' -}}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'user' -%}"
    "{%- if tools and not ns.tools_shown -%}"
    "{{- '[AVAILABLE_TOOLS] ' ~ (tools | tojson) ~ '[/AVAILABLE_TOOLS]' -}}{%- set ns.tools_shown = true -%}"
    "{%- endif -%}"
    "{{- '[INST] ' ~ ns.system ~ message['content'] ~ '[/INST]' -}}{%- set ns.system = '' -%}"
    "{%- elif message['role'] == 'assistant' and message.get('tool_calls') -%}"
    "{{- '[TOOL_CALLS] [' -}}"
    "{%- for call in message['tool_calls'] -%}"
    "{{- '{\"name\": ' ~ (call['function']['name'] | tojson) ~ ', \"arguments\": ' ~ "
    "(call['function']['arguments'] | tojson) ~ ', \"id\": ' ~ (call['id'] | tojson) ~ '}' -}}"
    "{%- if not loop.last -%}{{- ', ' -}}{%- endif -%}"
    "{%- endfor -%}"
    "{{- ']</s>' -}}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{- ' ' ~ message['content'] ~ '</s>' -}}"
    "{%- elif message['role'] == 'tool' -%}"
    "{{- '[TOOL_RESULTS] {\"content\": ' ~ (message['content'] | tojson) ~ ', \"call_id\": ' ~ "
    "(message['tool_call_id'] | tojson) ~ '}[/TOOL_RESULTS]' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
)
MISTRAL_SPECIALS = [
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[TOOL_CALLS]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
]

# Pythonic calls (Llama 4 / ToolACE style) in ChatML turns: [name(key=value, ...), ...].
CHATML_PYTHONIC = CHATML_BLOCKS.replace(
    "{%- for call in message.get('tool_calls') or [] -%}"
    "{{- '\\n<tool_call>\\n{\"name\": ' ~ (call['function']['name'] | tojson) ~ ', \"arguments\": '"
    " ~ (call['function']['arguments'] | tojson) ~ '}\\n</tool_call>' -}}"
    "{%- endfor -%}",
    "{%- if message.get('tool_calls') -%}{{- '[' -}}"
    "{%- for call in message['tool_calls'] -%}"
    "{{- call['function']['name'] ~ '(' -}}"
    "{%- for key, value in call['function']['arguments'].items() -%}"
    "{{- key ~ '=' ~ (value | tojson) -}}{%- if not loop.last -%}{{- ', ' -}}{%- endif -%}"
    "{%- endfor -%}"
    "{{- ')' -}}{%- if not loop.last -%}{{- ', ' -}}{%- endif -%}"
    "{%- endfor -%}"
    "{{- ']' -}}{%- endif -%}",
)

# Templates the native format must refuse, each for one reason.
IGNORES_TOOLS = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' ~ message['role'] ~ '\\n' ~ (message['content'] or '') ~ '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)
COUNTS_MESSAGES = CHATML_BLOCKS.replace(
    "{{- '<|im_start|>system\\n' ~ system -}}",
    "{{- '<|im_start|>system\\n' ~ system ~ ' (' ~ (messages | length) ~ ' messages)' -}}",
)
NO_END_TOKEN = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' and tools -%}"
    "{{- 'System: ' ~ message['content'] ~ '\\nTools: ' ~ (tools | tojson) ~ '\\n\\n' -}}"
    "{%- elif message.get('tool_calls') -%}"
    "{{- 'Assistant: <tool_call>' ~ (message['tool_calls'][0]['function'] | tojson) ~ '</tool_call>\\n\\n' -}}"
    "{%- else -%}"
    "{{- message['role'] ~ ': ' ~ (message['content'] or '') ~ '\\n\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- 'Assistant:' -}}{%- endif -%}"
)

# ChatML turns with Llama-style JSON calls (one per turn) and "ipython" results: a native template
# our tiny models can train with, since it ends turns with their own <|im_end|> token.
CHATML_JSON = (
    "{%- set system = messages[0]['content'] if messages and messages[0]['role'] == 'system' "
    "else 'You are a helpful assistant.' -%}"
    "{{- '<|im_start|>system\\n' ~ system -}}"
    "{%- if tools -%}"
    '{{- \'\\nReply with {"name": function, "parameters": arguments} to call one of:\' -}}'
    "{%- for tool in tools -%}{{- '\\n' ~ (tool | tojson) -}}{%- endfor -%}"
    "{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' and loop.first -%}"
    "{%- elif message['role'] == 'assistant' and message.get('tool_calls') -%}"
    "{%- if message['tool_calls'] | length != 1 -%}{{- raise_exception('one call per turn') -}}{%- endif -%}"
    "{%- set call = message['tool_calls'][0]['function'] -%}"
    "{{- '<|im_start|>assistant\\n{\"name\": ' ~ (call['name'] | tojson) ~ ', \"parameters\": ' ~ "
    "(call['arguments'] | tojson) ~ '}<|im_end|>\\n' -}}"
    "{%- elif message['role'] == 'tool' -%}"
    "{{- '<|im_start|>ipython\\n' ~ message['content'] ~ '<|im_end|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' ~ message['role'] ~ '\\n' ~ (message['content'] or '') ~ '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)
