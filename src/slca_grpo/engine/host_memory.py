"""Freed host memory kept in the process, so that large CPU tensors reuse pages instead of faulting in new ones.

glibc's ``malloc`` takes a block larger than its mmap threshold (128 KB, growing to at most 32 MB)
straight from the operating system and gives it back when it is freed; the next tensor of that size
touches fresh pages, which the kernel zeroes one 4 KB page at a time on first write. A training step
makes and frees hundreds of such tensors (logits over the vocabulary, the tied embedding's gradient,
bfloat16 casts of the weights, attention's gradients), and on a virtual machine each page fault
costs microseconds. With the thresholds raised, such blocks come from the heap and go back to it
for the next step. The price: the process stays near its peak memory between steps, and the heap
holds some freed blocks it cannot merge (peak RSS ~7 % higher on the SmolLM2 bench; numbers in
docs/experiments/performance.md).

Set once per process (``train.keep_freed_memory``, on by default); Linux with glibc only — elsewhere
nothing changes.
"""

from __future__ import annotations

import ctypes
import platform
from dataclasses import dataclass

# mallopt(3) parameters
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

# Blocks up to this size come from the heap and return to it: every tensor of a small model's step.
MMAP_THRESHOLD = 1 << 30
# Free memory at the top of the heap is given back to the system only beyond this (mallopt's int).
TRIM_THRESHOLD = (1 << 31) - 1


@dataclass(frozen=True)
class MallocStats:
    """What glibc's ``mallinfo2`` reports, in bytes."""

    mmapped: int  # blocks handed out straight from the operating system (hblkhd)
    heap_free: int  # freed memory the heap keeps for reuse (fordblks)


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()
    ]


def _glibc() -> ctypes.CDLL | None:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") else None


def keep_freed_memory() -> bool:
    """Keep freed blocks of up to 1 GB in the process for reuse. Returns whether it took effect
    (False off Linux/glibc)."""
    libc = _glibc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def malloc_stats() -> MallocStats | None:
    """glibc's view of the main heap, or None where ``mallinfo2`` is missing (glibc < 2.33, not glibc)."""
    libc = _glibc()
    if libc is None or not hasattr(libc, "mallinfo2"):
        return None
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return MallocStats(mmapped=info.hblkhd, heap_free=info.fordblks)
