"""Where a model runs, for training and evaluation alike: ``train.device`` (auto, cpu, cuda, cuda:N)
resolved once, whether that device computes in bfloat16 natively (``bf16: auto``), bf16 autocast on
it, and the peak memory it used."""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from contextlib import AbstractContextManager
from typing import Literal

import torch

from slca_grpo.config import ConfigError
from slca_grpo.provenance import cpu_model

DEVICE_SPEC = re.compile(r"auto|cpu|cuda(:\d+)?")


def resolve_device(spec: str, key: str = "train.device") -> torch.device:
    """``auto`` is the first CUDA device when there is one, else the CPU; an unavailable device is
    a ConfigError naming ``key``."""
    if not isinstance(spec, str) or not DEVICE_SPEC.fullmatch(spec):
        raise ConfigError(f"{key} must be auto, cpu, cuda or cuda:N, got {spec!r}")
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(spec)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"{key} is {spec!r} but this torch sees no CUDA device (use cpu or auto)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(f"{key} is {spec!r} but only {torch.cuda.device_count()} CUDA device(s) exist")
    return device


def model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


Bf16Setting = bool | Literal["auto"]

# CPU feature flags of native bfloat16 matrix products (x86 AMX / AVX-512 BF16, Arm BF16).
NATIVE_BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16", "bf16"})


def cpu_flags(cpuinfo: str) -> set[str]:
    """The feature flags in a ``/proc/cpuinfo`` text (x86 ``flags``, Arm ``Features``)."""
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            flags.update(value.split())
    return flags


@functools.cache
def cpu_has_native_bf16() -> bool:
    """True when this CPU multiplies bfloat16 matrices in hardware. Without it (e.g. AVX2-only
    x86) a bf16 matmul is emulated, 50-100x slower than float32 (measured on an AVX2 EPYC)."""
    if sys.platform == "darwin":
        try:
            found = subprocess.run(
                ["sysctl", "-n", "hw.optional.arm.FEAT_BF16"], capture_output=True, text=True, timeout=5
            )
        except (OSError, subprocess.SubprocessError):
            return False
        return found.stdout.strip() == "1"
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            return bool(cpu_flags(handle.read()) & NATIVE_BF16_FLAGS)
    except OSError:
        return False


def native_bf16(device: torch.device) -> bool:
    """Whether ``device`` computes in bfloat16 natively (a CUDA GPU that supports it, or a CPU with
    AMX / AVX-512 BF16 / Arm BF16)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        return cpu_has_native_bf16()
    return False


@functools.cache
def _warn_slow_bf16(key: str, machine: str) -> None:
    print(
        f"warning: {key}: true on a CPU without native bfloat16 ({machine}: no AMX / avx512_bf16): bf16 "
        f"matrix products run 50-100x slower than float32 there; {key}: auto uses float32 on this machine",
        file=sys.stderr,
    )


def resolve_bf16(setting: Bf16Setting, device: torch.device, key: str) -> bool:
    """``setting`` (true, false or auto) as a bool for ``device``: auto is bf16 where the device has it
    natively. An explicit true where bf16 is emulated is kept, with a one-line warning naming ``key``."""
    if setting == "auto":
        return native_bf16(device)
    if setting is True and device.type == "cpu" and not native_bf16(device):
        _warn_slow_bf16(key, cpu_model())
    return bool(setting)


def bf16_autocast(device: torch.device, enabled: bool) -> AbstractContextManager:
    """bfloat16 autocast on ``device`` (weights and optimizer stay float32)."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=enabled)


def peak_memory_gb(device: torch.device) -> float:
    """Peak memory so far: allocated CUDA memory on a GPU, the process's peak RSS on the CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**30 if sys.platform == "darwin" else peak / 2**20  # bytes on macOS, KiB on Linux
