"""Shared pieces of the verl tests: verl's own config, a tokenizer, tasks, a scripted LLM server.

Everything verl provides is verl's real code; the one stand-in is the LLM server (vLLM/SGLang need
a GPU), replaced by ``ScriptedServer``, an object with the interface verl's agent loop calls.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig

from slca_grpo.chat import render_chat
from slca_grpo.data.synthetic import generate_tasks, render_gold
from slca_grpo.datatypes import Task
from slca_grpo.integrations.verl.rows import task_to_row
from slca_grpo.models.tokenizer import train_tokenizer

VERL_DEFAULTS = (
    "actor_rollout_ref.rollout.multi_turn.enable=true",
    "actor_rollout_ref.rollout.multi_turn.format=slca",
    "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=4",
    "actor_rollout_ref.rollout.multi_turn.max_parallel_calls=4",
    "actor_rollout_ref.rollout.multi_turn.max_tool_response_length=1000000",
    "actor_rollout_ref.rollout.prompt_length=2048",
    "actor_rollout_ref.rollout.response_length=1024",
    "actor_rollout_ref.rollout.n=3",
)


def verl_config(*overrides: str) -> DictConfig:
    """verl's own ``ppo_trainer`` config (hydra-composed, as ``verl.trainer.main_ppo`` does) with overrides."""
    import verl.trainer.config as verl_configs
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=os.path.dirname(verl_configs.__file__), version_base=None):
        return compose("ppo_trainer", overrides=[*VERL_DEFAULTS, *overrides])


def single_call_tasks(count: int, seed: int = 0) -> list[Task]:
    """Synthetic train tasks with exactly one gold call answered by a fixture."""
    tasks = [
        task
        for task in generate_tasks(seed, 200, "train")
        if len(task.flat_gold_calls) == 1 and task.metadata.get("fixtures")
    ]
    assert len(tasks) >= count
    return tasks[:count]


@pytest.fixture(scope="session")
def verl_tokenizer():
    """Our tiny tokenizer (it carries the Hermes chat template), on the synthetic corpus."""
    tasks = generate_tasks(0, 120, "train")
    corpus = [render_gold(task) for task in tasks] + [render_chat(task.messages, task.tools) for task in tasks]
    return train_tokenizer(corpus, vocab_size=1024)


@pytest.fixture(scope="session")
def tokenizer_dir(verl_tokenizer, tmp_path_factory) -> Path:
    """The tokenizer saved as a model folder, for the verl parts that load one by path."""
    folder = tmp_path_factory.mktemp("tokenizer")
    verl_tokenizer.save_pretrained(folder)
    return folder


def row_kwargs(task: Task, index: int, uid: str, rollout: int) -> dict[str, Any]:
    """What verl's agent-loop worker passes a loop's ``run`` for one rollout of a dataset row."""
    row = task_to_row(task, index)
    return {
        "raw_prompt": row["prompt"],
        "extra_info": row["extra_info"],
        "data_source": row["data_source"],
        "reward_model": row["reward_model"],
        "index": index,
        "uid": uid,
        "session_id": rollout,
        "global_steps": 0,
        "tools_kwargs": {},
    }


class ScriptedServer:
    """verl's LLM server interface (``generate``) answering each turn from a script of texts."""

    def __init__(self, tokenizer: Any, script: Callable[[int], str]) -> None:
        self.tokenizer = tokenizer
        self.script = script
        self.prompts: list[list[int]] = []

    async def generate(self, *, request_id: str, prompt_ids: list[int], sampling_params: dict, **_: Any):
        from verl.workers.rollout.replica import TokenOutput

        turn = len(self.prompts)
        self.prompts.append(list(prompt_ids))
        ids = self.tokenizer.encode(self.script(turn), add_special_tokens=False)
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")


def make_agent_loop(config: DictConfig, tokenizer: Any, server: ScriptedServer):
    """Our agent loop, built the way verl's agent-loop worker builds one (inside a running event loop)."""
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from slca_grpo.integrations.verl.agent_loop import SLCAToolAgentLoop

    return SLCAToolAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        hf_model_type="qwen2",
    )


def run_rollout(config: DictConfig, tokenizer: Any, script: Callable[[int], str], kwargs: dict[str, Any]):
    """One rollout of our agent loop against a scripted server: ``(AgentLoopOutput, server)``."""
    server = ScriptedServer(tokenizer, script)

    async def main():
        loop = make_agent_loop(config, tokenizer, server)
        return await loop.run({"temperature": 1.0}, **kwargs)

    return asyncio.run(main()), server
