"""An LLM completeness checker for RLTR over an OpenAI-compatible endpoint (docs/method.md §5)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from slca_grpo.aio import run_sync
from slca_grpo.datatypes import tool_function
from slca_grpo.endpoints import EndpointConfig, EndpointError
from slca_grpo.rewards.completeness import CompletenessChecker, CompletenessRequest, CompletenessVerdict
from slca_grpo.rewards.endpoint_backed import EndpointBacked
from slca_grpo.rewards.rating import parse_yes_no

CHECKER_SYSTEM_PROMPT = """\
You check whether an AI assistant's plan of tool calls is complete: whether the calls, with their \
arguments, obtain everything needed to fully satisfy the user's request. A plan that misses a \
part of the request, calls the wrong tool, or uses wrong or missing arguments is incomplete. If \
the request needs no tool (none of the available tools fits it), an empty plan is complete.

Reply with one sentence of reasoning, then a last line of exactly this form:
Answer: yes
or
Answer: no"""


def checker_messages(request: CompletenessRequest) -> list[dict[str, str]]:
    tools = []
    for schema in request.task.tools:
        fn = tool_function(schema)
        tools.append(f"- {fn.get('name', '?')}: {str(fn.get('description', '')).strip()[:300]}")
    plan = [
        f"{i}. {c.name}({json.dumps(c.arguments, ensure_ascii=False, default=str)})"
        for i, c in enumerate(request.calls, 1)
    ]
    user = (
        f"## User request\n{request.task.question}\n\n"
        f"## Available tools\n{chr(10).join(tools) or '(none)'}\n\n"
        f"## The assistant's tool calls, in order\n{chr(10).join(plan) or '(no calls)'}\n\n"
        "Is this plan complete?"
    )
    return [{"role": "system", "content": CHECKER_SYSTEM_PROMPT}, {"role": "user", "content": user}]


class OpenAICompletenessChecker(EndpointBacked, CompletenessChecker):
    """LLM checker over an OpenAI-compatible endpoint. Sampled at ``temperature`` > 0 so the N
    verdicts of one plan can differ (RLTR averages them); all verdicts of a batch run concurrently."""

    name = "openai"

    def __init__(self, endpoint: EndpointConfig, *, temperature: float = 0.7) -> None:
        super().__init__()
        self._init_endpoint(endpoint, temperature)

    async def _one(self, request: CompletenessRequest) -> CompletenessVerdict:
        try:
            reply = await self.endpoint.acomplete(checker_messages(request), self.temperature)
        except EndpointError as exc:
            return CompletenessVerdict(False, failed=True, error=str(exc))
        except Exception as exc:  # one bad request must not sink the batch
            return CompletenessVerdict(False, failed=True, error=f"{type(exc).__name__}: {exc}")
        verdict = parse_yes_no(reply)
        if verdict is None:
            return CompletenessVerdict(False, failed=True, error="no yes/no verdict in the reply", raw=reply)
        return CompletenessVerdict(verdict, raw=reply)

    async def _agather(self, requests: Sequence[CompletenessRequest], n: int) -> list[list[CompletenessVerdict]]:
        flat = await asyncio.gather(*(self._one(r) for r in requests for _ in range(n)))
        return [flat[i * n : (i + 1) * n] for i in range(len(requests))]

    def _check_many(self, requests: Sequence[CompletenessRequest], n: int) -> list[list[CompletenessVerdict]]:
        return run_sync(self._agather(requests, n))
