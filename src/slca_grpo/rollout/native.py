"""CPU kernels in C for the sampler's decode step, built for this machine on first use.

:func:`prefix_decode_attention` runs the one-token attention of rows over their prompt's shared
prefix and their own tokens (``csrc/decode_attention.c``) in one pass over the cache, where
PyTorch needs four batched products of a dozen rows and a handful of passes in between; float32
caches only (with bfloat16 ones PyTorch's bfloat16 products were faster). :func:`small_product`
multiplies a few rows by a float32 weight packed once by :func:`pack_panels`
(``csrc/small_product.c``), prefetching the weight as it streams from memory. The sources are
compiled with the system's C compiler (``$CC``, else ``cc``/``gcc``/``clang``: ``-O3
-march=native -fopenmp``, then any ``$SLCA_NATIVE_CFLAGS``) into one library in
``$SLCA_GRPO_CACHE/native`` (default ``~/.cache/slca-grpo/native``), named by a hash of the
sources, the compiler, its flags and this CPU's features, written atomically, and loaded with
``ctypes``. Where there is no compiler, the build fails or ``SLCA_NATIVE_KERNELS=0`` is set, the
functions return None and the callers keep PyTorch's and oneDNN's paths (one warning says why).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch

SOURCES = tuple(Path(__file__).with_name("csrc") / name for name in ("decode_attention.c", "small_product.c"))
FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=gnu11")
MAX_DIM = 256  # as in the C source
BUILD_SECONDS = 120

_lock = threading.Lock()
_library: ctypes.CDLL | None = None
_tried = False


def enabled() -> bool:
    return os.environ.get("SLCA_NATIVE_KERNELS", "1").strip().lower() not in {"0", "false", "no", "off"}


def cache_dir() -> Path:
    root = os.environ.get("SLCA_GRPO_CACHE")
    if root:
        return Path(root) / "native"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "slca-grpo" / "native"


def _flags() -> list[str]:
    """The build flags; ``$SLCA_NATIVE_CFLAGS`` comes last, so ``-march=x86-64-v3`` there builds for
    AVX2-only CPUs on a newer one (GCC takes the last ``-march``)."""
    return [*FLAGS, *shlex.split(os.environ.get("SLCA_NATIVE_CFLAGS", ""))]


def _compiler() -> str | None:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _cpu_features() -> str:
    """What ``-march=native`` depends on: a library built on another CPU (a shared home folder)
    may use instructions this one lacks."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith(("flags", "Features")):
                    return line
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _build(compiler: str) -> Path:
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
    sources = [path.read_bytes() for path in SOURCES]
    flags = _flags()
    parts = [*sources, " ".join(flags).encode(), version.encode(), _cpu_features().encode()]
    digest = hashlib.sha256(b"\0".join(parts))
    target = cache_dir() / f"kernels-{digest.hexdigest()[:16]}.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(handle)
    try:
        result = subprocess.run(
            [compiler, *flags, "-o", partial, *map(str, SOURCES)], capture_output=True, text=True, timeout=BUILD_SECONDS
        )
        if result.returncode != 0:
            raise RuntimeError(f"{Path(compiler).name} failed: {(result.stderr or result.stdout).strip()[:500]}")
        os.replace(partial, target)  # whole or not at all, also with another process building it
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


def library() -> ctypes.CDLL | None:
    """The built kernels, or None where they cannot be had (warned once per process)."""
    global _library, _tried
    with _lock:
        if _tried:
            return _library
        _tried = True
        if not enabled():
            return None
        compiler = _compiler()
        try:
            if compiler is None:
                raise RuntimeError("no C compiler found (set CC)")
            loaded = ctypes.CDLL(str(_build(compiler)))
        except (OSError, RuntimeError, subprocess.SubprocessError) as error:
            warnings.warn(
                f"slca: the C decode kernels are unavailable ({error}); decoding on a CPU keeps "
                "PyTorch's slower path (SLCA_NATIVE_KERNELS=0 silences this)",
                RuntimeWarning,
                stacklevel=2,
            )
            return None
        function = loaded.slca_prefix_decode_attention
        function.restype = ctypes.c_int
        pointer, size = ctypes.c_void_p, ctypes.c_int64
        function.argtypes = [
            pointer, pointer, pointer, pointer, size, pointer, pointer, size, size, size, pointer,
            size, size, size, size, size, size, ctypes.c_float, pointer,
        ]  # fmt: skip
        loaded.slca_panel_width.restype = size
        loaded.slca_panel_width.argtypes = []
        loaded.slca_pack_panels.restype = None
        loaded.slca_pack_panels.argtypes = [pointer, size, size, pointer]
        loaded.slca_small_product.restype = None
        loaded.slca_small_product.argtypes = [pointer, size, size, size, pointer, pointer, pointer, pointer]
        _library = loaded
        return _library


