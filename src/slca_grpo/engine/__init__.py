"""The inference engine: sampling, prefill and token log-probs of a causal LM, fast on a CPU.

The one door into the engine for the rest of the package; its modules are internals:

- :func:`sample` — batched KV-cached sampling, token-exact, with each token's log-prob
  (:mod:`.sampling`; the in-place cache and attention shortcuts :mod:`.kv_cache`, the fused
  decode step :mod:`.fused_decode`, packed weights :mod:`.packed_linear`, the C kernels
  :mod:`.native`). :func:`decode_session` keeps one packing of the weights across many calls.
- :class:`TurnCache` — each rollout's cache kept from one turn to the next, so that a later turn
  prefills only what was appended (:mod:`.turn_cache`).
- :func:`prefill_shared` — run each distinct prompt once and hand its cache to every row.
- :func:`token_logprobs` — log-probs of given tokens (:mod:`.logprobs`, packed passes
  :mod:`.packed_attention`, the training-time attention :mod:`.attention`).
- :func:`keep_freed_memory` — host-memory tuning for long CPU runs, :func:`malloc_stats` what the
  heap keeps (:mod:`.host_memory`);
  :func:`native_kernels_available`, :func:`use_native_kernels`, :func:`kernel_calls` — whether
  this process has the C kernels, may use them, and which it used.
"""

from slca_grpo.datatypes import STOP_EOS, STOP_LENGTH, STOP_STRING, Generation
from slca_grpo.engine import native as _native
from slca_grpo.engine.host_memory import keep_freed_memory, malloc_stats
from slca_grpo.engine.logprobs import token_logprobs
from slca_grpo.engine.packed_linear import packed_linears as decode_session
from slca_grpo.engine.sampling import (
    MIN_TEMPERATURE,
    NonFiniteLogits,
    SamplingConfig,
    distinct_rows,
    prefill_shared,
    sample,
)
from slca_grpo.engine.turn_cache import TurnCache

__all__ = [
    "MIN_TEMPERATURE",
    "NonFiniteLogits",
    "STOP_EOS",
    "STOP_LENGTH",
    "STOP_STRING",
    "Generation",
    "SamplingConfig",
    "TurnCache",
    "decode_session",
    "distinct_rows",
    "keep_freed_memory",
    "kernel_calls",
    "malloc_stats",
    "native_kernels_available",
    "prefill_shared",
    "sample",
    "token_logprobs",
    "use_native_kernels",
]


def use_native_kernels(on: bool) -> None:
    """Whether this process decodes through the C kernels (the default), beside ``SLCA_NATIVE_KERNELS``
    (read here too, so that a value that is neither on nor off is refused before any work)."""
    _native.switch(on)
    _native.enabled()


def kernel_calls() -> dict[str, int]:
    """How many calls each C kernel served in this process: which kernels ran."""
    return dict(_native.calls)


def native_kernels_available() -> bool:
    """Whether the C kernels are built and loaded here (building them on first use)."""
    return _native.library() is not None
