"""One decode step of a Llama or Qwen2 model in a few large operations, for the sampler on a CPU.

Through ``transformers``' layers a one-token decode step runs some 270 small operations per layer
(views, casts, the attention interface, mask and cache plumbing) around its seven matrix products;
on a 2-core CPU they cost about as much as the products. :class:`FusedDecoder` runs the same layers
directly: the query, key and value projections as one product and gate and up as another, with the
joined weights packed once (as :mod:`packed_linear` packs single layers), each RMSNorm as
one operation, the rotary embedding on queries and keys together, and attention through the
sampler's own one-token attention (:func:`kv_cache.grouped_decode_attention`, which also joins a
shared prompt). It computes what the layers compute, in the same precisions — bfloat16 products
under bf16 autocast with a float32 residual stream, float32 otherwise: on SmolLM2 under bf16 autocast
its logits were bit-identical to the layers' (2-core EPYC with avx512_bf16), in float32 equal to
rounding. ``benchmarks/kv_cache.py`` (the ``fused`` way) measures it.

For Llama and Qwen2 models with float32 weights in plain ``nn.Linear`` layers (not LoRA-wrapped), a
SiLU MLP and the rotary embedding over the whole head, at least ``FUSED_MIN_HIDDEN`` wide, decoding
any number of rows on a CPU over the sampler's in-place cache with its attention switched in;
any other model or setting keeps the layers' own forward.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch

from slca_grpo.engine import native
from slca_grpo.engine.kv_cache import ATTENTION_NAME, GrowingLayer, grouped_decode_attention
from slca_grpo.engine.native import Panels
from slca_grpo.engine.packed_linear import MAX_ROWS, pack_linears, packed_product, packing_available, weight_state

# As for shared prompts: the reader and the tiny models (128) and up. On the reader, 384 rollouts
# a step: rollouts 39.6 s -> 25.1 s with both (2-core EPYC, AVX2; docs/experiments/rollouts.md). Narrower models
# (the tests' 32-wide ones) keep the layers' forward.
FUSED_MIN_HIDDEN = 128
SUPPORTED_MODEL_TYPES = ("llama", "qwen2")

_PROJECTIONS = (
    ("self_attn", "q_proj"),
    ("self_attn", "k_proj"),
    ("self_attn", "v_proj"),
    ("self_attn", "o_proj"),
    ("mlp", "gate_proj"),
    ("mlp", "up_proj"),
    ("mlp", "down_proj"),
)


@dataclass
class _Packed:
    weight: torch.Tensor | Panels  # the C kernel's panels (float32) or oneDNN's packed layout
    bias: torch.Tensor | None


@dataclass
class _LayerWeights:
    qkv: _Packed
    out: _Packed
    gate_up: _Packed
    down: _Packed


@dataclass
class _Weights:
    state: tuple  # (data pointer, version) of every source tensor: a changed weight repacks
    layers: list[_LayerWeights]
    head: _Packed


# model -> (dtype, more than MAX_ROWS rows) -> packed weights, kept between sampler calls while
# the weights stay as they were
_packed_models: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _linears(model: torch.nn.Module) -> list[torch.nn.Linear]:
    inner = model.model
    linears = [getattr(getattr(layer, part), name) for layer in inner.layers for part, name in _PROJECTIONS]
    return [*linears, model.get_output_embeddings()]


def supports_fused_decode(model: torch.nn.Module, *, min_hidden: int | None = None) -> bool:
    """Whether :class:`FusedDecoder` computes this model's decode steps (see the module's docstring)."""
    config = getattr(model, "config", None)
    inner = getattr(model, "model", None)
    if config is None or inner is None or getattr(config, "model_type", None) not in SUPPORTED_MODEL_TYPES:
        return False
    if config.hidden_size < (FUSED_MIN_HIDDEN if min_hidden is None else min_hidden) or not packing_available():
        return False
    if getattr(config, "hidden_act", None) != "silu" or not all(
        hasattr(inner, name) for name in ("embed_tokens", "layers", "norm", "rotary_emb")
    ):
        return False
    try:
        linears = _linears(model)
    except AttributeError:
        return False
    if not all(type(linear) is torch.nn.Linear for linear in linears):  # LoRA layers keep their forward
        return False
    parameters = [p for linear in linears for p in linear.parameters()]
    if not all(p.dtype == torch.float32 and p.device.type == "cpu" for p in parameters):
        return False
    for layer in inner.layers:
        attention = layer.self_attn
        if hasattr(attention, "q_norm") or not hasattr(attention, "scaling"):  # Qwen3-style norms
            return False
        if not all(
            hasattr(norm, "variance_epsilon") for norm in (layer.input_layernorm, layer.post_attention_layernorm)
        ):
            return False
    # The rotary embedding must turn the whole head (no partial rotary factor).
    probe = torch.zeros(1, 1, config.hidden_size)
    cos, _ = inner.rotary_emb(probe, torch.zeros(1, 1, dtype=torch.long))
    return cos.shape[-1] == inner.layers[0].self_attn.head_dim


def _pack(linears: list[torch.nn.Linear], dtype: torch.dtype, rows: int) -> _Packed:
    biases = [linear.bias for linear in linears]
    bias = None
    if any(b is not None for b in biases):
        bias = torch.cat(
            [b.detach() if b is not None else torch.zeros(linear.out_features) for b, linear in zip(biases, linears)]
        ).to(dtype)
    return _Packed(pack_linears(linears, dtype, rows), bias)


def _packed_weights(model: torch.nn.Module, dtype: torch.dtype, rows: int) -> _Weights:
    linears = _linears(model)
    state = weight_state(p for linear in linears for p in linear.parameters())
    by_layout = _packed_models.setdefault(model, {})
    # The C kernel's float32 panels take any rows; oneDNN's packing is for up to MAX_ROWS.
    layout = (dtype, rows > MAX_ROWS and (dtype != torch.float32 or native.library() is None))
    cached = by_layout.get(layout)
    if cached is not None and cached.state == state:
        return cached
    layers = []
    for layer in model.model.layers:
        attention, mlp = layer.self_attn, layer.mlp
        layers.append(
            _LayerWeights(
                qkv=_pack([attention.q_proj, attention.k_proj, attention.v_proj], dtype, rows),
                out=_pack([attention.o_proj], dtype, rows),
                gate_up=_pack([mlp.gate_proj, mlp.up_proj], dtype, rows),
                down=_pack([mlp.down_proj], dtype, rows),
            )
        )
    weights = _Weights(state, layers, _pack([linears[-1]], dtype, rows))
    by_layout[layout] = weights
    return weights


def _linear(x: torch.Tensor, packed: _Packed) -> torch.Tensor:
    return packed_product(x, packed.weight, packed.bias)


class FusedDecoder:
    """The one-token decode steps of one sampler call (weights are fixed while it samples)."""

    def __init__(self, model: torch.nn.Module, rows: int):
        self.model = model
        bf16 = torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
        self.dtype = torch.bfloat16 if bf16 else torch.float32
        self.weights = _packed_weights(model, self.dtype, rows)
        config = model.config
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = model.model.layers[0].self_attn.head_dim

    @classmethod
    def for_sampler(cls, model: torch.nn.Module, cache, rows: int) -> FusedDecoder | None:
        """A decoder for this sampler call, or None where the layers' forward must run: an
        unsupported model, no in-place cache, or the sampler's attention not in place (it is
        switched in only for a model on SDPA). Any number of rows: the joined products pay off at
        a few rows and at hundreds (float32 in the C kernel's panels; otherwise oneDNN's packed
        weights up to ``MAX_ROWS`` rows, plain joined weights beyond)."""
        if torch.is_grad_enabled():
            return None
        layers = getattr(cache, "layers", None)
        if not layers or not all(isinstance(layer, GrowingLayer) and layer.is_initialized for layer in layers):
            return None
        if getattr(model.config, "_attn_implementation", None) != ATTENTION_NAME:
            return None
        if torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") != torch.bfloat16:
            return None
        if not supports_fused_decode(model) or len(layers) != len(model.model.layers):
            return None
        return cls(model, rows)

    def step(self, cache, tokens: torch.Tensor, attention: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Logits [rows, vocab] of one token per row (``tokens`` [rows]) at ``positions`` [rows, 1],
        given the mask over the cache and this token (``attention`` [rows, cached + 1]); the new
        keys and values are appended to ``cache`` (the sampler's, prefilled)."""
        inner, dtype, dim = self.model.model, self.dtype, self.head_dim
        rows, heads, kv_heads = len(tokens), self.heads, self.kv_heads
        hidden = inner.embed_tokens(tokens)  # [rows, hidden], float32: the residual stream
        cos, sin = inner.rotary_emb(hidden[:, None], positions)  # [rows, 1, head dim]
        half = dim // 2
        # rotate_half(x) * sin + x * cos, written out per half (the same float operations).
        cos, sin = cos[..., :half], sin[..., :half]
        mask = attention.bool()[:, None, None, :]
        width = hidden.shape[-1]
        for module, layer, cached in zip(inner.layers, self.weights.layers, cache.layers):
            normed = torch.nn.functional.rms_norm(
                hidden, (width,), module.input_layernorm.weight, module.input_layernorm.variance_epsilon
            )
            qkv = _linear(normed.to(dtype), layer.qkv)
            turned = qkv[:, : (heads + kv_heads) * dim].view(rows, heads + kv_heads, dim).float()
            first, second = turned[..., :half], turned[..., half:]
            turned = torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)
            query = turned[:, :heads, None]  # [rows, heads, 1, head dim]
            key = turned[:, heads:, None]
            value = qkv[:, (heads + kv_heads) * dim :].view(rows, kv_heads, 1, dim)
            keys, values = cached.update(key, value)
            out, _ = grouped_decode_attention(
                module.self_attn, query, keys, values, mask, scaling=module.self_attn.scaling
            )
            hidden = hidden + _linear(out.reshape(rows, heads * dim).to(dtype), layer.out)
            normed = torch.nn.functional.rms_norm(
                hidden,
                (width,),
                module.post_attention_layernorm.weight,
                module.post_attention_layernorm.variance_epsilon,
            )
            gate_up = _linear(normed.to(dtype), layer.gate_up)
            inner_width = gate_up.shape[-1] // 2
            hidden = hidden + _linear(
                torch.nn.functional.silu(gate_up[:, :inner_width]) * gate_up[:, inner_width:], layer.down
            )
        normed = torch.nn.functional.rms_norm(hidden, (width,), inner.norm.weight, inner.norm.variance_epsilon)
        return _linear(normed.to(dtype), self.weights.head)
