"""Dataset files as a stream of rows: JSON Lines, JSON arrays and Parquet, plain or gzipped.

Every reader holds one row (and one read buffer) at a time, so memory stays flat in the file's
size. A row that cannot be decoded comes out as a :class:`Row` carrying its problem, so the caller
can stop or skip it; damage a reader cannot resynchronise after (a JSON array whose syntax breaks
mid-file, a corrupt Parquet file) raises :class:`~slca_grpo.data.tasks.TaskFormatError`.

A JSON row, with the blank space before it, is read only up to :data:`MAX_ROW_BYTES`: a gzip bomb
(one 2 GiB line, or 2 GiB of blank lines, in a 2 MB file) is a bad row, not gigabytes of memory or
minutes of work.
"""

from __future__ import annotations

import datetime
import errno
import gzip
import json
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from slca_grpo.data.tasks import TaskFormatError

SUFFIXES = (".jsonl", ".ndjson", ".json", ".parquet", ".jsonl.gz", ".ndjson.gz", ".json.gz")
PARQUET_BATCH_ROWS = 64
# The most one JSON row may take, blank lines (or, in an array, the space) before it included; read
# at call time, so tests can lower it. No model's context holds a longer row (8 MiB is ~2M tokens).
MAX_ROW_BYTES = 8 << 20
_CHUNK_CHARS = 1 << 20
_SKIP_BYTES = 1 << 16  # the piece in which the rest of an over-long line is read and dropped
_WHITESPACE = " \t\r\n"
_NOT_WHITESPACE = re.compile(r"[^ \t\r\n]")
_DELIMITERS = _WHITESPACE + ",]"
_LONGEST_CUT = 8  # how far before the buffer's end a cut value's decode error can lie ('"\u00' and the like)


@dataclass(frozen=True)
class Row:
    """One row of a file: its value, or why it could not be decoded."""

    path: str
    where: str | int  # a line number (JSON Lines) or "row N"
    index: int  # 1-based position among the file's rows
    value: Any = None
    problem: str | None = None


def _suffix(path: Path) -> str:
    name = path.name.lower()
    return next((s for s in sorted(SUFFIXES, key=len, reverse=True) if name.endswith(s)), "")


def dataset_files(path: str | os.PathLike[str]) -> list[Path]:
    """The data files of ``path``: the file itself, or a folder's files with a known suffix (sorted,
    not recursive; hidden files left out). Raises ``FileNotFoundError`` when there are none."""
    target = Path(path)
    if target.is_dir():
        files = sorted(p for p in target.iterdir() if p.is_file() and _suffix(p) and not p.name.startswith("."))
        if not files:
            raise FileNotFoundError(f"{target}: a folder with no data files ({', '.join(SUFFIXES)})")
        return files
    if not target.is_file():
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(target))
    return [target]  # a file of another name is read as JSON (an array, or one value per line)


def iter_rows(path: Path, max_row_bytes: int | None = None) -> Iterator[Row]:
    """The rows of one data file, in order; JSON rows longer than ``max_row_bytes`` (default
    :data:`MAX_ROW_BYTES`) are bad rows (JSON Lines) or stop the read (a JSON array)."""
    limit = MAX_ROW_BYTES if max_row_bytes is None else max_row_bytes
    suffix = _suffix(path)
    if suffix == ".parquet":
        yield from _parquet_rows(path)
        return
    opener = gzip.open if suffix.endswith(".gz") else open
    try:
        with opener(path, "rb") as handle:
            first = _first_significant_byte(handle, limit)
            handle.seek(0)
            if first == b"[":
                yield from _json_array_rows(path, handle, limit)
            else:
                yield from _json_lines_rows(path, handle, limit)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:  # a damaged or truncated gzip stream
        raise TaskFormatError(f"not a readable gzip file ({exc or type(exc).__name__})", path) from None


def _first_significant_byte(handle: IO[bytes], limit: int) -> bytes:
    """The first byte that is not blank (nor a byte-order mark) among the first ``limit``; b"" if none."""
    looked = 0
    while looked <= limit:
        chunk = handle.read(4096)
        if not chunk:
            return b""
        looked += len(chunk)
        stripped = chunk.lstrip(b" \t\r\n\xef\xbb\xbf")  # a UTF-8 byte-order mark too
        if stripped:
            return stripped[:1]
    return b""  # read as JSON Lines, whose reader reports the blank run


