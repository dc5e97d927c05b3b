"""Where dataset writers put their output, and how a failed write is reported.

A regular file, or one not there yet, is written to a temporary file beside it and renamed over it,
so a failed write leaves the old file (or nothing). A character device or a named pipe
(``/dev/stdout``, ``/dev/null``, a FIFO) cannot be renamed over without destroying it: it is written
through. A symbolic link is followed: the file it points to is written (by those rules), the link
stays. Anything else (a folder, a socket, a block device) is refused. Every write error, ENOSPC on
``/dev/full`` included, is an ``OSError`` that names the path.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, TextIO


class OutputPathError(ValueError):
    """An output path that is neither a file to replace nor a device or pipe to write through."""


def output_target(path: str | os.PathLike[str]) -> tuple[Path, bool]:
    """(the path to write, whether to write through it rather than replace it atomically)."""
    given = Path(path)
    linked = given.is_symlink()
    try:
        mode = os.stat(given).st_mode  # what the links lead to
    except FileNotFoundError:
        return (Path(os.path.realpath(given)) if linked else given), False  # a new file, or a dangling link's
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return given, True  # opening follows the links, /proc's (/dev/stdout) too, which realpath cannot
    if stat.S_ISREG(mode):
        return (Path(os.path.realpath(given)) if linked else given), False  # the rename replaces the file, not the link
    kind = "a folder" if stat.S_ISDIR(mode) else "a block device" if stat.S_ISBLK(mode) else "not a regular file"
    raise OutputPathError(
        f"{given} is {kind}: give a file path to write (a character device or a named pipe is written through)"
    )


class _NamedFileIO(io.FileIO):
    """A file whose write errors name ``shown`` (a full disk, a closed pipe): every buffered write ends here."""

    def __init__(self, path: Path, mode: str, shown: Path):
        super().__init__(str(path), mode)
        self.shown = shown

    def write(self, data) -> int | None:  # type: ignore[override]
        try:
            return super().write(data)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(self.shown)) from None


def _open_binary(path: Path, shown: Path) -> BinaryIO:
    return io.BufferedWriter(_NamedFileIO(path, "w", shown))  # type: ignore[return-value]


@contextlib.contextmanager
def _closing(handle: io.IOBase) -> Iterator[None]:
    """Close ``handle``; a close that fails to flush raises unless the block already failed."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            handle.close()
        raise
    handle.close()


@contextlib.contextmanager
def atomic_text(path: str | os.PathLike[str]) -> Iterator[TextIO]:
    """A UTF-8 text file at ``path``: a regular file appears only when the block completes (temp file
    + rename); a device or pipe is written through (see the module docstring)."""
    target, through = output_target(path)
    if through:
        handle = io.TextIOWrapper(_open_binary(target, Path(path)), encoding="utf-8", newline="\n")
        with _closing(handle):
            yield handle
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        handle = io.TextIOWrapper(_open_binary(temporary, Path(path)), encoding="utf-8", newline="\n")
        with _closing(handle):
            yield handle
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


def copy_through(source: Path, target: Path, shown: str | os.PathLike[str]) -> None:
    """Copy the file ``source`` into the device or pipe ``target`` (errors name ``shown``)."""
    with open(source, "rb") as reading:
        handle = _open_binary(target, Path(shown))
        with _closing(handle):  # type: ignore[arg-type]
            shutil.copyfileobj(reading, handle)
