"""Large files stream: reading a ~290 MB dataset grows the reader's memory by a small, fixed amount."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROWS = 3000
PAYLOAD_CHARS = 100_000  # one recorded tool response per row: ~290 MB in all
PARQUET_ROW_GROUP = 64  # rows per row group (~6 MB), as dataset writers cut large rows
MAX_GROWTH_MB = 64  # a reader that kept its rows would grow by the file's size

# VmHWM, the peak resident size of this process image (ru_maxrss would carry the parent's over exec).
MEASURE = """
import json, sys
from slca_grpo.data.loader import read_tasks
from slca_grpo.data.stats import DatasetStats

def status_mb(key):
    with open("/proc/self/status") as handle:
        line = next(line for line in handle if line.startswith(key + ":"))
    return int(line.split()[1]) / 1024

tasks, stats = read_tasks(sys.argv[1]), DatasetStats()
for _ in range(100):  # imports, first buffers and allocator pools settle
    stats.add(next(tasks))
base = status_mb("VmRSS")
for task in tasks:
    stats.add(task)
growth = status_mb("VmHWM") - base
print(json.dumps({"tasks": stats.tasks, "responses": stats.with_all_responses, "growth_mb": growth}))
"""


def rows():
    pool = base64.b64encode(os.urandom(PAYLOAD_CHARS)).decode()  # random: Parquet cannot shrink it
    tools = '<tools>\n{"type": "function", "function": {"name": "fetch", "parameters": {"type": "object"}}}\n</tools>'
    for i in range(ROWS):
        call = {"name": "fetch", "arguments": {"q": str(i)}}
        yield {
            "id": f"r{i}",
            "conversations": [
                {"from": "system", "value": tools},
                {"from": "human", "value": f"Fetch item {i}"},
                {"from": "gpt", "value": f"<tool_call>\n{json.dumps(call)}\n</tool_call>"},
                {"from": "tool", "value": f"<tool_response>\n{pool[i % 1000 :][:PAYLOAD_CHARS]}\n</tool_response>"},
                {"from": "gpt", "value": f"Item {i} fetched."},
            ],
        }


def write(path: Path) -> None:
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        batch, writer = [], None
        for row in rows():
            batch.append(row)
            if len(batch) == PARQUET_ROW_GROUP:
                table = pa.Table.from_pylist(batch)
                writer = writer or pq.ParquetWriter(path, table.schema, compression="none", use_dictionary=False)
                writer.write_table(table)
                batch = []
        if batch:
            writer.write_table(pa.Table.from_pylist(batch))
        writer.close()
        return
    array = path.suffix == ".json"
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("[\n" if array else "")
        for index, row in enumerate(rows()):
            handle.write((",\n" if array and index else "") + json.dumps(row) + ("" if array else "\n"))
        handle.write("\n]" if array else "")


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet"])
def test_reading_a_large_file_keeps_memory_flat(tmp_path, suffix):
    path = tmp_path / f"large{suffix}"
    write(path)
    size_mb = path.stat().st_size / 2**20
    try:
        result = subprocess.run(
            [sys.executable, "-c", MEASURE, str(path)],
            capture_output=True,
            text=True,
            timeout=240,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")},
        )
    finally:
        path.unlink()
    assert result.returncode == 0, result.stderr
    measured = json.loads(result.stdout)
    assert size_mb > 250 and measured["tasks"] == measured["responses"] == ROWS
    assert measured["growth_mb"] < MAX_GROWTH_MB, f"{measured['growth_mb']:.0f} MB more to read {size_mb:.0f} MB"
