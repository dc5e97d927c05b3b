"""Dataset files as a stream of rows: JSON Lines, JSON arrays and Parquet, plain or gzipped.

Every reader holds one row (and one read buffer) at a time, so memory stays flat in the file's
size. A row that cannot be decoded comes out as a :class:`Row` carrying its problem, so the caller
can stop or skip it; damage a reader cannot resynchronise after (a JSON array whose syntax breaks
mid-file, a corrupt Parquet file) raises :class:`~slca_grpo.data.tasks.TaskFormatError`.
"""

from __future__ import annotations

import datetime
import errno
import gzip
import json
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from slca_grpo.data.tasks import TaskFormatError

SUFFIXES = (".jsonl", ".ndjson", ".json", ".parquet", ".jsonl.gz", ".ndjson.gz", ".json.gz")
PARQUET_BATCH_ROWS = 64
_CHUNK_CHARS = 1 << 20
_WHITESPACE = " \t\r\n"
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


def iter_rows(path: Path) -> Iterator[Row]:
    """The rows of one data file, in order."""
    suffix = _suffix(path)
    if suffix == ".parquet":
        yield from _parquet_rows(path)
        return
    opener = gzip.open if suffix.endswith(".gz") else open
    try:
        with opener(path, "rb") as handle:
            first = _first_significant_byte(handle)
            handle.seek(0)
            if first == b"[":
                yield from _json_array_rows(path, handle)
            else:
                yield from _json_lines_rows(path, handle)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:  # a damaged or truncated gzip stream
        raise TaskFormatError(f"not a readable gzip file ({exc or type(exc).__name__})", path) from None


def _first_significant_byte(handle: IO[bytes]) -> bytes:
    while True:
        chunk = handle.read(4096)
        if not chunk:
            return b""
        stripped = chunk.lstrip(b" \t\r\n\xef\xbb\xbf")  # a UTF-8 byte-order mark too
        if stripped:
            return stripped[:1]


def _json_lines_rows(path: Path, handle: IO[bytes]) -> Iterator[Row]:
    index = 0
    for number, raw in enumerate(handle, start=1):
        if not raw.strip():
            continue
        index += 1
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
    """Values of a top-level JSON array, decoded one at a time from a growing text buffer."""

    def __init__(self, path: Path, handle: IO[bytes]):
        import codecs

        self.path = path
        self.decode = codecs.getincrementaldecoder("utf-8-sig")()
        self.handle = handle
        self.buffer = ""
        self.position = 0
        self.eof = False

    def fail(self, problem: str, row: int) -> TaskFormatError:
        return TaskFormatError(f"{problem}; the rest of the JSON array cannot be read", self.path, f"row {row}")

    def more(self, at_least: int = 0) -> bool:
        """Append a chunk, or ``at_least`` bytes if more (fewer at the end); False at the end of the file."""
        if self.eof:
            return False
        if self.position > _CHUNK_CHARS:  # drop what is decoded so the buffer stays one row long
            self.buffer = self.buffer[self.position :]
            self.position = 0
        try:
            data = self.handle.read(max(at_least, _CHUNK_CHARS))
            text = self.decode.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            raise TaskFormatError(f"not UTF-8 ({exc.reason})", self.path) from None
        self.eof = not data
        self.buffer += text
        return bool(data) or bool(text)

    def next_char(self) -> str:
        """The next non-whitespace character (not consumed), or "" at the end."""
        while True:
            while self.position < len(self.buffer) and self.buffer[self.position] in _WHITESPACE:
                self.position += 1
            if self.position < len(self.buffer):
                return self.buffer[self.position]
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


def _json_array_rows(path: Path, handle: IO[bytes]) -> Iterator[Row]:
    reader = _ArrayReader(path, handle)
    decoder = json.JSONDecoder()
    reader.next_char()
    reader.position += 1  # the opening "["
    row = 0
    if reader.next_char() == "]":
        reader.position += 1
    else:
        while True:
            row += 1
            yield Row(str(path), f"row {row}", row, value=reader.value(decoder, row))
            separator = reader.next_char()
            reader.position += 1
            if separator == "]":
                break
            if separator != ",":
                found = repr(separator) if separator else "the end of the file"
                raise reader.fail(f"expected ',' or ']' after the row, found {found}", row)
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
