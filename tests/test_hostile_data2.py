"""Hostile outputs and inputs, part two: `convert --to` a device, a pipe or a link; gzip bombs (one
huge line, a sea of blank lines); an absurd synthetic `data.n_train`. Each ends in one line naming
the path, row or key, or in bounded work."""

from __future__ import annotations

import errno
import gzip
import json
import os
import stat
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from slca_grpo.cli import main
from slca_grpo.config import ConfigError, load_yaml_config
from slca_grpo.data import records
from slca_grpo.data.config import DataConfig
from slca_grpo.data.loader import load_dataset
from slca_grpo.data.output import atomic_text
from slca_grpo.data.synthetic import generator
from slca_grpo.data.synthetic.__main__ import main as synthetic_main
from slca_grpo.data.tasks import TaskFormatError
from slca_grpo.trainer.run import RunConfig

ROOT = Path(__file__).parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "datasets"
XLAM = json.loads((FIXTURES / "xlam.json").read_text())
LIMIT = 64 << 10  # MAX_ROW_BYTES lowered so bombs stay small: each is 256x the bound
BOMB_BYTES = 256 * LIMIT  # 16 MiB decompressed, ~16 KB on disk
PEAK_BOUND = 2 << 20  # what reading a bomb may allocate at once; the old reader held the whole line


def convert(capsys, source, target, *extra):
    code = main(["data", "convert", str(source), "--to", str(target), *map(str, extra)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def char_device(tmp_path: Path, name: str) -> Path:
    """A /dev/null or /dev/full of the test's own, so a regression replaces only it; the system's
    when we may not make one (then we may not replace the system's either)."""
    minors = {"null": 3, "full": 7}
    device = tmp_path / name
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, minors[name]))
        with open(device, "wb"):
            pass  # a nodev mount refuses to open it
    except OSError:
        device.unlink(missing_ok=True)
        device = Path("/dev") / name
        if not device.exists():
            pytest.skip(f"no {device} here")
    return device


# --- 10: convert --to a device, a pipe, a link, a folder -------------------------------------------


@pytest.mark.parametrize("layout", ["tasks", "sft", "verl"])
def test_convert_writes_through_a_device_and_reports_a_full_one(tmp_path, capsys, layout):
    null, full = char_device(tmp_path, "null"), char_device(tmp_path, "full")
    code, out, _ = convert(capsys, FIXTURES / "glaive.json", null, "--layout", layout)
    assert code == 0 and out.startswith("wrote 2 ") and f"to {null} " in out
    code, out, err = convert(capsys, FIXTURES / "glaive.json", full, "--layout", layout)
    assert code == 2 and out == ""
    assert err.splitlines() == [f"error: [Errno {errno.ENOSPC}] {os.strerror(errno.ENOSPC)}: '{full}'"]
    assert stat.S_ISCHR(os.lstat(null).st_mode) and stat.S_ISCHR(os.lstat(full).st_mode)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left behind


def test_a_write_error_mid_stream_names_the_path(tmp_path):
    full = char_device(tmp_path, "full")
    with pytest.raises(OSError) as error, atomic_text(full) as handle:
        for _ in range(100):
            handle.write("x" * 1000)  # past the write buffer: the error comes from a write, not the close
    assert error.value.errno == errno.ENOSPC and error.value.filename == str(full)
    assert stat.S_ISCHR(os.lstat(full).st_mode)


def test_convert_into_a_named_pipe_streams_to_its_reader(tmp_path, capsys):
    pipe = tmp_path / "rows.pipe"
    os.mkfifo(pipe)
    reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)  # open first, so the writer's open does not wait
    try:
        code, out, _ = convert(capsys, FIXTURES / "glaive.json", pipe, "--layout", "tasks")
        received = os.read(reader, 1 << 20)
    finally:
        os.close(reader)
    assert code == 0 and out.startswith(f"wrote 2 tasks to {pipe}")
    assert [json.loads(line)["id"] for line in received.decode().splitlines()] == ["glaive-1", "glaive-2"]
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)


def test_a_link_is_followed_and_kept_and_a_folder_refused(tmp_path, capsys):
    real = tmp_path / "real.jsonl"
    real.write_text("old\n")
    link = tmp_path / "current.jsonl"
    link.symlink_to(real)
    code, _, _ = convert(capsys, FIXTURES / "glaive.json", link)
    assert code == 0 and link.is_symlink() and os.readlink(link) == str(real)
    assert len(real.read_text().splitlines()) == 2
    dangling = tmp_path / "next.jsonl"
    dangling.symlink_to(tmp_path / "made.jsonl")
    code, _, _ = convert(capsys, FIXTURES / "glaive.json", dangling)
    assert code == 0 and dangling.is_symlink() and len((tmp_path / "made.jsonl").read_text().splitlines()) == 2
    device_link = tmp_path / "null.jsonl"
    device_link.symlink_to(char_device(tmp_path, "null"))
    code, _, _ = convert(capsys, FIXTURES / "glaive.json", device_link)
    assert code == 0 and stat.S_ISCHR(os.stat(device_link).st_mode)
    folder = tmp_path / "out.jsonl"
    folder.mkdir()
    code, _, err = convert(capsys, FIXTURES / "glaive.json", folder)
    assert code == 2 and err.splitlines() == [
        f"error: {folder} is a folder: give a file path to write (a character device or a named pipe is written "
        "through)"
    ]
    assert folder.is_dir() and list(folder.iterdir()) == []


