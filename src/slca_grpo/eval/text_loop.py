"""The agent loop at the text level, for any ``ChatAgent`` (local model, endpoint, oracle).

It walks the same path as the token-level training loop — generate a turn, parse, call the tool
environment (fixtures, then the simulator), append the results, continue — and builds the same
response text, so in-domain metrics mean the same thing for every kind of policy.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence

from slca_grpo.chat.parser import parse_tool_calls
from slca_grpo.chat.template import IM_END, generation_prompt, render_tool_calls, render_turn, tool_results_turn
from slca_grpo.datatypes import Task, Trajectory, Turn, call_signature
from slca_grpo.eval.agent import AgentRequest, ChatAgent
from slca_grpo.rollout.environment import CallRequest, ToolEnvironment, plan_block_calls
from slca_grpo.rollout.loop import FINAL_ANSWER_NOTICE, ends_calls, repeat_calls


def run_text_episodes(
    agent: ChatAgent,
    tasks: Sequence[Task],
    environment: ToolEnvironment,
    *,
    max_turns: int = 4,
    max_parallel_calls: int = 8,
    session_prefix: str = "eval",
    answer_at_limit: bool = False,
    answer_on_repeat: bool = False,
    final_answer_notice: str = FINAL_ANSWER_NOTICE,
) -> list[Trajectory]:
    """One episode per task, all tasks advancing together turn by turn.

    ``answer_at_limit`` / ``answer_on_repeat`` end the calls with a request for a final answer, as
    the training loop's settings of those names do (``counters["forced_answer"]``)."""
    episodes = [
        {
            "task": task,
            "messages": [dict(m) for m in task.messages],
            "trajectory": Trajectory(task_id=task.id, prompt_ids=[]),
            "done": False,
            "called": set(),  # signatures of the calls made so far
            "answering": False,  # on the forced-answer turn
        }
        for task in tasks
    ]
    forces_answers = answer_at_limit or answer_on_repeat
    for turn_index in range(max_turns + (1 if forces_answers else 0)):
        active = [e for e in episodes if not e["done"]]
        if not active:
            break
        last_turn = turn_index >= max_turns - 1
        texts = agent.respond(
            [
                AgentRequest(messages=e["messages"], tools=e["task"].tools, key=e["task"].id, step=turn_index)
                for e in active
            ]
        )
        token_counts = getattr(agent, "last_token_counts", None) or []
        requests: list[CallRequest] = []
        for index, (episode, text) in enumerate(zip(active, texts)):
            text = text if isinstance(text, str) else ""
            trajectory: Trajectory = episode["trajectory"]
            if len(token_counts) == len(active):  # agents that know their token counts report them
                counters = trajectory.counters
                counters["generated_tokens"] = counters.get("generated_tokens", 0) + token_counts[index]
            trajectory.response_text += text
            trajectory.turns.append(Turn(text=text))
            episode["messages"].append({"role": "assistant", "content": text})
            parsed = parse_tool_calls(text, episode["task"].tool_names)
            block = parsed.blocks[-1] if parsed.blocks else None
            ends = block is not None and ends_calls(
                block,
                episode["called"],
                last_turn=last_turn,
                answer_at_limit=answer_at_limit,
                answer_on_repeat=answer_on_repeat,
            )
            if episode["answering"] or block is None or (last_turn and not ends):
                if episode["answering"]:
                    trajectory.counters["forced_answer"] = 1
                episode["done"] = True
                trajectory.truncated = block is not None  # a call left unanswered
                continue
            episode["answer_next"] = ends
            turn = trajectory.turns[-1]
            turn.calls, episode["slots"] = plan_block_calls(block, max_parallel_calls)
            episode["called"].update(call_signature(call) for call in turn.calls)
            session = f"{session_prefix}-{episode['task'].id}"
            requests += [
                CallRequest(turn.calls[i], episode["task"], session)
                for i, slot in enumerate(episode["slots"])
                if slot is None
            ]
        observations = iter(environment.execute(requests))
        for episode in active:
            slots = episode.pop("slots", None)
            if slots is None:
                continue
            turn = episode["trajectory"].turns[-1]
            turn.observations = [slot if slot is not None else next(observations) for slot in slots]
            texts_out = [o.text for o in turn.observations]
            episode["messages"].extend({"role": "tool", "content": t} for t in texts_out)
            injected = IM_END + "\n" + tool_results_turn(texts_out)
            episode["answering"] = episode.pop("answer_next", False)
            if episode["answering"]:
                episode["messages"].append({"role": "user", "content": final_answer_notice})
                injected += render_turn("user", final_answer_notice)
            episode["trajectory"].response_text += injected + generation_prompt()
    for episode in episodes:
        trajectory = episode["trajectory"]
        parsed = parse_tool_calls(trajectory.response_text, episode["task"].tool_names)
        trajectory.final_text = parsed.final_answer
        trajectory.counters.update(
            turns=len(trajectory.turns), calls=trajectory.num_calls, repeat_calls=repeat_calls(parsed.calls)
        )
        trajectory.counters.setdefault("forced_answer", 0)
    return [e["trajectory"] for e in episodes]


def _scalar_facts(data: object, depth: int = 0):
    """(field, value) pairs of a JSON value's short scalars: top-level fields first, then the first
    item of each list and the fields of nested objects."""
    if depth > 2:
        return
    if isinstance(data, list):
        if data:
            yield from _scalar_facts(data[0], depth + 1)
        return
    if not isinstance(data, dict):
        return
    nested = []
    for key, value in data.items():
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, (int, float)) or (isinstance(value, str) and 0 < len(value) <= 60):
            yield str(key).replace("_", " "), value
        elif isinstance(value, (dict, list)):
            nested.append(value)
    for value in nested:
        yield from _scalar_facts(value, depth + 1)


def grounded_answer(observations: Sequence[str], max_facts: int = 6) -> str:
    """A plain final answer that states the facts of the tool responses: what the oracle says on a
    task without a reference answer, so that its summary is judged on grounding like any other."""
    sentences = []
    for text in observations:
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        facts = list(itertools.islice(_scalar_facts(data), max_facts))
        if facts:
            sentences.append("; ".join(f"{key}: {value}" for key, value in facts) + ".")
        elif text.strip():
            sentences.append(f"The tool answered: {text.strip()[:200]}")
    if not sentences:
        return "I have no tool results to report."
    return "Here is what I found. " + " ".join(sentences)


class TaskOracleAgent:
    """Replays each task's gold calls step by step, then its reference answer (or, without one, an
    answer stating the facts of the tool responses)."""

    name = "oracle"

    def __init__(self, tasks: Sequence[Task]):
        self.tasks = {t.id: t for t in tasks}

    def respond(self, requests: list[AgentRequest]) -> list[str]:
        texts = []
        for request in requests:
            task = self.tasks.get(request.key)
            if task is None:
                texts.append("")
            elif request.step < len(task.gold_calls):
                texts.append(render_tool_calls(task.gold_calls[request.step]))
            elif task.reference_answer:
                texts.append(task.reference_answer)
            else:
                texts.append(
                    grounded_answer([str(m.get("content") or "") for m in request.messages if m.get("role") == "tool"])
                )
        return texts
