"""Freed host memory kept for reuse (``train.keep_freed_memory``): glibc's heap, not fresh pages."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from slca_grpo.engine.host_memory import malloc_stats
from slca_grpo.trainer import build
from slca_grpo.trainer.run_config import RunConfig

pytestmark = pytest.mark.skipif(malloc_stats() is None, reason="needs Linux with glibc >= 2.33 (mallinfo2)")

MEGABYTES = 64  # above glibc's largest default mmap threshold (32 MB)

# A fresh process: glibc's settings are process-wide and the test process's heap has a history.
# The same tensor is made and freed again and again. torch aligns its blocks, so a block is carved
# with small remainders that glibc's per-thread cache holds (7 of a size) and that keep a freed
# block from merging with its neighbours: the first few blocks are new memory, the ones after reuse.
PROBE = f"""
import json, resource, sys
import torch
from slca_grpo.engine.host_memory import keep_freed_memory, malloc_stats

if sys.argv[1] == "keep":
    assert keep_freed_memory()
elements = {MEGABYTES} * 2**20 // 4
pages = {MEGABYTES} * 2**20 // 4096
report = {{"faults": [], "mmapped": [], "kept": []}}
for _ in range(ROUNDS):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    tensor = torch.ones(elements)  # written whole, so every page is touched
    report["faults"].append((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / pages)
    report["mmapped"].append(malloc_stats().mmapped >= {MEGABYTES} * 2**20)
    del tensor
    report["kept"].append(malloc_stats().heap_free >= {MEGABYTES} * 2**20)
print(json.dumps(report))
""".replace("ROUNDS", "12")


def probe(mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def transparent_huge_pages_always() -> bool:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as file:
            return "[always]" in file.read()
    except OSError:
        return False


def test_freed_tensors_stay_in_the_heap_and_are_reused_without_page_faults():
    plain, kept = probe("plain"), probe("keep")
    # glibc's default: a large block comes from the system and goes back when freed.
    assert all(plain["mmapped"]) and not any(plain["kept"])
    # Kept: from the heap, and still there after it is freed.
    assert not any(kept["mmapped"]) and all(kept["kept"])
    if not transparent_huge_pages_always():  # with 2 MB pages the counts below are ~0 either way
        assert min(plain["faults"]) > 0.9  # every block faulted in afresh
        assert kept["faults"][0] > 0.9
        assert max(kept["faults"][-3:]) < 0.1  # later blocks reuse freed pages


@pytest.mark.parametrize("keep", [True, False])
def test_start_process_keeps_freed_memory_as_configured(monkeypatch, keep):
    calls = []
    monkeypatch.setattr(build, "keep_freed_memory", lambda: calls.append(True) or True)
    config = RunConfig()
    config.train.keep_freed_memory = keep
    build.start_process(config)
    assert calls == ([True] if keep else [])


FREE_CHECK = """
import json
import torch
from slca_grpo.engine.host_memory import keep_freed_memory
from slca_grpo.trainer.memory import _host_available, available_bytes

assert keep_freed_memory()
cpu = torch.device("cpu")
before = available_bytes(cpu) - _host_available()
tensor = torch.ones(256 * 2**20 // 4)
del tensor  # kept in this process's heap: the system counts it as used
after = available_bytes(cpu) - _host_available()
print(json.dumps({"before": before, "after": after}))
"""


def test_memory_this_process_keeps_freed_counts_as_available_to_a_run():
    # After SFT in the same process (the demo), the heap holds gigabytes the RL run will reuse;
    # the memory check must not refuse the run for memory that is its own.
    done = subprocess.run([sys.executable, "-c", FREE_CHECK], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["after"] - report["before"] >= 0.9 * 256 * 2**20  # all of it, bar what the allocator keeps aside