def _skip_blank(handle: IO[bytes], most: int | None) -> tuple[int, int]:
    """Consume blank bytes, at most ``most`` (None: all), a buffer at a time, not a line at a time
    (a billion blank lines take seconds, not minutes): (bytes consumed, line ends among them). Only
    called after a blank line: ``peek`` copies the read buffer, too much to pay at every row."""
    consumed = newlines = 0
    while most is None or consumed < most:
        ahead = handle.peek(1)  # type: ignore[attr-defined]  # gzip and buffered files peek
        ahead = ahead if most is None else ahead[: most - consumed]
        if not ahead:
            break
        blank = len(ahead) - len(ahead.lstrip())  # ASCII whitespace, as a blank line's strip(); no argument: fast
        if blank:
            newlines += ahead.count(b"\n", 0, blank)
            consumed += len(handle.read(blank))
        if blank < len(ahead):
            break
    return consumed, newlines


def _too_long(what: str, limit: int) -> str:
    return (
        f"{what} longer than {limit:,} bytes, the most one row may take (MAX_ROW_BYTES); "
        "--skip-bad / data.skip_bad_rows skips it"
    )


def _json_lines_rows(path: Path, handle: IO[bytes], limit: int) -> Iterator[Row]:
    """Rows of JSON Lines, each read with a bounded ``readline``: a row and the blank lines before
    it take at most ``limit`` bytes, line ends included; a longer one is a bad row, skipped through."""
    index = 0
    line_ends = 0  # line ends read so far: the next line is line_ends + 1
    blank = 0  # bytes of blank lines since the last row, which count against the next one
    run_start = 1  # where those blank lines start
    while True:
        raw = handle.readline(limit - blank + 1)
        if not raw:
            return
        if not raw.strip():
            run_start = run_start if blank else line_ends + 1
            line_ends += raw.count(b"\n")
            more, more_ends = _skip_blank(handle, limit + 1 - blank - len(raw))  # the run's rest, a buffer at a time
            blank += len(raw) + more
            line_ends += more_ends
            if blank > limit:
                index += 1
                yield Row(str(path), run_start, index, problem=_too_long("a run of blank lines", limit))
                line_ends += _skip_blank(handle, None)[1]
                blank = 0
            continue
        number = line_ends + 1
        index += 1
        if len(raw) > limit - blank:
            before = f" (with the {blank:,} bytes of blank lines before it)" if blank else ""
            yield Row(str(path), number, index, problem=_too_long(f"row{before}", limit))
            while not raw.endswith(b"\n"):  # drop the rest of the line, a piece at a time
                raw = handle.readline(_SKIP_BYTES)
                if not raw:
                    return
            line_ends, blank = line_ends + 1, 0
            continue
        line_ends, blank = line_ends + 1, 0
        try:
            text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            yield Row(str(path), number, index, problem=f"line is not UTF-8 ({exc.reason} at byte {exc.start})")
            continue
        try:
            yield Row(str(path), number, index, value=json.loads(text))
        except (ValueError, RecursionError) as exc:
            yield Row(str(path), number, index, problem=f"invalid JSON: {str(exc)[:200]}")