def prefix_decode_attention(
    query: torch.Tensor,
    prefix_keys: torch.Tensor,
    prefix_values: torch.Tensor,
    row_prompt: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor | None,
    scale: float,
) -> torch.Tensor | None:
    """Attention of ``query`` [rows, kv heads, group, D] over each row's prompt prefix
    (``prefix_keys``/``prefix_values`` [prompts, kv heads, prefix, D], the row's prompt in
    ``row_prompt`` [rows]) and its own ``keys``/``values`` [rows, kv heads, own, D], where the
    boolean ``mask`` [rows, 1, 1, prefix + own] allows; float32 [rows, kv heads, group, D].
    None where the kernel does not apply (not on a CPU, not float32 keys and values, other layouts,
    not built)."""
    rows, kv_heads, group, dim = query.shape
    prompts, _, prefix, _ = prefix_keys.shape
    own = keys.shape[-2]
    # The dtype first: under bf16 autocast every layer of every decode step asks and is refused.
    if any(t.dtype != torch.float32 for t in (prefix_keys, prefix_values, keys, values)):
        return None
    tensors = [query, prefix_keys, prefix_values, keys, values, row_prompt]
    if any(t.device.type != "cpu" for t in tensors) or dim % 8 or dim > MAX_DIM:
        return None
    if keys.stride() != values.stride() or keys.stride(-1) != 1:
        return None
    if mask is not None and (mask.dtype != torch.bool or mask.shape[-1] != prefix + own):
        return None
    kernels = library()
    if kernels is None:
        return None
    query = query.float().contiguous()
    prefix_keys, prefix_values = prefix_keys.contiguous(), prefix_values.contiguous()
    row_prompt = row_prompt.to(torch.int64).contiguous()
    flags = None if mask is None else mask.reshape(rows, prefix + own).contiguous().view(torch.uint8)
    out = torch.empty((rows, kv_heads, group, dim), dtype=torch.float32)
    status = kernels.slca_prefix_decode_attention(
        query.data_ptr(), prefix_keys.data_ptr(), prefix_values.data_ptr(), row_prompt.data_ptr(), prompts,
        keys.data_ptr(), values.data_ptr(), keys.stride(0), keys.stride(1), keys.stride(2),
        None if flags is None else flags.data_ptr(),
        rows, kv_heads, group, dim, prefix, own, float(scale), out.data_ptr(),
    )  # fmt: skip
    return out if status == 0 else None


class Panels:
    """Float32 weights [out, in] packed by :func:`pack_panels` for :func:`small_product`: one, or
    several of one input width joined by :func:`join_panels` (their outputs side by side). Holds the
    library that packed them (the panel width is that build's) and the packed floats."""

    def __init__(self, kernels: ctypes.CDLL, parts: Sequence[torch.Tensor], widths: Sequence[int], in_features: int):
        self.kernels, self.parts, self.widths = kernels, tuple(parts), tuple(widths)
        self.in_features, self.out_features = in_features, sum(self.widths)
        # The parts' addresses and widths as C arrays, made once: a decode step multiplies ~120 times.
        self._addresses = (ctypes.c_void_p * len(self.parts))(*[part.data_ptr() for part in self.parts])
        self._widths = (ctypes.c_int64 * len(self.parts))(*self.widths)


def pack_panels(weight: torch.Tensor) -> Panels | None:
    """``weight`` [out, in] (float32, on the CPU) packed for :func:`small_product`, or None where
    the kernels are not built or the weight is of another kind."""
    if weight.dtype != torch.float32 or weight.device.type != "cpu" or weight.dim() != 2:
        return None
    kernels = library()
    if kernels is None:
        return None
    weight = weight.detach().contiguous()
    out_features, in_features = weight.shape
    width = kernels.slca_panel_width()
    data = torch.empty(-(-out_features // width) * width * in_features, dtype=torch.float32)
    kernels.slca_pack_panels(weight.data_ptr(), out_features, in_features, data.data_ptr())
    return Panels(kernels, [data], [out_features], in_features)


def join_panels(panels: Sequence[Panels]) -> Panels:
    """Weights of one input width as one: their products in one call, outputs side by side (the
    packed floats are shared, not copied)."""
    first = panels[0]
    if any(p.kernels is not first.kernels or p.in_features != first.in_features for p in panels):
        raise ValueError("join_panels takes weights of one input width packed by one library")
    parts = [part for p in panels for part in p.parts]
    return Panels(first.kernels, parts, [w for p in panels for w in p.widths], first.in_features)


def small_product(x: torch.Tensor, panels: Panels, bias: torch.Tensor | None) -> torch.Tensor:
    """``x @ weight.T + bias`` for float32 ``x`` [..., in] on the CPU and weights from
    :func:`pack_panels` (or :func:`join_panels`: ``bias`` then covers all their outputs)."""
    if x.dtype != torch.float32 or x.device.type != "cpu" or x.shape[-1] != panels.in_features:
        raise ValueError(f"small_product takes float32 CPU rows of {panels.in_features}: {x.dtype} {tuple(x.shape)}")
    if bias is not None and (bias.shape != (panels.out_features,) or bias.device.type != "cpu"):
        raise ValueError(f"small_product's bias must be {panels.out_features} values on the CPU: {tuple(bias.shape)}")
    x = x.contiguous()
    rows = x.numel() // max(1, panels.in_features)
    out = torch.empty((*x.shape[:-1], panels.out_features), dtype=torch.float32)
    if bias is not None:
        bias = bias.detach().to(torch.float32).contiguous()
    panels.kernels.slca_small_product(
        x.data_ptr(), rows, panels.in_features, len(panels.parts), panels._addresses, panels._widths,
        None if bias is None else bias.data_ptr(), out.data_ptr(),
    )  # fmt: skip
    return out
