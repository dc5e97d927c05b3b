"""CPU kernels in C for the sampler's decode step, built for this machine on first use.

:func:`prefix_decode_attention` runs the one-token attention of rows over their prompt's shared
prefix and their own tokens (``csrc/decode_attention.c``) in one pass over the cache, where
PyTorch needs four batched products of a dozen rows and a handful of passes in between; float32
caches, and bfloat16 ones (under bf16 autocast) read as bfloat16 and widened in registers, the
arithmetic in float32 and the output in bfloat16 as PyTorch's path gives it. :func:`small_product`
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
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch

from slca_grpo.config import ConfigError

SOURCES = tuple(Path(__file__).with_name("csrc") / name for name in ("decode_attention.c", "small_product.c"))
FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=gnu11")
# clang's OpenMP needs its own runtime (libomp), which must not be loaded beside PyTorch's libgomp:
# with clang the pragmas are left out and the kernels run on one thread.
CLANG_OPENMP = "-fopenmp=libgomp"
MAX_DIM = 256  # as in the C source
BUILD_SECONDS = 120
STALE_SECONDS = 2 * BUILD_SECONDS  # a partial build older than this was interrupted

_lock = threading.Lock()
_library: ctypes.CDLL | None = None
_tried = False
_switched_off = False  # by the run's config (``model.native_kernels: false``), beside the variable
# How many calls each kernel served in this process (a run records it: which kernels ran).
calls = {"decode_attention": 0, "small_product": 0}


class NativeBuildError(RuntimeError):
    """Why the kernels cannot be had here (said once, in a warning; decoding falls back)."""


_ON, _OFF = {"", "1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def enabled() -> bool:
    """Whether the kernels are asked for: not switched off by the run, and ``SLCA_NATIVE_KERNELS``
    on (unset, 1, true, yes, on) rather than off (0, false, no, off); anything else is refused."""
    value = os.environ.get("SLCA_NATIVE_KERNELS", "1").strip().lower()
    if value not in _ON | _OFF:
        raise ConfigError(f"SLCA_NATIVE_KERNELS must be 1 or 0 (true/false, yes/no, on/off), got {value[:40]!r}")
    return not _switched_off and value in _ON


def switch(on: bool) -> None:
    """Use the kernels (the default) or not, for this process, beside ``SLCA_NATIVE_KERNELS``."""
    global _switched_off
    _switched_off = not on


def cache_dir() -> Path:
    """``$SLCA_GRPO_CACHE/native``, else ``$XDG_CACHE_HOME`` (when absolute, as the XDG rules ask)
    or ``~/.cache``, then ``slca-grpo/native``. Always absolute: a relative folder would let the
    working directory supply the library."""
    root = os.environ.get("SLCA_GRPO_CACHE")
    if root:
        path = Path(root) / "native"
    else:
        xdg = os.environ.get("XDG_CACHE_HOME", "")
        try:
            base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
        except RuntimeError as error:  # no $HOME and no passwd entry
            raise NativeBuildError(f"no cache folder for the built kernels ({error})") from None
        path = base / "slca-grpo" / "native"
    if not path.is_absolute():
        raise NativeBuildError(f"the kernels' cache folder {path} is not absolute (set SLCA_GRPO_CACHE to a full path)")
    return path


def _private_folder(path: Path) -> Path:
    """``path``, made if missing (mode 700); refused unless it is this user's and no one else may write to it."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = path.stat()
    if info.st_uid != os.getuid():
        raise NativeBuildError(f"the kernels' cache folder {path} belongs to another user")
    if info.st_mode & 0o022:
        raise NativeBuildError(f"the kernels' cache folder {path} is writable by others (chmod go-w it)")
    return path


def _flags(compiler: Sequence[str], version: str) -> list[str]:
    """The build flags; ``$SLCA_NATIVE_CFLAGS`` comes last, so ``-march=x86-64-v3`` there builds for
    AVX2-only CPUs on a newer one (GCC takes the last ``-march``)."""
    try:
        extra = shlex.split(os.environ.get("SLCA_NATIVE_CFLAGS", ""))
    except ValueError as error:
        raise NativeBuildError(f"SLCA_NATIVE_CFLAGS cannot be read ({error})") from None
    flags = [*FLAGS]
    if "clang" in version.lower():
        flags[flags.index("-fopenmp")] = CLANG_OPENMP
    return [*compiler[1:], *flags, *extra]