class _ArrayReader:
    """Values of a top-level JSON array, decoded one at a time from a growing text buffer. A row, with
    the space before it, takes at most ``limit`` characters: a longer one stops the read."""

    def __init__(self, path: Path, handle: IO[bytes], limit: int):
        import codecs

        self.path = path
        self.decode = codecs.getincrementaldecoder("utf-8-sig")()
        self.handle = handle
        self.limit = limit
        self.buffer = ""
        self.position = 0
        self.dropped = 0  # characters dropped from the buffer's front: positions in the file are dropped + index
        self.eof = False
        self.row = 1  # the row being read, whose budget starts at row_start in the file
        self.row_start = 0
        self.reading = "row 1"  # what the budget is spent on, for the error

    def start_row(self, row: int, reading: str | None = None) -> None:
        self.row, self.row_start = row, self.dropped + self.position
        self.reading = reading or f"row {row}"

    def fail(self, problem: str, row: int) -> TaskFormatError:
        return TaskFormatError(f"{problem}; the rest of the JSON array cannot be read", self.path, f"row {row}")

    def more(self, at_least: int = 0) -> bool:
        """Append a chunk, or ``at_least`` bytes if more (fewer at the end); False at the end of the file."""
        if self.eof:
            return False
        if self.position > _CHUNK_CHARS:  # drop what is decoded so the buffer stays one row long
            self.buffer = self.buffer[self.position :]
            self.dropped += self.position
            self.position = 0
        left = self.limit - (self.dropped + len(self.buffer) - self.row_start)
        if left < 0:
            raise self.fail(
                f"{self.reading} longer than {self.limit:,} characters, the most one row may take (MAX_ROW_BYTES)",
                self.row,
            )
        try:
            data = self.handle.read(min(max(at_least, _CHUNK_CHARS), left + 1))
            text = self.decode.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            raise TaskFormatError(f"not UTF-8 ({exc.reason})", self.path) from None
        self.eof = not data
        self.buffer += text
        return bool(data) or bool(text)

    def next_char(self) -> str:
        """The next non-whitespace character (not consumed), or "" at the end."""
        while True:
            found = _NOT_WHITESPACE.search(self.buffer, self.position)  # a run of space at C speed
            if found:
                self.position = found.start()
                return self.buffer[self.position]
            self.position = len(self.buffer)
            if not self.more():
                return ""

    def value(self, decoder: json.JSONDecoder, row: int) -> Any:
        self.next_char()  # raw_decode does not skip leading whitespace
        while True:
            try:
                value, end = decoder.raw_decode(self.buffer, self.position)
            except json.JSONDecodeError as exc:
                # Only a value the buffer's end cut can need more text; an error well inside the
                # buffer is the file's own, so the rest of a large file is not read in to report it.
                cut = exc.pos >= len(self.buffer) - _LONGEST_CUT or exc.msg.startswith("Unterminated string")
                if cut and self.more(len(self.buffer) - self.position):  # grow geometrically: linear overall
                    continue
                raise self.fail(f"invalid JSON: {str(exc)[:200]}", row) from None
            except RecursionError:
                raise self.fail("invalid JSON: nested too deeply", row) from None
            # A number cut by the buffer's end ("3" of "3.5e10") decodes too: read on and decode it whole.
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            tail = len(self.buffer) - end  # what follows the number: "e+" is the most a cut leaves
            cut = end == len(self.buffer) or (number and tail <= 2 and self.buffer[end] not in _DELIMITERS)
            if cut and self.more():
                continue
            self.position = end
            return value


def _json_array_rows(path: Path, handle: IO[bytes], limit: int) -> Iterator[Row]:
    reader = _ArrayReader(path, handle, limit)
    decoder = json.JSONDecoder()
    reader.next_char()
    reader.position += 1  # the opening "["
    row = 0
    reader.start_row(1)
    if reader.next_char() == "]":
        reader.position += 1
    else:
        while True:
            row += 1
            reader.start_row(row)
            yield Row(str(path), f"row {row}", row, value=reader.value(decoder, row))
            separator = reader.next_char()
            reader.position += 1
            if separator == "]":
                break
            if separator != ",":
                found = repr(separator) if separator else "the end of the file"
                raise reader.fail(f"expected ',' or ']' after the row, found {found}", row)
    reader.start_row(row, "the space after the closing ']'")  # held to a row's budget too
    if reader.next_char():
        raise reader.fail("text after the closing ']'", row)


class _NotJSON(ValueError):
    pass


def _json_ready(value: Any, field: str = "") -> Any:
    """A Parquet row's value as JSON would hold it: binary as UTF-8 text, dates and times as ISO
    strings (rows of every format are JSON-shaped, and tasks are written back as JSON)."""
    if isinstance(value, dict):
        return {key: _json_ready(item, f"{field}.{key}" if field else str(key)) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_ready(item, f"{field}[{i}]") for i, item in enumerate(value)]
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise _NotJSON(f"{field}: binary data that is not UTF-8 text") from None
    if isinstance(value, (datetime.date, datetime.time)):  # datetime is a date
        return value.isoformat()
    raise _NotJSON(f"{field}: a {type(value).__name__} value, which JSON cannot hold")


def _parquet_rows(path: Path) -> Iterator[Row]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - pyarrow is a dependency
        raise TaskFormatError("reading Parquet needs pyarrow: pip install pyarrow", path) from exc
    import pyarrow

    try:
        parquet = pq.ParquetFile(path, pre_buffer=False)
    except (pyarrow.ArrowException, OSError) as exc:
        raise TaskFormatError(f"not a readable Parquet file ({exc})", path) from None
    index = 0
    try:
        for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS):
            for value in batch.to_pylist():
                index += 1
                try:
                    yield Row(str(path), f"row {index}", index, value=_json_ready(value))
                except _NotJSON as exc:
                    yield Row(str(path), f"row {index}", index, problem=str(exc))
    except (pyarrow.ArrowException, OSError) as exc:
        raise TaskFormatError(f"the Parquet file is damaged after row {index} ({exc})", path) from None
