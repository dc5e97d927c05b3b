"""A memory estimate made before training, so a run that cannot fit says so instead of running out
of memory mid-step.

Estimate (bytes) for a model of N parameters, T of them trainable, in ``model.dtype`` (b bytes):

- weights N·b, plus a second N·b for the frozen reference (full fine-tuning with a KL term; a LoRA
  policy's reference is itself with adapters off);
- gradients T·b and AdamW's two moments 2·T·b;
- activations of one micro-batch, kept for the backward pass: rollouts × tokens × layers ×
  hidden × 18 bytes at bf16 (× 2 at float32). That is the usual per-layer count (attention
  inputs and outputs, MLP intermediates) with SDPA, which keeps no S×S matrix;
- the generation KV cache: rollouts in flight × tokens × layers × 2 × kv_heads × head_dim × b;
- logits of the learnable tokens: rollouts × response tokens × vocab × 4.

It is an estimate: allocator fragmentation, CUDA context (~0.5 GB) and framework buffers come on
top, hence the safety margin.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from slca_grpo.config import ConfigError
from slca_grpo.engine import malloc_stats

PROMPT_ALLOWANCE_TOKENS = 1024  # prompts are not known before the data is read: a typical bound
ACTIVATION_BYTES_PER_ELEMENT = 18  # per token, layer and hidden unit at 2-byte precision
SAFETY_MARGIN = 1.2


@dataclass(frozen=True)
class MemoryEstimate:
    weights: float
    reference: float
    gradients: float
    optimizer: float
    activations: float
    kv_cache: float
    logits: float

    @property
    def total(self) -> float:
        return (
            self.weights + self.reference + self.gradients + self.optimizer + self.activations + self.kv_cache
        ) + self.logits

    def describe(self) -> str:
        parts = {k: v for k, v in vars(self).items() if v >= 2**20}
        return ", ".join(f"{k} {v / 2**30:.2f} GB" for k, v in parts.items())


def estimate_memory(
    model: torch.nn.Module,
    *,
    rollouts: int,
    response_tokens: int,
    micro_batch_rollouts: int,
    reference_copy: bool,
) -> MemoryEstimate:
    parameters = list(model.parameters())
    total = sum(p.numel() for p in parameters)
    trainable = sum(p.numel() for p in parameters if p.requires_grad)
    width = parameters[0].element_size() if parameters else 4
    config = getattr(model, "config", None)
    layers = int(getattr(config, "num_hidden_layers", 0) or 0)
    hidden = int(getattr(config, "hidden_size", 0) or 0)
    heads = int(getattr(config, "num_attention_heads", 1) or 1)
    kv_heads = int(getattr(config, "num_key_value_heads", heads) or heads)
    vocab = int(getattr(config, "vocab_size", 0) or 0)
    tokens = PROMPT_ALLOWANCE_TOKENS + response_tokens
    head_dim = hidden // heads if heads else 0
    rows = min(micro_batch_rollouts, rollouts)
    return MemoryEstimate(
        weights=total * width,
        reference=total * width if reference_copy else 0.0,
        gradients=trainable * width,
        optimizer=2 * trainable * width,
        activations=rows * tokens * layers * hidden * ACTIVATION_BYTES_PER_ELEMENT * width / 2,
        kv_cache=rollouts * tokens * layers * 2 * kv_heads * head_dim * width,
        logits=rows * response_tokens * vocab * 4,
    )


def available_bytes(device: torch.device) -> float:
    """Free memory on ``device``: CUDA's free bytes, or the host's available RAM plus what this
    process's heap holds freed (``train.keep_freed_memory`` keeps it after SFT, say, and the run
    reuses it; the system counts it as used)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return float(free)
    stats = malloc_stats()
    return _host_available() + (stats.heap_free if stats is not None else 0)


def _host_available() -> float:
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def check_fits(
    estimate: MemoryEstimate, device: torch.device, *, available: float | None = None, resident: bool = True
) -> None:
    """ConfigError (before any step) when the estimate, with a margin, exceeds what is free.
    ``resident``: the weights (and reference) are loaded already, so free memory excludes them."""
    free = available_bytes(device) if available is None else available
    needed = (estimate.total - (estimate.weights + estimate.reference if resident else 0.0)) * SAFETY_MARGIN
    if needed > free:
        raise ConfigError(
            f"this run needs about {needed / 2**30:.1f} GB on {device} ({estimate.describe()}) but only "
            f"{free / 2**30:.1f} GB is free; lower rl.micro_batch_rollouts or rollout.group_size, "
            "use model.lora.r > 0, model.dtype: bfloat16, or a larger device"
        )