def _compiler() -> list[str] | None:
    """The compiler command: ``$CC`` as written (arguments kept: ``ccache gcc``, ``python -m
    ziglang cc``), else the first of ``cc``, ``gcc``, ``clang`` found. None where there is none."""
    cc = os.environ.get("CC", "").strip()
    if cc:
        try:
            words = shlex.split(cc)
        except ValueError as error:
            raise NativeBuildError(f"CC cannot be read ({error})") from None
        found = shutil.which(words[0])
        if found is None:
            raise NativeBuildError(f"CC={cc!r}: {words[0]} not found")
        return [found, *words[1:]]
    for name in ("cc", "gcc", "clang"):
        if shutil.which(name):
            return [shutil.which(name)]
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


def _run(command: Sequence[str], timeout: float) -> subprocess.CompletedProcess:
    """``command`` in its own process group: at the time-out the whole group is killed (a compiler
    driver's children too), not only the driver."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise NativeBuildError(f"{Path(command[0]).name} ran past {timeout:.0f} s and was stopped") from None
    text = (out.decode("utf-8", errors="replace"), err.decode("utf-8", errors="replace"))
    return subprocess.CompletedProcess(command, process.returncode, *text)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_synced(path: Path, data: bytes) -> None:
    """``data`` into ``path`` whole or not at all: written beside it, flushed to disk, renamed."""
    handle, partial = tempfile.mkstemp(suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


def _sync_folder(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _remove_stale(folder: Path) -> None:
    """Partial files of builds that were interrupted (a killed process leaves its temporary file)."""
    now = time.time()
    for leftover in (*folder.glob("tmp*.so"), *folder.glob("*.partial")):
        try:
            if now - leftover.stat().st_mtime > STALE_SECONDS:
                leftover.unlink()
        except OSError:
            pass


def _loads_elsewhere(path: Path) -> str | None:
    """Why the library at ``path`` does not load in a fresh process, or None when it does: a damaged
    or foreign library is found there, not by crashing this process."""
    probe = (
        "import ctypes, sys; kernels = ctypes.CDLL(sys.argv[1]); kernels.slca_panel_width(); "
        "kernels.slca_prefix_decode_attention; kernels.slca_prefix_decode_attention_bf16; "
        "kernels.slca_pack_panels; kernels.slca_small_product"
    )
    try:
        result = _run([sys.executable, "-c", probe, str(path)], timeout=60)
    except NativeBuildError as error:
        return str(error)
    if result.returncode == 0:
        return None
    return (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1][:300]


def _build(compiler: Sequence[str]) -> Path:
    """The library for these sources, compiler, flags and CPU: the cached one when its digest
    checks, else built (checked to load in another process), synced and recorded with its digest."""
    version = _run([*compiler, "--version"], timeout=30).stdout
    flags = _flags(compiler, version)
    sources = [path.read_bytes() for path in SOURCES]
    parts = [*sources, " ".join([Path(compiler[0]).name, *flags]).encode(), version.encode(), _cpu_features().encode()]
    key = hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]
    folder = _private_folder(cache_dir())
    target, record = folder / f"kernels-{key}.so", folder / f"kernels-{key}.sha256"
    if target.exists() and record.exists():
        if record.read_text(encoding="utf-8", errors="replace").strip() == _digest(target):
            return target
    for stale in (target, record):  # damaged, or a build that stopped between the two files
        if stale.exists():
            stale.unlink()
    _remove_stale(folder)
    handle, partial = tempfile.mkstemp(suffix=".so", dir=folder)
    os.close(handle)
    try:
        result = _run([compiler[0], *flags, "-o", partial, *map(str, SOURCES)], timeout=BUILD_SECONDS)
        if result.returncode != 0:
            raise NativeBuildError(f"{Path(compiler[0]).name} failed: {(result.stderr or result.stdout).strip()[:500]}")
        why = _loads_elsewhere(Path(partial))
        if why is not None:
            raise NativeBuildError(f"the built library does not load: {why}")
        with open(partial, "rb+") as built:
            os.fsync(built.fileno())
        os.replace(partial, target)  # whole or not at all, also with another process building it
        _write_synced(record, _digest(target).encode())
        _sync_folder(folder)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


def library() -> ctypes.CDLL | None:
    """The built kernels, or None where they cannot be had (warned once per process: whatever goes
    wrong in finding a compiler, building, checking or loading, decoding keeps PyTorch's path)."""
    global _library, _tried
    if not enabled():  # asked every time: a run may switch them off after they were built
        return None
    with _lock:
        if _tried:
            return _library
        _tried = True
        try:
            compiler = _compiler()
            if compiler is None:
                raise NativeBuildError("no C compiler found (set CC)")
            loaded = ctypes.CDLL(str(_build(compiler)))
            pointer, size = ctypes.c_void_p, ctypes.c_int64
            attention = [
                pointer, pointer, pointer, pointer, size, pointer, pointer, size, size, size, pointer,
                size, size, size, size, size, size, ctypes.c_float, pointer,
            ]  # fmt: skip
            loaded.slca_prefix_decode_attention.restype = ctypes.c_int
            loaded.slca_prefix_decode_attention.argtypes = attention
            # The bfloat16 one also takes whether the query is bfloat16 (else float32), after it.
            loaded.slca_prefix_decode_attention_bf16.restype = ctypes.c_int
            loaded.slca_prefix_decode_attention_bf16.argtypes = [pointer, ctypes.c_int, *attention[1:]]
            loaded.slca_panel_width.restype = size
            loaded.slca_panel_width.argtypes = []
            loaded.slca_pack_panels.restype = None
            loaded.slca_pack_panels.argtypes = [pointer, size, size, pointer]
            loaded.slca_small_product.restype = None
            loaded.slca_small_product.argtypes = [pointer, size, size, size, pointer, pointer, pointer, pointer]
        except Exception as error:  # noqa: BLE001 -- any failure here is a fallback, said once
            warnings.warn(
                f"slca: the C decode kernels are unavailable ({type(error).__name__}: {error}); decoding on a "
                "CPU keeps PyTorch's slower path (SLCA_NATIVE_KERNELS=0 or model.native_kernels: false silences this)",
                RuntimeWarning,
                stacklevel=2,
            )
            return None
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
    boolean ``mask`` [rows, 1, 1, prefix + own] allows; [rows, kv heads, group, D] in the keys'
    dtype. Keys and values all float32, or all bfloat16: then the query is rounded to bfloat16 (as
    PyTorch's bfloat16 products round it), the arithmetic is float32 and the output is rounded to
    bfloat16 once. None where the kernel does not apply (not on a CPU, other or mixed dtypes,
    other layouts, not built); ``ValueError`` for inputs that do not fit together."""
    # The dtype first: it is asked by every layer of every decode step.
    dtype = prefix_keys.dtype
    if dtype not in (torch.float32, torch.bfloat16) or any(t.dtype != dtype for t in (prefix_values, keys, values)):
        return None
    _check_attention_inputs(query, prefix_keys, prefix_values, row_prompt, keys, values, mask)
    rows, kv_heads, group, dim = query.shape
    prompts, _, prefix, _ = prefix_keys.shape
    own = keys.shape[-2]
    tensors = [query, prefix_keys, prefix_values, keys, values, row_prompt]
    if any(t.device.type != "cpu" for t in tensors) or dim % 8 or dim > MAX_DIM or rows == 0:
        return None
    if keys.stride() != values.stride() or keys.stride(-1) != 1 or mask is not None and mask.dtype != torch.bool:
        return None
    kernels = library()
    if kernels is None:
        return None
    if dtype == torch.bfloat16 and query.dtype == torch.bfloat16:
        query = query.contiguous()
    else:  # the bfloat16 kernel rounds a float32 query to bfloat16 itself: no cast per layer here
        query = query.float().contiguous()
    prefix_keys, prefix_values = prefix_keys.contiguous(), prefix_values.contiguous()
    row_prompt = row_prompt.to(torch.int64).contiguous()
    flags = None if mask is None else mask.reshape(rows, prefix + own).contiguous().view(torch.uint8)
    out = torch.empty((rows, kv_heads, group, dim), dtype=dtype)
    arguments = (
        prefix_keys.data_ptr(), prefix_values.data_ptr(), row_prompt.data_ptr(), prompts,
        keys.data_ptr(), values.data_ptr(), keys.stride(0), keys.stride(1), keys.stride(2),
        None if flags is None else flags.data_ptr(),
        rows, kv_heads, group, dim, prefix, own, float(scale), out.data_ptr(),
    )  # fmt: skip
    if dtype == torch.bfloat16:
        query_bf16 = int(query.dtype == torch.bfloat16)
        status = kernels.slca_prefix_decode_attention_bf16(query.data_ptr(), query_bf16, *arguments)
    else:
        status = kernels.slca_prefix_decode_attention(query.data_ptr(), *arguments)
    if status == 0:
        calls["decode_attention"] += 1
    return out if status == 0 else None


def _check_attention_inputs(
    query: torch.Tensor,
    prefix_keys: torch.Tensor,
    prefix_values: torch.Tensor,
    row_prompt: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor | None,
) -> None:
    """Every shape, length and size relation the kernel reads by, or ``ValueError`` naming the one
    that fails: the C code trusts them, and a mismatch would read past a tensor."""

    def shape(tensor: torch.Tensor) -> tuple[int, ...]:
        return tuple(tensor.shape)

    where = "prefix_decode_attention"

    if query.dim() != 4:
        raise ValueError(f"{where}: query must be [rows, kv heads, group, dim], got {shape(query)}")
    rows, kv_heads, group, dim = shape(query)
    if prefix_keys.dim() != 4 or shape(prefix_keys)[1::2] != (kv_heads, dim):
        raise ValueError(f"{where}: prefix keys must be [prompts, {kv_heads}, prefix, {dim}], got {shape(prefix_keys)}")
    if shape(prefix_values) != shape(prefix_keys):
        raise ValueError(f"{where}: prefix values {shape(prefix_values)} differ from prefix keys {shape(prefix_keys)}")
    if keys.dim() != 4 or (shape(keys)[0], shape(keys)[1], shape(keys)[3]) != (rows, kv_heads, dim):
        raise ValueError(f"{where}: keys must be [{rows}, {kv_heads}, own, {dim}], got {shape(keys)}")
    if shape(values) != shape(keys):
        raise ValueError(f"{where}: values {shape(values)} differ from keys {shape(keys)}")
    if any(stride < 0 for stride in keys.stride()) or any(stride < 0 for stride in values.stride()):
        raise ValueError(f"{where}: negative strides")
    if row_prompt.dim() != 1 or len(row_prompt) != rows or row_prompt.is_floating_point() or row_prompt.is_complex():
        raise ValueError(f"{where}: row_prompt must be {rows} integers, got {row_prompt.dtype} {shape(row_prompt)}")
    prompts = shape(prefix_keys)[0]
    if rows and (prompts == 0 or int(row_prompt.min()) < 0 or int(row_prompt.max()) >= prompts):
        raise ValueError(f"{where}: row_prompt must name one of {prompts} prompts")
    width = shape(prefix_keys)[2] + shape(keys)[2]
    if mask is not None and mask.numel() != rows * width:
        raise ValueError(f"{where}: the mask must be [{rows}, 1, 1, {width}], got {shape(mask)}")


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
    if x.dtype != torch.float32 or x.device.type != "cpu" or x.dim() == 0 or x.shape[-1] != panels.in_features:
        raise ValueError(f"small_product takes float32 CPU rows of {panels.in_features}: {x.dtype} {tuple(x.shape)}")
    if bias is not None and (bias.shape != (panels.out_features,) or bias.device.type != "cpu"):
        raise ValueError(f"small_product's bias must be {panels.out_features} values on the CPU: {tuple(bias.shape)}")
    if panels.in_features == 0 or x.numel() == 0:  # nothing to multiply: the bias (or zeros) alone
        out = torch.zeros((*x.shape[:-1], panels.out_features), dtype=torch.float32)
        return out + bias.detach().to(torch.float32) if bias is not None else out
    x = x.contiguous()
    rows = x.numel() // panels.in_features
    out = torch.empty((*x.shape[:-1], panels.out_features), dtype=torch.float32)
    if bias is not None:
        bias = bias.detach().to(torch.float32).contiguous()
    calls["small_product"] += 1
    panels.kernels.slca_small_product(
        x.data_ptr(), rows, panels.in_features, len(panels.parts), panels._addresses, panels._widths,
        None if bias is None else bias.data_ptr(), out.data_ptr(),
    )  # fmt: skip
    return out
