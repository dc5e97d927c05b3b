"""Tiny Qwen2-style causal LMs, built from scratch with a seeded initialisation (no download)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
from transformers import GenerationConfig, PreTrainedTokenizerBase, Qwen2Config, Qwen2ForCausalLM

from slca_grpo.chat.template import IM_END


@dataclass(frozen=True)
class TinyModelConfig:
    """Size and initialisation of a tiny Qwen2 model (defaults: the "tiny" preset, ~0.9 M params
    with a 4k vocabulary)."""

    num_layers: int = 2
    hidden_size: int = 128
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 384
    max_positions: int = 2048
    tie_embeddings: bool = True
    rope_theta: float = 10000.0
    initializer_range: float = 0.02
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "intermediate_size", "max_positions"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"TinyModelConfig.{name} must be a positive int, got {value!r}")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not divisible by num_heads {self.num_heads}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads {self.num_heads} is not divisible by num_kv_heads {self.num_kv_heads}")
        if (self.hidden_size // self.num_heads) % 2:
            raise ValueError("the head dimension (hidden_size / num_heads) must be even for rotary embeddings")

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> TinyModelConfig:
        """``"tiny"`` (2 layers, hidden 128) or ``"small"`` (4 layers, hidden 256), with overrides."""
        if name not in PRESETS:
            raise ValueError(f"unknown tiny-model preset {name!r}; presets: {', '.join(PRESETS)}")
        return replace(PRESETS[name], **overrides)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


PRESETS: dict[str, TinyModelConfig] = {
    "tiny": TinyModelConfig(),
    "small": TinyModelConfig(num_layers=4, hidden_size=256, num_heads=4, num_kv_heads=2, intermediate_size=768),
}


def qwen2_config(vocab_size: int, config: TinyModelConfig, *, eos_token_id: int, pad_token_id: int) -> Qwen2Config:
    """The ``transformers`` config of a tiny model."""
    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_kv_heads,
        max_position_embeddings=config.max_positions,
        tie_word_embeddings=config.tie_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": config.rope_theta},
        initializer_range=config.initializer_range,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        bos_token_id=None,
        use_cache=True,
    )


def build_tiny_model(
    tokenizer: PreTrainedTokenizerBase, config: TinyModelConfig | None = None, dtype: torch.dtype = torch.float32
) -> Qwen2ForCausalLM:
    """A randomly initialised Qwen2 causal LM sized for ``tokenizer``; same seed, same weights.

    Generation stops at ``<|im_end|>`` (end of an assistant turn) or ``<|endoftext|>``.
    """
    config = config or TinyModelConfig()
    if tokenizer.eos_token_id is None or tokenizer.pad_token_id is None:
        raise ValueError("the tokenizer needs eos and pad tokens (train it with slca_grpo.models.train_tokenizer)")
    hf_config = qwen2_config(
        len(tokenizer), config, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )
    # A private generator state: building a model must not move the caller's global RNG.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = Qwen2ForCausalLM(hf_config)
    model = model.to(dtype)
    stop_ids = [tokenizer.eos_token_id]
    im_end = tokenizer.convert_tokens_to_ids(IM_END)
    if isinstance(im_end, int) and im_end != tokenizer.unk_token_id:
        stop_ids.insert(0, im_end)
    model.generation_config = GenerationConfig(eos_token_id=stop_ids, pad_token_id=tokenizer.pad_token_id)
    model.eval()
    return model


def count_parameters(model: torch.nn.Module) -> int:
    """Distinct trainable parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
