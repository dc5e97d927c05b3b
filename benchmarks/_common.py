"""Small helpers shared by the benchmarks: thread pinning, memory high-water marks, summaries,
alternating A/B timing."""

from __future__ import annotations

import importlib.util
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

Result = TypeVar("Result")

# Environment variables that size the intra-op thread pools of torch's backends; set before torch
# is imported in a child process so every library agrees on the same count.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def thread_environment(threads: int) -> dict[str, str]:
    """A copy of ``os.environ`` that pins a child process to ``threads`` compute threads."""
    env = dict(os.environ)
    for name in THREAD_VARIABLES:
        env[name] = str(threads)
    env["TOKENIZERS_PARALLELISM"] = "false"  # the Rust tokenizer would otherwise spawn its own pool
    return env


def pin_torch_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def peak_rss_mb() -> float:
    """This process's resident-set high-water mark in MiB (``ru_maxrss`` is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def current_rss_mb() -> float | None:
    """Resident set size now, in MiB (None where /proc is unavailable)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            pages = int(handle.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


def summary(values: Sequence[float]) -> dict[str, float]:
    """Median, quartiles and range of a non-empty sample."""
    if not values:
        raise ValueError("summary() needs at least one value")
    ordered = sorted(values)
    quartiles = statistics.quantiles(ordered, n=4, method="inclusive") if len(ordered) > 1 else [ordered[0]] * 3
    return {
        "median": statistics.median(ordered),
        "p25": quartiles[0],
        "p75": quartiles[2],
        "min": ordered[0],
        "max": ordered[-1],
        "n": float(len(ordered)),
    }


def require_module(name: str, install_hint: str) -> None:
    """Exit with a one-line message (not a traceback) when an optional dependency is missing."""
    if importlib.util.find_spec(name) is None:
        sys.exit(f"error: this benchmark needs the '{name}' package; install it with: {install_hint}")


def alternate(
    ways: Mapping[str, Callable[[], Result]],
    rounds: int,
    report: Callable[[str, float, Result], None] | None = None,
) -> tuple[dict[str, list[float]], dict[str, Result]]:
    """Run every way once untimed (a warm-up), then ``rounds`` timed rounds, the order reversed
    each round so that load drifting over minutes hits all ways alike. Returns each way's seconds
    and its last result; ``report(way, seconds, result)`` hears each timed run as it ends."""
    if rounds < 1:
        raise ValueError("alternate() needs at least one timed round")
    seconds: dict[str, list[float]] = {way: [] for way in ways}
    results: dict[str, Result] = {}
    for round_index in range(rounds + 1):
        order = list(ways) if round_index % 2 == 0 else list(reversed(list(ways)))
        for way in order:
            started = time.perf_counter()
            results[way] = ways[way]()
            elapsed = time.perf_counter() - started
            if round_index:
                seconds[way].append(elapsed)
                if report is not None:
                    report(way, elapsed, results[way])
    return seconds, results


def print_medians(seconds: Mapping[str, Sequence[float]], base: str) -> None:
    """One line per way: its median seconds and how many times faster than ``base`` it ran."""
    width = max(len(way) for way in seconds)
    reference = statistics.median(seconds[base])
    for way, values in seconds.items():
        median = statistics.median(values)
        print(f"{way:{width}s} {median:6.2f} s   {reference / median:.2f}x")
