"""Linear layers with weights packed once while a rollout decodes on a CPU.

A decode step multiplies a few rows (one per live rollout) by every weight matrix. Given weights in
their plain layout, that product runs far under memory speed on a CPU; with the weights packed once
into oneDNN's blocked layout the same product ran ~1.5x faster in bfloat16 (bit-identical on a
2-core EPYC with avx512_bf16) and ~2x in float32 (equal to rounding), at 16 rows of SmolLM2's
shapes; a whole decode step 1.12x and 1.32x (``benchmarks/kv_cache.py``, the ``packed`` way).
Float32 weights now go to the C kernel of :mod:`native` where it is built (its own panels, each
weight prefetched as it streams from memory): a decode step's products 1.4x oneDNN's on an
emulated AVX2-only CPU and 1.25x on AVX-512, and a prefill's 840 rows 1.2x and 2.3x the plain
product (MKL), so in float32 it takes any number of rows (``benchmarks/small_product.py``).
bfloat16 weights go to oneDNN, for inputs of at most ``max_rows`` rows (a prefill keeps the plain
product). Weights are fixed while a rollout samples: a bfloat16 copy is packed at the first call
that uses it and kept until the block ends, a float32 one (:func:`linear_panels`) kept while the
layer lives and shared with the fused decode step; either is repacked when the weight changes.

Only layers at least ``min_features`` wide are packed (at the tiny models' width 128 it was mixed:
two of three layer shapes slower packed, the output head faster; they stay plain, which also
keeps the quick demo's float32 numbers as they were), only without autograd, and only where
this build of torch has the ops.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import NamedTuple

import torch

from slca_grpo.engine import native

MIN_FEATURES = 512  # SmolLM2's 576 and up; the tiny models (128) keep the plain product
MAX_ROWS = 64  # decode steps; in bfloat16 a prefill's hundreds of rows keep the plain product

_active: ContextVar[frozenset[int]] = ContextVar("packed_linear_models", default=frozenset())
# nn.Linear -> (weight state, its float32 panels for the C kernel)
_float32_panels: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def packing_available() -> bool:
    ops = getattr(torch.ops, "mkldnn", None)
    return bool(torch.backends.mkldnn.is_available()) and ops is not None and hasattr(ops, "_linear_pointwise")


@functools.cache
def onednn_packs(dtype: torch.dtype) -> bool:
    """Whether oneDNN packs weights in ``dtype`` on this CPU: bfloat16 packing needs AVX-512
    BW/VL/DQ or AVX-NE-CONVERT, and on an AVX2-only CPU oneDNN refuses it (asked once, of oneDNN)."""
    try:
        torch.ops.mkldnn._reorder_linear_weight(torch.zeros(8, 8, dtype=dtype), 1)
    except RuntimeError:
        return False
    return True


class PlainWeight(NamedTuple):
    """Joined weights that oneDNN could not pack, for a plain product in their dtype."""

    weight: torch.Tensor


def weight_state(tensors) -> tuple:
    """What identifies the values of ``tensors`` now: a tensor written in place bumps its version,
    a replaced one has another address. A packed copy made under another state is stale."""
    return tuple((t.data_ptr(), t._version) for t in tensors if t is not None)


def linear_panels(linear: torch.nn.Linear) -> native.Panels | None:
    """``linear``'s float32 weight packed for the C kernel, made once and kept while the layer lives
    and its weight is unchanged (shared by the fused decode step and the layers' forward, so a model
    holds one packed copy), or None where the kernel is not built."""
    state = weight_state((linear.weight,))
    cached = _float32_panels.get(linear)
    if cached is not None and cached[0] == state:
        return cached[1]
    panels = native.pack_panels(linear.weight.detach())
    if panels is not None:
        _float32_panels[linear] = (state, panels)
    return panels


def pack_linears(
    linears: Sequence[torch.nn.Linear], dtype: torch.dtype, rows: int
) -> torch.Tensor | native.Panels | PlainWeight:
    """The weights of ``linears`` (one input width) joined for one product in ``dtype`` for inputs
    of about ``rows`` rows: float32 in the C kernel's panels where it is built (:mod:`native`; any
    number of rows), else in oneDNN's layout for up to ``MAX_ROWS`` rows, or plain (more rows, or
    where oneDNN cannot pack ``dtype`` on this CPU)."""
    if dtype == torch.float32:
        panels = [linear_panels(linear) for linear in linears]
        if all(p is not None for p in panels):
            return panels[0] if len(panels) == 1 else native.join_panels(panels)
    weight = torch.cat([linear.weight.detach() for linear in linears])
    if rows > MAX_ROWS or not onednn_packs(dtype):
        return PlainWeight(weight.to(dtype))
    return torch.ops.mkldnn._reorder_linear_weight(weight.to(dtype), rows)


def packed_product(
    x: torch.Tensor, weight: torch.Tensor | native.Panels | PlainWeight, bias: torch.Tensor | None
) -> torch.Tensor:
    """``x @ weight.T + bias`` for weights from :func:`pack_linears` (``x`` in their dtype)."""
    if isinstance(weight, native.Panels):
        return native.small_product(x, weight, bias)
    if isinstance(weight, PlainWeight):
        return torch.nn.functional.linear(x, weight.weight, bias)
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


class _PackedLinear:
    """The forward of one ``nn.Linear`` that uses a packed weight when it applies."""

    def __init__(self, module: torch.nn.Linear, plain: Callable, max_rows: int):
        self.module, self.plain, self.max_rows = module, plain, max_rows
        self.packed: dict[torch.dtype, tuple[tuple, torch.Tensor | native.Panels, torch.Tensor | None]] = {}
        self.calls = 0  # products that used a packed weight (read by tests)

    def _dtype(self, x: torch.Tensor) -> torch.dtype | None:
        if torch.is_autocast_enabled("cpu"):
            return torch.bfloat16 if torch.get_autocast_dtype("cpu") == torch.bfloat16 else None
        weight = self.module.weight
        return torch.float32 if x.dtype == weight.dtype == torch.float32 else None

    def _weights(self, dtype: torch.dtype, rows: int) -> tuple[torch.Tensor | native.Panels, torch.Tensor | None]:
        weight, bias = self.module.weight, self.module.bias
        state = weight_state((weight, bias))
        cached = self.packed.get(dtype)
        if cached is None or cached[0] != state:
            packed = pack_linears([self.module], dtype, rows)
            cached = (state, packed, None if bias is None else bias.detach().to(dtype))
            self.packed[dtype] = cached
        return cached[1], cached[2]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() or x.device.type != "cpu":
            return self.plain(x)
        dtype = self._dtype(x)
        if dtype is None or (dtype != torch.float32 and not onednn_packs(dtype)):
            return self.plain(x)
        rows = x.numel() // max(1, x.shape[-1])
        # Only the C kernel (float32) takes a prefill's rows; oneDNN's packed product is for a few.
        if rows > self.max_rows and (dtype != torch.float32 or linear_panels(self.module) is None):
            return self.plain(x)
        weight, bias = self._weights(dtype, rows)
        self.calls += 1
        return packed_product(x.to(dtype).contiguous(), weight, bias)


@contextmanager
def packed_linears(
    model: torch.nn.Module, *, min_features: int = MIN_FEATURES, max_rows: int = MAX_ROWS
) -> Iterator[list[_PackedLinear]]:
    """Within the block, ``model``'s CPU linear layers with at least ``min_features`` inputs multiply
    inputs of up to ``max_rows`` rows by packed weights (bfloat16 under bf16 autocast, else float32).
    Re-entrant: an inner block for the same model reuses the outer one's packed weights."""
    if id(model) in _active.get() or not packing_available():
        yield []
        return
    wrapped: list[_PackedLinear] = []
    for module in model.modules():
        if (
            type(module) is torch.nn.Linear
            and module.in_features >= min_features
            and module.weight.device.type == "cpu"
            and "forward" not in module.__dict__
        ):
            packed = _PackedLinear(module, module.forward, max_rows)
            module.forward = packed
            wrapped.append(packed)
    token = _active.set(_active.get() | {id(model)})
    try:
        yield wrapped
    finally:
        _active.reset(token)
        for packed in wrapped:
            del packed.module.forward
