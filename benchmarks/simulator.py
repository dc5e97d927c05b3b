"""Benchmark the tool simulator: in-process latency (cache hit / miss / off) and service throughput.

    python benchmarks/simulator.py                 # defaults: 2,000 calls, 16 clients × 200 requests
    python benchmarks/simulator.py --json out.json

The service runs as `slca serve-sim` would (uvicorn in a subprocess, schema backend, SQLite cache,
bearer token); 16 asyncio clients (httpx) send requests back to back. Each pass reports requests/s,
p50/p99 latency and error counts (HTTP failures and error observations).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from slca_grpo.datatypes import ToolCall
from slca_grpo.simulator import Simulator, SimulatorConfig

TOKEN = "bench-token"


def _tool(
    name: str, props: dict[str, Any], required: list[str], returns: dict[str, Any] | None = None
) -> dict[str, Any]:
    fn: dict[str, Any] = {
        "name": name,
        "description": "",
        "parameters": {"type": "object", "properties": props, "required": required},
    }
    if returns:
        fn["returns"] = returns
    return {"type": "function", "function": fn}


S = {"type": "string"}
TOOLS = [
    _tool(
        "get_weather",
        {"city": S, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        ["city"],
        {
            "type": "object",
            "properties": {
                "city": S,
                "temperature": {"type": "number"},
                "condition": S,
                "humidity": {"type": "integer", "minimum": 0, "maximum": 100},
            },
            "required": ["city", "temperature"],
        },
    ),
    _tool("search_hotels", {"city": S, "max_price": {"type": "number"}, "limit": {"type": "integer"}}, ["city"]),
    _tool(
        "create_order",
        {"customer_id": S, "product_id": S, "quantity": {"type": "integer", "minimum": 1}},
        ["customer_id", "product_id"],
    ),
    _tool("get_order", {"order_id": S}, ["order_id"]),
    _tool("cancel_order", {"order_id": S}, ["order_id"]),
]


def calls_for(i: int) -> tuple[ToolCall, str]:
    """A varied, deterministic call stream: reads, searches, creates and cancels across 64 sessions."""
    kind = i % 5
    args: dict[str, Any]
    if kind == 0:
        name, args = "get_weather", {"city": f"City{i % 97}", "unit": "celsius"}
    elif kind == 1:
        name, args = "search_hotels", {"city": f"City{i % 89}", "max_price": 100 + i % 200, "limit": 3}
    elif kind == 2:
        name, args = (
            "create_order",
            {"customer_id": f"C{i}", "product_id": f"P{i % 31}", "quantity": 1 + i % 3},
        )
    elif kind == 3:
        name, args = "get_order", {"order_id": f"ORD-{100000 + i % 500}"}
    else:
        name, args = "cancel_order", {"order_id": f"ORD-{100000 + i % 500}"}
    return ToolCall(name, args), f"session-{i % 64}"


def summarize(latencies_ms: list[float], seconds: float, errors: int) -> dict[str, float]:
    ordered = sorted(latencies_ms)
    return {
        "requests": len(ordered),
        "per_s": len(ordered) / seconds if seconds else 0.0,
        "p50_ms": statistics.median(ordered) if ordered else 0.0,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0,
        "errors": errors,
    }


def bench_in_process(n: int, workdir: Path) -> dict[str, dict[str, float]]:
    stream = [calls_for(i) for i in range(n)]

    def one_pass(sim: Simulator) -> dict[str, float]:
        latencies, errors = [], 0
        start = time.perf_counter()
        for call, session in stream:
            t = time.perf_counter()
            obs = sim.simulate(call, TOOLS, session)
            latencies.append((time.perf_counter() - t) * 1000)
            errors += obs.error is not None
        return summarize(latencies, time.perf_counter() - start, errors)

    def warm(sim: Simulator) -> None:  # compile the tool validators outside the timed pass
        for tool in TOOLS:
            sim.checker.spec(tool)

    cache = workdir / "in_process.sqlite"
    miss_sim = Simulator(SimulatorConfig(cache_path=str(cache)))
    warm(miss_sim)
    results = {"in-process, cache miss": one_pass(miss_sim)}
    hit_sim = Simulator(SimulatorConfig(cache_path=str(cache)))  # fresh sessions: same states, so all hits
    warm(hit_sim)
    results["in-process, cache hit"] = one_pass(hit_sim)
    assert hit_sim.stats.cache_hits == n, hit_sim.stats.to_dict()
    off_sim = Simulator(SimulatorConfig())
    warm(off_sim)
    results["in-process, no cache"] = one_pass(off_sim)
    return results


async def drive_service(url: str, clients: int, per_client: int, offset: int, label: str) -> dict[str, float]:
    latencies: list[float] = []
    errors = 0

    async def worker(w: int) -> None:
        nonlocal errors
        # One client (one connection) per worker, as separate rollout workers would have.
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as client:
            for j in range(per_client):
                call, _ = calls_for(offset + w * per_client + j)
                # The cache key holds the session's state, not its name: a new label with the same
                # calls replays the same states, so a second pass is all cache hits.
                body = {"tools": TOOLS, "call": call.to_dict(), "session_id": f"{label}-{w}"}
                t = time.perf_counter()
                try:
                    response = await client.post("/v1/simulate", json=body)
                    ok = response.status_code == 200 and response.json()["error"] is None
                except httpx.HTTPError:
                    ok = False
                latencies.append((time.perf_counter() - t) * 1000)
                errors += not ok

    start = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(clients)))
    seconds = time.perf_counter() - start
    return summarize(latencies, seconds, errors)


def bench_service(clients: int, per_client: int, workdir: Path, server_path: str | None) -> dict[str, dict[str, float]]:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    serve = (
        "import argparse, sys; from slca_grpo.cli import simulate as commands; p = argparse.ArgumentParser(); "
        "commands.register(p.add_subparsers()); a = p.parse_args(sys.argv[1:]); sys.exit(a.func(a))"
    )
    pythonpath = os.pathsep.join(p for p in (server_path, str(ROOT / "src")) if p)
    env = {**os.environ, "SLCA_SIM_TOKEN": TOKEN, "PYTHONPATH": pythonpath}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            serve,
            "serve-sim",
            "--port",
            str(port),
            "--cache",
            str(workdir / "service.sqlite"),
        ],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    results = {}
    try:
        _wait_ready(url, proc)
        asyncio.run(drive_service(url, clients, 5, offset=10_000_000, label="warmup"))  # connections, validators
        for name, label in (("cache miss", "first"), ("cache hit", "replay")):
            server_cpu, client_cpu = _cpu_seconds(proc.pid), _own_cpu_seconds()
            result = asyncio.run(drive_service(url, clients, per_client, offset=0, label=label))
            n = result["requests"]
            result["server_cpu_ms"] = (_cpu_seconds(proc.pid) - server_cpu) * 1000 / n
            result["client_cpu_ms"] = (_own_cpu_seconds() - client_cpu) * 1000 / n
            results[f"service, {clients} clients, {name}"] = result
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return results


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc), so contention does not blur the cost."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _server_stack(extra: str | None) -> str:
    code = "import importlib.util as u; print(bool(u.find_spec('httptools')), bool(u.find_spec('uvloop')))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (extra, str(ROOT / "src")) if p)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    out = done.stdout.split()
    http, loop = (out + ["False", "False"])[:2]
    http_name = "httptools" if http == "True" else "h11"
    return f"uvicorn http={http_name} loop={'uvloop' if loop == 'True' else 'asyncio'}"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("serve-sim exited early")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("serve-sim did not become ready")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000, help="in-process calls per pass")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests-per-client", type=int, default=200)
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument(
        "--server-pythonpath",
        metavar="DIR",
        help="extra import path for the server only (e.g. a folder holding httptools/uvloop)",
    )
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        results = bench_in_process(args.calls, Path(tmp))
        results.update(bench_service(args.clients, args.requests_per_client, Path(tmp), args.server_pythonpath))
    print(
        f"# {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{_server_stack(args.server_pythonpath)}, "
        f"load average {load_before:.1f} before / {os.getloadavg()[0]:.1f} after"
    )
    print(
        f"{'scenario':38s} {'requests':>8s} {'req/s':>7s} {'p50 ms':>7s} {'p99 ms':>7s} {'errors':>6s}"
        f" {'srv CPU ms/req':>14s} {'client CPU ms/req':>17s}"
    )
    for name, r in results.items():
        cpu = f" {r['server_cpu_ms']:14.3f} {r['client_cpu_ms']:17.3f}" if "server_cpu_ms" in r else ""
        print(
            f"{name:38s} {r['requests']:8d} {r['per_s']:7.0f} {r['p50_ms']:7.3f} {r['p99_ms']:7.3f}"
            f" {r['errors']:6d}{cpu}"
        )
    for name, r in results.items():
        if "server_cpu_ms" in r:
            capacity = 2000 / (r["server_cpu_ms"] + r["client_cpu_ms"])
            print(f"# {name}: CPU-bound capacity on 2 idle cores (server + clients) ≈ {capacity:.0f} req/s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
