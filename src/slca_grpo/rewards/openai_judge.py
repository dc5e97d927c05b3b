"""An LLM judge over any OpenAI-compatible chat-completions endpoint (docs/method.md §4: a frozen judge
rates the final answer 1..5 given the question, the tool responses and the answer)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from slca_grpo.aio import run_sync
from slca_grpo.endpoints import EndpointConfig, EndpointError
from slca_grpo.rewards.endpoint_backed import EndpointBacked
from slca_grpo.rewards.judge_base import Judge, JudgeRequest, JudgeVerdict
from slca_grpo.rewards.rating import parse_rating

JUDGE_SYSTEM_PROMPT = """\
You are a strict and fair evaluator of the final answer an AI assistant gave to a user. The \
assistant could call tools; their raw responses are shown to you. Rate only the final answer, \
on this scale:

5 = excellent: correct with respect to the tool responses, complete (addresses every part of the \
question), fully grounded (every fact comes from the tool responses or the question; nothing \
invented), clear and concise.
4 = good: correct and grounded, with a minor omission or a small clarity issue.
3 = acceptable: mostly correct but incomplete, vague, or with one minor unsupported detail.
2 = poor: partly wrong, misreads the tool responses, or invents facts.
1 = very poor: wrong, unrelated, empty, or contradicting the tool responses.

If a tool response is an error, a good answer says so honestly instead of inventing a result. If \
no tool responses are shown, judge whether the answer handles the request honestly (for example, \
explains that no available tool can do it) without inventing facts. Do not reward length.

Reply with one or two sentences of reasoning, then a last line of exactly this form:
Rating: N
where N is an integer from 1 to 5."""


def truncate_middle_chars(text: str, max_chars: int) -> str:
    """Keep the head and the tail of a long text; the middle is replaced by a marker."""
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    half = max_chars // 2
    return f"{text[:half]}\n…[{len(text) - 2 * half} characters omitted]…\n{text[-half:]}"


def judge_messages(request: JudgeRequest, max_response_chars: int = 4000) -> list[dict[str, str]]:
    """The chat messages sent to an LLM judge for one request."""
    if request.tool_responses:
        responses = "\n".join(
            f"[{i}] {truncate_middle_chars(r, max_response_chars)}" for i, r in enumerate(request.tool_responses, 1)
        )
    else:
        responses = "(none: the assistant called no tool)"
    user = (
        f"## User question\n{request.question}\n\n"
        f"## Tool responses\n{responses}\n\n"
        f"## Assistant's final answer\n{request.answer}\n\n"
        "Rate the final answer."
    )
    return [{"role": "system", "content": JUDGE_SYSTEM_PROMPT}, {"role": "user", "content": user}]


class OpenAIJudge(EndpointBacked, Judge):
    """Judge through ``POST {base_url}/chat/completions``; ``rate_many`` runs up to ``concurrency``
    requests at once. Endpoint failures after retries and unparseable replies are failure verdicts."""

    name = "openai"

    def __init__(self, endpoint: EndpointConfig, *, temperature: float = 0.0, max_response_chars: int = 4000) -> None:
        super().__init__()
        self._init_endpoint(endpoint, temperature)
        self.max_response_chars = max_response_chars

    def _verdict(self, reply: str) -> JudgeVerdict:
        rating = parse_rating(reply)
        if rating is None:
            return JudgeVerdict.failure("no rating in 1..5 found in the judge's reply", raw=reply)
        return JudgeVerdict.ok(rating, raw=reply)

    def _rate(self, request: JudgeRequest) -> JudgeVerdict:
        return run_sync(self._arate(request))

    async def _arate(self, request: JudgeRequest) -> JudgeVerdict:
        messages = judge_messages(request, self.max_response_chars)
        try:
            reply = await self.endpoint.acomplete(messages, self.temperature)
        except EndpointError as exc:
            return JudgeVerdict.failure(str(exc))
        except Exception as exc:  # keep one bad request from failing the whole batch
            return JudgeVerdict.failure(f"{type(exc).__name__}: {exc}")
        return self._verdict(reply)

    async def _agather(self, requests: Sequence[JudgeRequest]) -> list[JudgeVerdict]:
        return list(await asyncio.gather(*(self._arate(r) for r in requests)))

    def _rate_many(self, requests: Sequence[JudgeRequest]) -> list[JudgeVerdict]:
        return run_sync(self._agather(requests))
