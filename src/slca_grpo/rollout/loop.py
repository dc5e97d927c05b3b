"""The multi-turn agent loop: generate, parse, simulate, append, continue — for a whole batch.

All G × prompts rollouts advance together: each turn is one batched sampling call over the
rollouts still running, then one batched call into the tool environment.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from slca_grpo.chat.formatter import ChatFormatter, Dialogue, TurnReading
from slca_grpo.chat.parser import ToolCallBlock, parse_tool_calls
from slca_grpo.config import ConfigError, at_least
from slca_grpo.datatypes import Observation, Task, ToolCall, Trajectory, Turn, call_signature
from slca_grpo.engine import MIN_TEMPERATURE, STOP_LENGTH, SamplingConfig, TurnCache, decode_session, sample
from slca_grpo.rollout.environment import CallRequest, ToolEnvironment, malformed_turn_observation, plan_block_calls

# What the loop says, as a user turn after the tool results, when it ends the calls (see RolloutConfig).
FINAL_ANSWER_NOTICE = (
    "You have made all the tool calls you can. Do not call any more tools: answer my request now, "
    "using the tool results above."
)


@dataclass
class RolloutConfig:
    group_size: int = 8
    max_turns: int = 4  # assistant turns per rollout
    max_parallel_calls: int = 8
    # Sampled + injected tokens after the prompt; no turn starts past it (the last injected tool
    # response may overrun it by up to max_parallel_calls × max_tool_response_tokens).
    max_response_tokens: int = 512
    max_tool_response_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    # A call budget that ends in an answer, as agent frameworks end at their step limit: a rollout
    # still calling on its last turn (answer_at_limit), or repeating a call whose result it already
    # has (answer_on_repeat), gets that turn's results, then final_answer_notice as a user turn and
    # one more turn to answer (counted in counters["forced_answer"]). Off: such a call is left
    # unanswered and the rollout is cut off (truncated).
    answer_at_limit: bool = False
    answer_on_repeat: bool = False
    final_answer_notice: str = FINAL_ANSWER_NOTICE

    def __post_init__(self) -> None:
        at_least(
            self, 1, "group_size", "max_turns", "max_parallel_calls", "max_response_tokens", "max_tool_response_tokens"
        )
        at_least(self, 0, "temperature", "top_k")
        if not (self.temperature == 0 or MIN_TEMPERATURE <= self.temperature < float("inf")):
            # Logits divided by a tinier one overflow to inf, and the softmax of inf is NaN.
            raise ConfigError(f"temperature must be 0 (greedy) or at least {MIN_TEMPERATURE}, got {self.temperature!r}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not isinstance(self.final_answer_notice, str) or not self.final_answer_notice.strip():
            raise ConfigError("final_answer_notice must be a non-empty text")

    @property
    def forces_answers(self) -> bool:
        return self.answer_at_limit or self.answer_on_repeat

    @property
    def sampling(self) -> SamplingConfig:
        return SamplingConfig(temperature=self.temperature, top_p=self.top_p, top_k=self.top_k)


@dataclass
class _Rollout:
    task: Task
    trajectory: Trajectory
    session_id: str
    dialogue: Dialogue
    index: int = 0  # the rollout's place in its batch: its key in the kept cache
    done: bool = False
    pending: list[Observation | None] = field(default_factory=list)  # see plan_block_calls
    called: set[str] = field(default_factory=set)  # signatures of the calls made so far
    answer_next: bool = False  # this turn's results end the calls: the next turn is the forced answer
    answering: bool = False  # on its forced-answer turn


class AgentLoop:
    def __init__(
        self, model: torch.nn.Module, formatter: ChatFormatter, environment: ToolEnvironment, config: RolloutConfig
    ):
        self.model = model
        self.formatter = formatter
        self.environment = environment
        self.config = config

    def run(
        self,
        tasks: Sequence[Task],
        *,
        group_size: int | None = None,
        sampling: SamplingConfig | None = None,
        generator: torch.Generator | None = None,
        session_prefix: str | None = None,
    ) -> list[Trajectory]:
        """Roll out every task ``group_size`` times; trajectories come grouped, task by task.

        Simulator sessions are named ``{session_prefix}-{rollout}`` (random when no prefix is
        given); a fixed prefix makes simulator answers, error injection included, repeatable."""
        prefix = session_prefix if session_prefix is not None else uuid.uuid4().hex
        group_size = self.config.group_size if group_size is None else group_size
        sampling = self.config.sampling if sampling is None else sampling
        rollouts = []
        for task in tasks:
            start = self.formatter.dialogue(task)
            for _ in range(group_size):
                trajectory = Trajectory(task_id=task.id, prompt_ids=list(start.prompt_ids))
                session_id = f"{prefix}-{len(rollouts)}"
                rollouts.append(
                    _Rollout(task, trajectory, session_id=session_id, dialogue=start.fork(), index=len(rollouts))
                )
        was_training = self.model.training
        self.model.eval()
        try:
            # Every turn's decode steps share one packing of the weights, and each rollout's cache is
            # kept from one turn to the next, so a later turn prefills only the injected text.
            turn_cache = TurnCache()
            # A forced answer may add one turn after the last: only rollouts answering take it.
            turns = self.config.max_turns + (1 if self.config.forces_answers else 0)
            with decode_session(self.model):
                for turn_index in range(turns):
                    active = [r for r in rollouts if not r.done]
                    if not active:
                        break
                    last_turn = turn_index >= self.config.max_turns - 1
                    self._generate_turn(active, sampling, generator, turn_cache, last_turn=last_turn)
                    self._run_tools([r for r in active if not r.done])
        finally:
            self.model.train(was_training)
        for rollout in rollouts:
            self._finish(rollout)
        return [r.trajectory for r in rollouts]

    def _generate_turn(
        self, active: list[_Rollout], sampling: SamplingConfig, generator, turn_cache: TurnCache, *, last_turn: bool
    ) -> None:
        budgets = [self.config.max_response_tokens - len(r.trajectory.response_ids) for r in active]
        generations = sample(
            self.model,
            [r.trajectory.prompt_ids + r.trajectory.response_ids for r in active],
            max_new_tokens=budgets,
            config=sampling,
            stop_token_ids=self.formatter.stop_token_ids,
            pad_id=self.formatter.pad_id,
            stop_strings=self.formatter.stop_strings,
            decode=self.formatter.decode,
            encode=self.formatter.encode,
            generator=generator,
            prefix_lengths=[len(r.trajectory.prompt_ids) for r in active],  # a group's prompt, run once
            turn_cache=turn_cache,
            row_keys=[r.index for r in active],
        )
        for rollout, generation in zip(active, generations):
            trajectory = rollout.trajectory
            trajectory.response_ids += generation.token_ids
            trajectory.response_mask += [1] * len(generation.token_ids)
            trajectory.logprobs += generation.logprobs
            reading = self.formatter.read_turn(generation, rollout.task.tool_names)
            trajectory.response_text += reading.text
            trajectory.turns.append(Turn(text=reading.text))
            trajectory.counters["generated_tokens"] = trajectory.counters.get("generated_tokens", 0) + len(
                generation.token_ids
            )
            out_of_budget = len(trajectory.response_ids) >= self.config.max_response_tokens
            if rollout.answering:
                # The forced answer: a call here is left unanswered, as is one past the limits.
                trajectory.counters["forced_answer"] = 1
                rollout.done = True
                trajectory.truncated = reading.calls_tools or generation.stop_reason == STOP_LENGTH
            elif not reading.calls_tools:
                rollout.done = True  # end of turn (a final answer) or the token budget
                trajectory.truncated = generation.stop_reason == STOP_LENGTH
            else:
                ends = ends_calls(
                    reading.block,
                    rollout.called,
                    last_turn=last_turn,
                    answer_at_limit=self.config.answer_at_limit,
                    answer_on_repeat=self.config.answer_on_repeat,
                )
                if out_of_budget or (last_turn and not ends):
                    rollout.done, trajectory.truncated = True, True  # a call that the limits leave unanswered
                else:
                    rollout.answer_next = ends
                    self._collect_calls(rollout, reading)
                    rollout.called.update(call_signature(call) for call in trajectory.turns[-1].calls)

    def _collect_calls(self, rollout: _Rollout, reading: TurnReading) -> None:
        if reading.block is None:  # the turn closed no block (a stray close tag)
            rollout.pending = [
                malformed_turn_observation("invalid_tool_call/no_block", "no <tool_call> block before </tool_call>")
            ]
            return
        limit = self.config.max_parallel_calls
        if self.formatter.max_calls_per_turn is not None:
            limit = min(limit, self.formatter.max_calls_per_turn)
        calls, rollout.pending = plan_block_calls(reading.block, limit)
        rollout.trajectory.turns[-1].calls = calls

    def _run_tools(self, rollouts: list[_Rollout]) -> None:
        requests: list[CallRequest] = []
        for rollout in rollouts:
            turn = rollout.trajectory.turns[-1]
            requests += [
                CallRequest(turn.calls[i], rollout.task, rollout.session_id)
                for i, slot in enumerate(rollout.pending)
                if slot is None
            ]
        observations = iter(self.environment.execute(requests))
        for rollout in rollouts:
            turn = rollout.trajectory.turns[-1]
            turn.observations = [slot if slot is not None else next(observations) for slot in rollout.pending]
            rollout.pending = []
            notice = self.config.final_answer_notice if rollout.answer_next else None
            rollout.answering, rollout.answer_next = rollout.answer_next, False
            ids, text = self.formatter.turn_results(
                rollout.dialogue, turn.calls, [o.text for o in turn.observations], notice=notice
            )
            trajectory = rollout.trajectory
            trajectory.response_ids += ids
            trajectory.response_mask += [0] * len(ids)
            trajectory.logprobs += [0.0] * len(ids)
            trajectory.response_text += text
            counters = trajectory.counters
            counters["tool_tokens"] = counters.get("tool_tokens", 0) + len(ids)
            counters["tool_errors"] = counters.get("tool_errors", 0) + sum(o.is_error for o in turn.observations)
            counters["sim_latency_ms"] = counters.get("sim_latency_ms", 0.0) + sum(
                o.latency_ms for o in turn.observations
            )
            if len(trajectory.response_ids) >= self.config.max_response_tokens:
                rollout.done, trajectory.truncated = True, True

    def _finish(self, rollout: _Rollout) -> None:
        trajectory = rollout.trajectory
        parsed = parse_tool_calls(trajectory.response_text, rollout.task.tool_names)
        trajectory.final_text = parsed.final_answer
        counters = trajectory.counters
        counters["turns"] = len(trajectory.turns)
        counters["calls"] = trajectory.num_calls
        counters["response_tokens"] = len(trajectory.response_ids)
        counters["repeat_calls"] = repeat_calls(parsed.calls)
        counters.setdefault("forced_answer", 0)


def ends_calls(
    block: ToolCallBlock | None, called: set[str], *, last_turn: bool, answer_at_limit: bool, answer_on_repeat: bool
) -> bool:
    """Whether a turn that calls tools (its last ``block``) is the last before a forced answer: on
    the last turn under ``answer_at_limit``, or under ``answer_on_repeat`` when the block repeats a
    call whose signature is in ``called``. The agent loop and the text-level evaluation loop both ask."""
    if answer_at_limit and last_turn:
        return True
    if not answer_on_repeat or block is None or not block.is_valid:
        return False
    return any(call_signature(call) in called for call in block.calls)


def repeat_calls(calls: Sequence[ToolCall]) -> int:
    """Calls identical (name and arguments) to an earlier call of the same response: the paper's
    tool redundancy, counted in training metrics and evaluations alike."""
    return len(calls) - len({call_signature(call) for call in calls})
