"""Stand-in models for exact tests: a causal LM that writes scripted assistant turns, SmolLM2's
architecture at toy size, and scripted rollouts of a synthetic two-step task.

The scripted LM reads its whole context (the "cache" it hands back is simply the ids seen so far), finds the
current assistant turn, and puts all probability on the next token of the scripted text for that
turn, so sampling at any temperature reproduces the script token for token.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from types import SimpleNamespace

import torch

from slca_grpo.chat.formatter import ChatFormatter
from slca_grpo.data.synthetic import generate_suite, render_gold
from slca_grpo.models.tokenizer import train_tokenizer
from slca_grpo.rollout.environment import ToolEnvironment
from slca_grpo.rollout.loop import AgentLoop, RolloutConfig
from slca_grpo.simulator import SimulatorConfig, build_simulator

ASSISTANT_HEADER = "<|im_start|>assistant\n"


class ScriptedLM(torch.nn.Module):
    def __init__(self, tokenizer, script: Callable[[str, int], str]):
        super().__init__()
        self.tokenizer = tokenizer
        self.script = script  # (prompt text, assistant turn index) -> that turn's text incl. its stop
        self.header = tokenizer.encode(ASSISTANT_HEADER, add_special_tokens=False)
        self.vocab_size = len(tokenizer)
        self.anchor = torch.nn.Parameter(torch.zeros(()))  # gives the module a device and a grad path

    def _headers(self, ids: list[int]) -> list[int]:
        width = len(self.header)
        return [i + width for i in range(len(ids) - width + 1) if ids[i : i + width] == self.header]

    def next_token(self, ids: list[int]) -> int:
        ends = self._headers(ids)
        if not ends:
            return self.tokenizer.eos_token_id
        prompt_end = ends[0]
        turn = len(ends) - 1
        target = self.tokenizer.encode(
            self.script(self.tokenizer.decode(ids[:prompt_end]), turn), add_special_tokens=False
        )
        written = len(ids) - ends[-1]
        return target[written] if written < len(target) else self.tokenizer.eos_token_id

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None, use_cache=False, **_):
        full = input_ids if past_key_values is None else torch.cat([past_key_values, input_ids], dim=1)
        mask = attention_mask if attention_mask is not None else torch.ones_like(full)
        logits = torch.full((full.shape[0], input_ids.shape[1], self.vocab_size), -30.0)
        for row in range(full.shape[0]):
            ids = [int(t) for t, m in zip(full[row], mask[row]) if m]
            logits[row, -1, self.next_token(ids)] = 30.0
        return SimpleNamespace(logits=logits + self.anchor, past_key_values=full if use_cache else None)


def smollm2_shaped_model(vocab: int = 400) -> torch.nn.Module:
    """SmolLM2's architecture at toy size: Llama, grouped-query attention (3 query heads per KV
    head), tied embeddings, random weights."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=48,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=6,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(config).float()


def two_step_setup():
    """A synthetic two-step task, a tokenizer and formatter for it, an environment, and scripted
    policies (one list of turn texts each): both steps right, step 2 wrong, step 1 wrong."""
    task = next(t for t in generate_suite(seed=0, n_train=40, n_test=0).train if t.metadata["kind"] == "two_step")
    (first,), (second,) = task.gold_calls

    def call(name: str, arguments: dict) -> str:
        return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"

    def wrong(c):
        return {k: "WRONG" for k in c.arguments}

    answer = "Done: " + (task.reference_answer or "")[:60] + "<|im_end|>"
    scripts = {
        "both right": [call(first.name, first.arguments), call(second.name, second.arguments), answer],
        "step 2 wrong": [call(first.name, first.arguments), call(second.name, wrong(second)), answer],
        "step 1 wrong": [call(first.name, wrong(first)), call(second.name, second.arguments), answer],
    }
    tokenizer = train_tokenizer([render_gold(task)] * 4 + ["".join(s) for s in scripts.values()] * 4, vocab_size=600)
    environment = ToolEnvironment(build_simulator(SimulatorConfig(backend="schema")))
    return task, tokenizer, ChatFormatter(tokenizer), environment, scripts


def scripted_loop(tokenizer, formatter, environment, turns, group_size=1):
    """An agent loop whose model writes ``turns`` in order (the last one again once they run out)."""
    model = ScriptedLM(tokenizer, lambda prompt, turn: turns[min(turn, len(turns) - 1)])
    config = RolloutConfig(group_size=group_size, max_turns=3, max_response_tokens=2000)
    return AgentLoop(model, formatter, environment, config)
