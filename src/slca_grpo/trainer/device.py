"""Where training runs: ``train.device`` (auto, cpu, cuda, cuda:N) resolved once, bf16 autocast on
that device, and the peak memory it used."""

from __future__ import annotations

import re
import sys
from contextlib import AbstractContextManager

import torch

from slca_grpo.config import ConfigError

DEVICE_SPEC = re.compile(r"auto|cpu|cuda(:\d+)?")


def resolve_device(spec: str) -> torch.device:
    """``auto`` is the first CUDA device when there is one, else the CPU; an unavailable device is
    a ConfigError naming ``train.device``."""
    if not DEVICE_SPEC.fullmatch(spec):
        raise ConfigError(f"train.device must be auto, cpu, cuda or cuda:N, got {spec!r}")
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(spec)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"train.device is {spec!r} but this torch sees no CUDA device (use cpu or auto)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(f"train.device is {spec!r} but only {torch.cuda.device_count()} CUDA device(s) exist")
    return device


def model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


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
