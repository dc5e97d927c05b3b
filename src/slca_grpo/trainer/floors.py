"""The floor of a training step: the least time the hardware could take for the work a step did.

Work is counted from the step's real tokens (no padding), with each prompt paid once per group:

- compute: 2 FLOPs per weight per token through the layers' matrix products, the output head
  only where a log-prob is read, and causal attention (4 · q_dim FLOPs per query-key pair per
  layer: QKᵀ and AV); a backward pass is twice its forward;
- decoding: every step reads all the weights and each live row's KV cache, so a decode step costs
  the larger of its bytes over the memory bandwidth and its FLOPs over the matmul rate.

Rates are measured on the machine (``slca bench``): the matrix-product rate at the model's own
shapes in the precision the run uses, and the memory read bandwidth. A step's floor is its work
at those rates; measured time over floor says how far from the hardware each phase runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from slca_grpo.algos.segments import learnable_runs


@dataclass(frozen=True)
class ModelShape:
    """What the floors need to know about a decoder-only transformer."""

    layers: int
    hidden: int
    q_dim: int  # attention heads × head dim
    kv_dim: int  # key-value heads × head dim
    vocab: int
    body_params: int  # weights of the layers' matrix products (the work per token)
    head_params: int  # hidden × vocab: the output projection, applied only where logits are read
    weight_bytes: int  # every weight a decode step reads (body, head, norms), as stored

    @classmethod
    def of(cls, model) -> ModelShape:
        """The shape of a transformers causal LM (Llama, Qwen2/3, Mistral, GPT-style)."""
        import torch

        config = model.config
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        head = model.get_output_embeddings()
        head_ids = {id(p) for p in head.parameters()} if head is not None else set()
        body = sum(
            m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear) and id(m.weight) not in head_ids
        )
        head_params = config.hidden_size * config.vocab_size
        embeddings = model.get_input_embeddings()
        embedding_ids = {id(p) for p in embeddings.parameters()} - head_ids if embeddings is not None else set()
        read = sum(p.numel() * p.element_size() for p in model.parameters() if id(p) not in embedding_ids)
        if head is not None and not head_ids - embedding_ids:  # tied: the head is the embedding matrix
            read += head_params * next(head.parameters()).element_size()
        return cls(
            layers=config.num_hidden_layers,
            hidden=config.hidden_size,
            q_dim=heads * head_dim,
            kv_dim=kv_heads * head_dim,
            vocab=config.vocab_size,
            body_params=body,
            head_params=head_params,
            weight_bytes=read,
        )

    def kv_bytes_per_token(self, element_bytes: int) -> int:
        return self.layers * 2 * self.kv_dim * element_bytes


@dataclass(frozen=True)
class Rates:
    """The machine: matrix-product FLOP/s at the model's shapes and memory read bytes/s."""

    matmul_flops: float
    memory_bytes: float
    activation_bytes: int = 4  # 4 in float32, 2 under bf16 autocast (the KV cache's elements)


def causal_pairs(start: int, end: int) -> int:
    """Query-key pairs of causal attention for the tokens at positions ``start..end-1``, each
    attending to itself and everything before it."""
    return (end * (end + 1) - start * (start + 1)) // 2


def forward_flops(shape: ModelShape, tokens: int, head_tokens: int, pairs: int) -> float:
    """FLOPs of one forward pass over ``tokens`` tokens with ``pairs`` attention pairs and the output
    head applied at ``head_tokens`` positions."""
    return (
        2.0 * shape.body_params * tokens
        + 2.0 * shape.head_params * head_tokens
        + 4.0 * shape.q_dim * shape.layers * pairs
    )


@dataclass(frozen=True)
class Group:
    """One prompt and the response masks of its rollouts (1: sampled, 0: injected tokens)."""

    prompt_tokens: int
    responses: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class PhaseFloor:
    seconds: float
    flops: float
    bytes: float = 0.0
    tokens: int = 0  # tokens the phase computes (prefilled, decoded or trained)
    detail: str = ""


