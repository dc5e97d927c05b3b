"""Stand-in models for exact tests: a causal LM that writes scripted assistant turns, and SmolLM2's
architecture at toy size.

The scripted LM reads its whole context (the "cache" it hands back is simply the ids seen so far), finds the
current assistant turn, and puts all probability on the next token of the scripted text for that
turn, so sampling at any temperature reproduces the script token for token.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import torch

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
