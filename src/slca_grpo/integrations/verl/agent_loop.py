"""verl's tool agent loop with each task's own tools answered by our simulator.

``SLCAToolAgentLoop`` is verl's ``ToolAgentLoop`` (its state machine, token bookkeeping and
response mask) with three changes: the tools offered and rendered in the prompt are the task's,
read from ``extra_info["task"]``; every call goes to our simulator (in the worker process, or a
``slca serve-sim`` service) after the task's fixtures, under one simulator session per rollout;
and the response text with its chat markers goes to the reward in ``extra_fields``. The prompt is
rendered from the task's own messages (earlier calls as ``tool_calls``), not the row's flattened
``prompt`` column.

It is registered as ``slca_tool_agent`` (``rollout.agent.default_agent_loop``) when this module is
imported, which the Ray worker hook does in every worker. ``SLCAToolParser``
(``multi_turn.format=slca``) parses turns with our parser, so the calls a rollout executes are the
calls HierR scores (one block per call, or a JSON list of parallel calls).
"""

from __future__ import annotations

import json
import logging
import uuid
from functools import partial
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
from verl.experimental.agent_loop.tool_parser import FunctionCall, ToolParser
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionSchema, OpenAIFunctionToolSchema, ToolResponse
from verl.utils.ray_utils import get_event_loop

from slca_grpo.algos.segments import learnable_runs
from slca_grpo.chat.chat_format import build_formatter, resolve_chat_format
from slca_grpo.chat.formatter import prompt_tools
from slca_grpo.chat.messages import structured_messages
from slca_grpo.chat.parser import parse_tool_calls, strip_tool_call_blocks
from slca_grpo.config import to_dict
from slca_grpo.datatypes import Task, ToolCall
from slca_grpo.integrations.verl.config import VerlSLCAConfig, read_section
from slca_grpo.integrations.verl.reward import RESPONSE_TEXT_FIELD, SIMULATOR_FAULT_FIELD, TURN_TEXTS_FIELD
from slca_grpo.integrations.verl.rows import task_from_extra_info
from slca_grpo.plugins import load_plugins
from slca_grpo.rollout.environment import CallRequest, ToolEnvironment
from slca_grpo.simulator.errors import SIMULATOR_FAULTS
from slca_grpo.simulator.text import truncate_middle_to_tokens
from slca_grpo.trainer.build import simulator_from

logger = logging.getLogger(__name__)

AGENT_NAME = "slca_tool_agent"
PARSER_NAME = "slca"
CALLS_FIELD = "slca_tool_calls"
ERRORS_FIELD = "slca_tool_errors"

__all__ = ["AGENT_NAME", "PARSER_NAME", "SLCAToolAgentLoop", "SLCAToolParser", "SimulatedTool", "shared_environment"]


@ToolParser.register(PARSER_NAME)
class SLCAToolParser(ToolParser):
    """Tool calls of a turn by ``slca_grpo.chat.parse_tool_calls``; malformed blocks make no call."""

    async def extract_tool_calls(self, responses_ids: list[int], tools: Any = None) -> tuple[str, list[FunctionCall]]:
        text = await get_event_loop().run_in_executor(None, self.tokenizer.decode, responses_ids)
        # Unknown tool names are still called: the loop answers them with an error the policy sees.
        calls = [
            FunctionCall(name=call.name, arguments=json.dumps(call.arguments, ensure_ascii=False))
            for call in parse_tool_calls(text).calls
        ]
        return strip_tool_call_blocks(text), calls


_ENVIRONMENTS: dict[str, ToolEnvironment] = {}


def shared_environment(config: VerlSLCAConfig) -> ToolEnvironment:
    """This process's tool environment for ``config`` (one simulator or client for all its rollouts)."""
    key = json.dumps(
        [to_dict(config.simulator), to_dict(config.simulator_service), config.use_fixtures], sort_keys=True
    )
    if key not in _ENVIRONMENTS:
        simulator = simulator_from(config.simulator, config.simulator_service)
        _ENVIRONMENTS[key] = ToolEnvironment(simulator, use_fixtures=config.use_fixtures)
    return _ENVIRONMENTS[key]


class _RolloutCalls:
    """One rollout's side of the tools: its task, simulator session and call counts."""

    def __init__(self, task: Task, session_id: str, environment: ToolEnvironment, truncate: Any) -> None:
        self.task = task
        self.session_id = session_id
        self.environment = environment
        self.truncate = truncate
        self.calls = 0
        self.errors = 0
        self.fault = ""  # the first simulator fault (not the policy's): the rollout is then void

    async def answer(self, call: ToolCall) -> str:
        (observation,) = await self.environment.aexecute([CallRequest(call, self.task, self.session_id)])
        self.calls += 1
        self.errors += observation.is_error
        if not self.fault and observation.error is not None and observation.error.kind in SIMULATOR_FAULTS:
            self.fault = observation.error.kind
        return self.truncate(observation.text)