def test_convert_to_stdout_keeps_the_summary_out_of_the_rows(tmp_path):
    stdout = tmp_path / "stdout"  # /dev/stdout's own link, so a regression replaces only this one
    stdout.symlink_to("/proc/self/fd/1")
    result = subprocess.run(
        [sys.executable, "-c", "import sys; from slca_grpo.cli import main; sys.exit(main())"]
        + ["data", "convert", str(FIXTURES / "glaive.json"), "--to", str(stdout), "--layout", "tasks"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["id"] for line in result.stdout.splitlines()] == ["glaive-1", "glaive-2"]
    assert f"wrote 2 tasks to {stdout}" in result.stderr and stdout.is_symlink()


# --- 13: gzip bombs ---------------------------------------------------------------------------------


def gzipped(path: Path, *pieces: bytes | tuple[bytes, int]) -> Path:
    """A gzip file of ``pieces``; (bytes, n) is the bytes n times, written a MiB at a time."""
    with gzip.open(path, "wb", compresslevel=1) as handle:
        for piece in pieces:
            data, times = piece if isinstance(piece, tuple) else (piece, 1)
            step = max(1, (1 << 20) // len(data))
            for done in range(0, times, step):
                handle.write(data * min(step, times - done))
    return path


def row(i: int) -> bytes:
    return json.dumps({**XLAM[0], "id": i}).encode()


def peak_while(action):
    """(what ``action`` returned or raised, the most it had allocated at once)."""
    tracemalloc.start()
    try:
        try:
            result = action()
        except TaskFormatError as exc:
            result = exc
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture
def small_rows(monkeypatch):
    monkeypatch.setattr(records, "MAX_ROW_BYTES", LIMIT)


def test_a_gzipped_line_past_the_limit_is_a_bad_row_read_in_bounded_memory(tmp_path, small_rows):
    path = gzipped(tmp_path / "bomb.jsonl.gz", b'{"query": "', (b"a", BOMB_BYTES), b'"}\n', row(1) + b"\n")
    error, peak = peak_while(lambda: load_dataset(path))
    assert isinstance(error, TaskFormatError) and peak < PEAK_BOUND
    assert str(error).startswith(f"{path}:1: row longer than {LIMIT:,} bytes, the most one row may take")
    assert "data.skip_bad_rows" in str(error) and "\n" not in str(error)
    report, peak = peak_while(lambda: load_dataset(path, on_error="skip"))
    assert [t.id for t in report.tasks] == ["1"] and report.skipped == 1 and peak < PEAK_BOUND
    assert report.tasks[0].metadata["origin"] == f"{path}:2"


def test_without_skip_nothing_past_the_limit_is_read(tmp_path, small_rows):
    """The bomb is cut off half-way: reading on past the limit would hit the damage and say so."""
    whole = gzipped(tmp_path / "whole.jsonl.gz", b'{"query": "', (b"a", BOMB_BYTES), b'"}\n', row(1) + b"\n")
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(TaskFormatError, match=f"^{path}:1: row longer than"):
        load_dataset(path)
    with pytest.raises(TaskFormatError, match=f"^{path}: not a readable gzip file"):
        load_dataset(path, on_error="skip")  # skipping must read through, and finds the damage


def test_a_sea_of_blank_lines_counts_against_the_row_after_it(tmp_path, small_rows):
    path = gzipped(tmp_path / "blank.jsonl.gz", row(1) + b"\n", (b"\n", BOMB_BYTES), row(2) + b"\n")
    error, peak = peak_while(lambda: load_dataset(path))
    assert isinstance(error, TaskFormatError) and peak < PEAK_BOUND
    assert str(error).startswith(f"{path}:2: a run of blank lines longer than {LIMIT:,} bytes")
    report, peak = peak_while(lambda: load_dataset(path, on_error="skip"))
    assert [t.id for t in report.tasks] == ["1", "2"] and report.skipped == 1 and peak < PEAK_BOUND
    assert report.tasks[1].metadata["origin"] == f"{path}:{BOMB_BYTES + 2}"  # every blank line counted


def test_a_file_of_nothing_but_blank_lines_is_one_bad_row(tmp_path, small_rows):
    path = gzipped(tmp_path / "blank.jsonl.gz", (b" \n", BOMB_BYTES // 2))
    report, peak = peak_while(lambda: load_dataset(path, data_format="xlam", on_error="skip"))
    assert report.tasks == [] and report.rows == report.skipped == 1 and peak < PEAK_BOUND
    assert report.errors[0].startswith(f"{path}:1: a run of blank lines longer than")


def test_the_limit_is_exact_and_counts_the_blank_lines_before_a_row(tmp_path, monkeypatch):
    first = row(1) + b"\n"
    monkeypatch.setattr(records, "MAX_ROW_BYTES", len(first) + 3)
    path = tmp_path / "edge.jsonl"
    path.write_bytes(first + b"\n\n\n" + first.replace(b'"id": 1', b'"id": 2') + b"\n\n\n\n" + row(3) + b"\n")
    report = load_dataset(path, on_error="skip")
    assert [t.id for t in report.tasks] == ["1", "2"] and report.skipped == 1
    assert report.errors[0].startswith(f"{path}:10: row (with the 4 bytes of blank lines before it) longer than")


@pytest.mark.parametrize(
    ("pieces", "where", "what"),
    [
        ((b'[{"query": "', (b"a", BOMB_BYTES), b'"}]'), "row 1", "row 1"),
        ((b"[" + row(1) + b",", (b" ", BOMB_BYTES), row(2) + b"]"), "row 2", "row 2"),
        ((b"[" + row(1) + b"]", (b"\n", BOMB_BYTES)), "row 1", "the space after the closing ']'"),
    ],
)
def test_a_json_array_row_past_the_limit_stops_the_read(tmp_path, small_rows, pieces, where, what):
    path = gzipped(tmp_path / "bomb.json.gz", *pieces)
    error, peak = peak_while(lambda: load_dataset(path, on_error="skip"))
    assert isinstance(error, TaskFormatError) and peak < PEAK_BOUND + 2 * LIMIT * 4  # the text buffer, as str
    assert str(error) == (
        f"{path}:{where}: {what} longer than {LIMIT:,} characters, the most one row may take (MAX_ROW_BYTES); "
        "the rest of the JSON array cannot be read"
    )


def test_rows_under_the_default_limit_read_as_before(tmp_path):
    assert records.MAX_ROW_BYTES >= 4 << 20  # a few MB: longer than any model's context
    big = json.dumps({**XLAM[0], "id": 1, "query": "q" * (1 << 20)}).encode()
    path = gzipped(tmp_path / "big.jsonl.gz", (b"\n", 1000), big + b"\n")
    assert [len(t.messages[-1]["content"]) for t in load_dataset(path).tasks] == [1 << 20]


def test_a_bfcl_answer_file_is_read_with_the_same_bound(tmp_path, small_rows):
    import shutil

    from slca_grpo.data.formats.bfcl import _answers

    folder = tmp_path / "bfcl"
    (folder / "possible_answer").mkdir(parents=True)
    shutil.copy(FIXTURES / "bfcl" / "BFCL_v4_simple_python.json", folder)
    answers = folder / "possible_answer" / "BFCL_v4_simple_python.json"
    answers.write_bytes(b'{"id": "simple_python_0", "ground_truth": "' + b"a" * BOMB_BYTES + b'"}\n')
    _answers.cache_clear()
    try:
        error, peak = peak_while(lambda: load_dataset(folder))
    finally:
        _answers.cache_clear()
    assert isinstance(error, TaskFormatError) and peak < PEAK_BOUND
    assert str(error).startswith(f"{answers}:1: not a BFCL answer line (row longer than {LIMIT:,} bytes")


# --- 14: an absurd synthetic n_train ----------------------------------------------------------------


def test_an_absurd_synthetic_n_train_is_a_one_line_config_error():
    with pytest.raises(ConfigError) as error:
        load_yaml_config(RunConfig, ROOT / "configs" / "smollm2.yaml", ["data.n_train=100000000000"])
    message = str(error.value)
    assert "data.n_train must be <= 1,000,000 while data.train or data.test is synthetic" in message
    assert "got 100,000,000,000; lower it" in message and "\n" not in message
    with pytest.raises(ConfigError, match="^n_test must be <= 1,000,000"):
        DataConfig(train="data/x.jsonl", test="synthetic", n_test=10**9)
    # From a file, n_train only limits what is read: the file bounds it.
    assert DataConfig(train="data/x.jsonl", test="data/y.jsonl", n_train=10**11).n_train == 10**11


def test_the_generator_refuses_more_than_its_maximum_before_allocating(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(generator, "MAX_SYNTHETIC_TASKS", 10)
    assert len(generator.generate_tasks(0, 10)) == 10
    with pytest.raises(ValueError, match="at most 10 synthetic tasks a split"):
        generator.generate_tasks(0, 11)
    with pytest.raises(SystemExit):
        synthetic_main(["--n-train", "11", "--out", str(tmp_path)])
    assert "at most 10 synthetic tasks a split" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