def rollout_floor(shape: ModelShape, rates: Rates, groups: Sequence[Group]) -> dict[str, PhaseFloor]:
    """Prefill (each prompt once per group, then every injected span once, each reading its logits
    once) and decode (all rows of a turn decode together; a step reads the weights and the live
    rows' KV caches), with the cache kept between turns."""
    prefill_tokens = prefill_pairs = prefill_heads = 0
    # turn index -> [(context before the turn, sampled tokens in the turn)] over every row
    turns: dict[int, list[tuple[int, int]]] = {}
    for group in groups:
        prompt = group.prompt_tokens
        prefill_tokens += prompt
        prefill_pairs += causal_pairs(0, prompt)
        prefill_heads += 1
        for mask in group.responses:
            previous_end = 0
            for turn, (start, end) in enumerate(learnable_runs(mask)):
                if start > previous_end:  # an injected span (tool responses, template) before this turn
                    prefill_tokens += start - previous_end
                    prefill_pairs += causal_pairs(prompt + previous_end, prompt + start)
                    prefill_heads += 1
                turns.setdefault(turn, []).append((prompt + start, end - start))
                previous_end = end
    prefill_flops = forward_flops(shape, prefill_tokens, prefill_heads, prefill_pairs)
    kv_token = shape.kv_bytes_per_token(rates.activation_bytes)
    decode_seconds = decode_flops = decode_bytes = 0.0
    steps = memory_bound = 0
    for rows in turns.values():
        # The first token of a turn comes from the prefill (or the previous step); each further one
        # is a decode step over the rows still sampling.
        for step in range(max(length for _, length in rows) - 1):
            live = [context + step for context, length in rows if length - 1 > step]
            flops = forward_flops(shape, len(live), len(live), sum(live))
            read = shape.weight_bytes + kv_token * sum(live)
            by_memory, by_compute = read / rates.memory_bytes, flops / rates.matmul_flops
            memory_bound += by_memory >= by_compute
            decode_seconds += max(by_memory, by_compute)
            decode_flops += flops
            decode_bytes += read
            steps += 1
    decoded = sum(length for rows in turns.values() for _, length in rows)
    bound = "memory" if steps and memory_bound * 2 >= steps else "compute"
    return {
        "prefill": PhaseFloor(
            prefill_flops / rates.matmul_flops,
            prefill_flops,
            tokens=prefill_tokens,
            detail=f"{prefill_tokens:,} tokens",
        ),
        "decode": PhaseFloor(
            decode_seconds,
            decode_flops,
            decode_bytes,
            tokens=decoded,
            detail=f"{steps:,} steps, {decoded:,} tokens, {bound}-bound",
        ),
    }


def train_floor(
    shape: ModelShape, rates: Rates, groups: Sequence[Group], *, trained_passes: int = 1, frozen_passes: int = 0
) -> PhaseFloor:
    """The RL update: ``trained_passes`` forward + backward passes (PPO epochs) and
    ``frozen_passes`` forward-only ones (old and reference log-probs), each running a group's
    prompt once and every response on top of it, the head only at sampled tokens."""
    tokens = pairs = heads = 0
    for group in groups:
        prompt = group.prompt_tokens
        tokens += prompt
        pairs += causal_pairs(0, prompt)
        for mask in group.responses:
            tokens += len(mask)
            pairs += causal_pairs(prompt, prompt + len(mask))
            heads += sum(mask)
    forward = forward_flops(shape, tokens, heads, pairs)
    flops = forward * (3 * trained_passes + frozen_passes)
    passes = f"{trained_passes} forward+backward" + (f", {frozen_passes} forward" if frozen_passes else "")
    return PhaseFloor(flops / rates.matmul_flops, flops, tokens=tokens, detail=f"{tokens:,} tokens × ({passes})")


def sft_floor(shape: ModelShape, rates: Rates, examples: Sequence[tuple[int, int]]) -> PhaseFloor:
    """One SFT step over ``(tokens, learnable tokens)`` examples: forward + backward, the head only
    at learnable tokens."""
    tokens = sum(length for length, _ in examples)
    forward = forward_flops(
        shape, tokens, sum(learn for _, learn in examples), sum(causal_pairs(0, n) for n, _ in examples)
    )
    return PhaseFloor(3 * forward / rates.matmul_flops, 3 * forward, tokens=tokens, detail=f"{tokens:,} tokens")