class SimulatedTool(BaseTool):
    """A task's tool for verl's loop; its calls go to the rollout's simulator session.

    verl needs only the name from ``tool_schema``: the prompt shows the task's full schema and the
    simulator checks calls against it. ``BaseTool.__init__`` is not called as it prints the schema,
    and these tools are made for every rollout.
    """

    def __init__(self, name: str, rollout: _RolloutCalls) -> None:
        self.config: dict[str, Any] = {}
        self.name = name
        self.tool_schema = OpenAIFunctionToolSchema(
            type="function", function=OpenAIFunctionSchema(name=name, description="")
        )
        self.rollout = rollout

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict]:
        text = await self.rollout.answer(ToolCall(self.name, dict(parameters)))
        return ToolResponse(text=text), 0.0, {}


def _session_id(kwargs: dict[str, Any]) -> str:
    uid, rollout = kwargs.get("uid"), kwargs.get("session_id")
    if uid is None:
        return uuid.uuid4().hex
    return f"{uid}-{rollout}" if rollout is not None else f"{uid}-{uuid.uuid4().hex[:8]}"


@register(AGENT_NAME)
class SLCAToolAgentLoop(ToolAgentLoop):
    """verl's ``ToolAgentLoop`` on our tasks and simulator; settings from the config's ``slca`` section."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.slca = read_section(self.config)
        load_plugins(self.slca.plugins)  # e.g. a simulator backend of the user's
        self.environment = shared_environment(self.slca)
        self.count_tokens = partial(_count_tokens, self.tokenizer)
        _warn_unless_hermes_calls(self.tokenizer)
        _warn_if_cut_by_characters(self.max_tool_response_length, self.slca.max_tool_response_tokens)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        task = task_from_extra_info(kwargs.get("extra_info"))
        limit = self.slca.max_tool_response_tokens
        calls = _RolloutCalls(
            task,
            _session_id(kwargs),
            self.environment,
            partial(truncate_middle_to_tokens, max_tokens=limit, count_tokens=self.count_tokens),
        )
        # This loop object serves this one rollout (verl builds one per trajectory).
        self.tools = {name: SimulatedTool(name, calls) for name in task.tool_names}
        self.tool_schemas = prompt_tools(task.tools)
        # The task's own messages, earlier calls as tool_calls, for the model's chat template.
        kwargs["raw_prompt"] = structured_messages(task.messages)
        output = await super().run(sampling_params, **kwargs)
        loop = get_event_loop()
        text = await loop.run_in_executor(
            None, partial(self.tokenizer.decode, skip_special_tokens=False), output.response_ids
        )
        runs = [output.response_ids[start:end] for start, end in learnable_runs(output.response_mask)]
        turn_texts = await loop.run_in_executor(
            None, partial(self.tokenizer.batch_decode, skip_special_tokens=False), runs
        )
        output.extra_fields.update(
            {
                RESPONSE_TEXT_FIELD: text,
                TURN_TEXTS_FIELD: turn_texts,
                CALLS_FIELD: calls.calls,
                ERRORS_FIELD: calls.errors,
                SIMULATOR_FAULT_FIELD: calls.fault,
            }
        )
        return output


def _count_tokens(tokenizer: Any, text: str) -> int:
    return len(tokenizer.encode(text, add_special_tokens=False))


_checked_templates: set[str] = set()


def _warn_unless_hermes_calls(tokenizer: Any) -> None:
    """Warn (once per template) when the model's chat template writes calls in another syntax than
    the Hermes ``<tool_call>`` blocks ``SLCAToolParser`` reads, its format resolved as our trainer
    and evaluation resolve ``chat_format: auto``."""
    template = getattr(tokenizer, "chat_template", None) or ""
    if template in _checked_templates:
        return
    _checked_templates.add(template)
    if resolve_chat_format(tokenizer) == "hermes":
        return
    try:
        syntax = build_formatter(tokenizer, chat_format="native").tool_parser
    except ValueError:  # a template our own trainer cannot use token-exactly may still serve verl
        return
    if syntax != "hermes":
        logger.warning(
            "the model's chat template writes tool calls in the %s syntax; the verl agent loop reads only Hermes "
            "<tool_call> blocks, so none of its calls would run (docs/verl.md)",
            syntax,
        )


_warned: set[tuple[int, int]] = set()


def _warn_if_cut_by_characters(characters: int, tokens: int) -> None:
    """verl also cuts tool responses, by characters, after our token limit (256 by default)."""
    if characters < 4 * tokens and (characters, tokens) not in _warned:
        _warned.add((characters, tokens))
        logger.warning(
            "multi_turn.max_tool_response_length=%d characters may cut tool responses shorter than "
            "slca.max_tool_response_tokens=%d tokens; raise it (the example configs use 1000000)",
            characters,
            tokens,
        )
