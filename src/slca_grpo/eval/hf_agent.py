"""A local Hugging Face causal LM as a text-level ``ChatAgent`` for the benchmark harnesses."""

from __future__ import annotations

from typing import Any

import torch

from slca_grpo.chat.chat_format import build_formatter, install_chat_template
from slca_grpo.datatypes import tool_name
from slca_grpo.engine import SamplingConfig, sample
from slca_grpo.eval.agent import AgentRequest
from slca_grpo.models.device import Bf16Setting, bf16_autocast, model_device, resolve_bf16


class HFChatAgent:
    """Answers each request with one assistant turn, sampled in batches with a KV cache.

    Turns are rendered and read as in training (``chat_format``, ``chat_template``, ``tool_parser``:
    see :mod:`slca_grpo.chat.chat_format`; ``chat_template`` is Jinja source that replaces the
    tokenizer's own, as ``model.chat_template`` does): in the Hermes format a turn ends at
    ``</tool_call>`` (one block of calls; parallel calls are a JSON list inside it) or at the
    end-of-turn token; through a model's own template at its end-of-turn token, and the answer is
    the turn's Hermes view. Prompts longer than ``max_prompt_tokens`` keep their end (the system
    prompt is cut first), so a long benchmark episode cannot crash the model.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        *,
        name: str = "hf",
        max_new_tokens: int = 512,
        max_prompt_tokens: int | None = None,
        temperature: float = 0.0,
        batch_size: int = 8,
        seed: int = 0,
        bf16: Bf16Setting = "auto",
        chat_format: str = "auto",
        chat_template: str | None = None,
        tool_parser: str = "auto",
    ):
        self.name = name
        self.model = model.eval()
        if chat_template is not None:  # the caller's tokenizer changes only when a template is asked for
            install_chat_template(tokenizer, chat_format=chat_format, chat_template=chat_template)
        self.formatter = build_formatter(tokenizer, chat_format=chat_format, tool_parser=tool_parser)
        self.max_new_tokens = max_new_tokens
        limit = getattr(getattr(model, "config", None), "max_position_embeddings", None) or 4096
        self.max_prompt_tokens = max_prompt_tokens or max(64, limit - max_new_tokens)
        self.sampling = SamplingConfig(temperature=temperature)
        self.batch_size = batch_size
        # bfloat16 autocast while sampling (weights stay as loaded); auto as training's bf16: auto
        self.bf16 = resolve_bf16(bf16, model_device(model), "--bf16")
        self.generator = torch.Generator().manual_seed(seed)
        self.prompts_truncated = 0
        self.last_token_counts: list[int] = []  # tokens generated per request of the last call

    def _prompt(self, request: AgentRequest) -> list[int]:
        ids = self.formatter.prompt_ids(request.messages, request.tools)
        if len(ids) > self.max_prompt_tokens:
            self.prompts_truncated += 1
            ids = ids[-self.max_prompt_tokens :]
        return ids

    def respond(self, requests: list[AgentRequest]) -> list[str]:
        texts: list[str] = []
        self.last_token_counts = []
        for start in range(0, len(requests), self.batch_size):
            chunk = requests[start : start + self.batch_size]
            with bf16_autocast(model_device(self.model), self.bf16):
                generations = sample(
                    self.model,
                    [self._prompt(r) for r in chunk],
                    max_new_tokens=self.max_new_tokens,
                    config=self.sampling,
                    stop_token_ids=self.formatter.stop_token_ids,
                    pad_id=self.formatter.pad_id,
                    stop_strings=self.formatter.stop_strings,
                    decode=self.formatter.decode,
                    encode=self.formatter.encode,
                    generator=self.generator,
                )
            for request, generation in zip(chunk, generations):
                self.last_token_counts.append(len(generation.token_ids))
                names = [n for n in (tool_name(t) for t in request.tools) if n is not None]
                texts.append(self.formatter.answer_text(generation, names))
        return texts
