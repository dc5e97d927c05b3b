"""A model behind any OpenAI-compatible endpoint (vLLM, SGLang, a hosted API) as a ``ChatAgent``.

``native`` mode sends tools through the API's ``tools`` field and turns the reply's
``tool_calls`` into a Hermes ``<tool_call>`` block; ``prompt`` mode, for servers without a tool
parser, puts the tools in the system prompt in the Hermes format and returns the text as is.
Failures after retries, and replies that are not chat completions (not JSON, or JSON of another
shape), become an empty answer, never an exception: they are counted (``failures`` of
``requests``, with ``first_error``), and every ``slca eval`` command reports them
(``slca_grpo.eval.report.check_request_failures``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from slca_grpo.aio import run_sync
from slca_grpo.chat.formatter import prompt_tools
from slca_grpo.chat.messages import arguments_dict, structured_messages
from slca_grpo.chat.template import (
    assistant_text,
    render_tool_calls,
    render_tool_response,
    render_tools_system_prompt,
)
from slca_grpo.endpoints import ChatClient, EndpointConfig, EndpointError
from slca_grpo.eval.agent import AgentRequest

MODES = ("native", "prompt")


def to_api_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Our messages (assistant calls as Hermes text or ``tool_calls``; tool results without ids)
    in the strict OpenAI shape: every call has an id and every tool result names it."""
    out = structured_messages(messages, json_arguments=True)
    for message in out:
        if message["role"] == "assistant":
            message["content"] = message["content"] or None
    return out


def reply_to_text(data: Any) -> str:
    """A chat-completion reply as Hermes text: its prose, then one block with its tool calls.

    ``EndpointError`` for a reply of another shape (no ``choices[0].message`` object, a message
    with neither ``content`` nor ``tool_calls``, content that is not text, a malformed tool call):
    a server or proxy answering something else is a failed request, not an empty answer.
    """
    try:
        message = data["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise EndpointError(f"reply is not a chat completion (no choices[0].message): {_excerpt(data)}") from None
    if not isinstance(message, dict):
        raise EndpointError(f"reply is not a chat completion (its message is not an object): {_excerpt(data)}")
    if "content" not in message and "tool_calls" not in message:
        raise EndpointError(f"reply is not a chat completion (its message has no content): {_excerpt(data)}")
    text = _content_text(message.get("content"))
    if text is None:
        raise EndpointError(f"reply is not a chat completion (its content is not text): {_excerpt(data)}")
    raw_calls = message.get("tool_calls")
    if raw_calls is not None and not isinstance(raw_calls, list):
        raise EndpointError(f"reply is not a chat completion (tool_calls is not a list): {_excerpt(data)}")
    calls = []
    for call in raw_calls or []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise EndpointError(f"reply has a malformed tool call (no function name): {_excerpt(call)}")
        calls.append({"name": function["name"], "arguments": arguments_dict(function.get("arguments"))})
    if calls:
        if all(isinstance(c["arguments"], dict) for c in calls):
            block = render_tool_calls(calls)
        else:  # undecodable arguments stay visible as a string, which the parser flags
            block = "<tool_call>\n" + json.dumps(calls if len(calls) > 1 else calls[0]) + "\n</tool_call>"
        return (text.strip() + "\n" if text.strip() else "") + block
    return text


def _content_text(content: Any) -> str | None:
    """A message's content as text: a string, null (a reply with only tool calls), or a list of
    ``{"type": "text", "text": ...}`` parts; None for anything else."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list) and all(isinstance(part, dict) for part in content):
        texts = [part.get("text") for part in content if part.get("type") == "text"]
        if all(isinstance(t, str) for t in texts):
            return "".join(texts)
    return None


def _excerpt(value: Any) -> str:
    """A short one-line view of a reply for an error message."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text[:160] + ("..." if len(text) > 160 else "")


class OpenAIChatAgent:
    def __init__(self, endpoint: EndpointConfig, *, mode: str = "native", temperature: float = 0.0):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.name = f"openai:{endpoint.model}"
        self.mode = mode
        self.temperature = temperature
        self.endpoint = ChatClient(endpoint)
        self.requests = 0  # requests answered (each after its retries), failed ones included
        self.failures = 0
        self.first_error: str | None = None
        self.last_errors: list[str] = []
        self.last_token_counts: list[int] = []  # completion tokens per request (from the API's usage)

    def body(self, request: AgentRequest) -> dict[str, Any]:
        tools = prompt_tools(request.tools)
        if self.mode == "prompt":
            body = self.endpoint.payload(_prompt_messages(request.messages, tools), self.temperature)
        else:
            body = self.endpoint.payload(to_api_messages(request.messages), self.temperature)
            if tools:
                body["tools"] = tools
        return body

    async def _respond_all(self, requests: list[AgentRequest]) -> list[str]:
        counts = [0] * len(requests)
        self.last_token_counts = counts

        async def one(index: int, request: AgentRequest) -> str:
            # Counted on the event loop's thread: concurrent respond() calls (τ²'s batcher) share it.
            self.requests += 1
            try:
                data = await self.endpoint.apost(self.body(request))
                text = reply_to_text(data)
                usage = data.get("usage") if isinstance(data, dict) else None
                tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
                counts[index] = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else 0
                return text
            except EndpointError as exc:
                error = " ".join(str(exc).split()) or type(exc).__name__
                self.failures += 1
                if self.first_error is None:
                    self.first_error = error
                self.last_errors = (self.last_errors + [error])[-20:]
                return ""

        return list(await asyncio.gather(*(one(i, r) for i, r in enumerate(requests))))

    def respond(self, requests: list[AgentRequest]) -> list[str]:
        return run_sync(self._respond_all(list(requests))) if requests else []


def _prompt_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Prompt mode: the Hermes system prompt with tools, assistant calls as text, tool results as
    ``<tool_response>`` user turns — exactly what ``render_chat`` shows a local model."""
    out: list[dict[str, Any]] = []
    rest = list(messages)
    system = rest.pop(0).get("content") if rest and rest[0].get("role") == "system" else None
    out.append({"role": "system", "content": render_tools_system_prompt(tools, system)})
    for message in rest:
        role = message.get("role")
        content = message.get("content") or ""
        if role == "tool":
            if out and out[-1]["role"] == "user" and out[-1]["content"].startswith("<tool_response>"):
                out[-1]["content"] += "\n" + render_tool_response(content)
            else:
                out.append({"role": "user", "content": render_tool_response(content)})
        elif role == "assistant" and message.get("tool_calls"):
            calls = [c.get("function", c) for c in message["tool_calls"]]
            out.append({"role": "assistant", "content": assistant_text(content, calls)})
        else:
            out.append({"role": role, "content": content})
    return out
