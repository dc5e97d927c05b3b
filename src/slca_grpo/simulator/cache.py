"""A response cache in one SQLite file, shared by threads and processes.

WAL mode lets readers run beside one writer; a busy timeout makes concurrent writers wait rather
than fail; ``INSERT OR IGNORE`` keeps the first answer for a key, and a writer that lost the race
reads the winner back, so every process replays the same answer. A damaged cache (a file that
starts like a SQLite database but cannot be read as one) is moved aside to
``<name>.corrupt-<timestamp>`` with a warning and rebuilt. Anything else at the path (a text file,
a directory, a device, another program's SQLite database) is the user's, so it is refused with a
one-line ConfigError and left untouched; an empty file becomes a new cache. A cache problem after
start-up never fails a call: it is counted and the call goes on uncached.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import threading
import time
import warnings
from pathlib import Path

from slca_grpo.config import ConfigError

logger = logging.getLogger(__name__)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS responses ("
    " key TEXT PRIMARY KEY, text TEXT NOT NULL, created_at REAL NOT NULL) WITHOUT ROWID"
)
_CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB
SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


class CacheCorruptWarning(UserWarning):
    """The cache file was unreadable and has been moved aside."""


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _CORRUPT_CODES
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text or "corrupt" in text


class ResponseCache:
    """Key → response text. Thread-safe (one connection per thread), multi-process safe."""

    def __init__(self, path: str | os.PathLike[str], busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._lock = threading.Lock()
        self._generation = 0
        self._connections: list[sqlite3.Connection] = []
        self.errors = 0
        self.recoveries = 0
        refusal = refuse_as_cache(self.path)
        if refusal is not None:
            raise ConfigError(f"simulator.cache_path '{self.path}' {refusal}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            foreign = self._foreign_tables()
            if foreign:
                raise ConfigError(
                    f"simulator.cache_path '{self.path}' is a SQLite database of something else (tables: "
                    f"{', '.join(foreign[:5])}); refusing to write to it, give a new file's path"
                )
            self._connection().execute("SELECT key FROM responses LIMIT 1").fetchall()
        except sqlite3.DatabaseError as exc:
            if not _is_corruption(exc):
                raise OSError(f"cannot open the simulator cache {self.path}: {exc}") from None
            self._recover(exc)

    def _foreign_tables(self) -> list[str]:
        """Tables of an existing database when none of them is the cache's (nothing is created)."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return []
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s)
        try:
            names = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        finally:
            conn.close()
        return [] if not names or "responses" in names else sorted(names)

    # -- connections -------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.generation == self._generation:
            return conn
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=False)
        deadline = time.monotonic() + self.busy_timeout_s
        delay = 0.01
        while True:
            try:
                conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_s * 1000)}")
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(_SCHEMA)
                break
            except sqlite3.OperationalError as exc:
                # Switching a new file to WAL can report "database is locked" at once, without
                # waiting for the busy timeout, while another process is creating the same file.
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    conn.close()
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
            except sqlite3.DatabaseError:
                conn.close()
                raise
        self._local.conn = conn
        self._local.generation = self._generation
        with self._lock:
            self._connections.append(conn)
        return conn

    def _recover(self, exc: sqlite3.DatabaseError) -> None:
        """Move the broken file (and its WAL side files) aside and start an empty cache."""
        if refuse_as_cache(self.path) is not None:  # replaced by something not ours since start-up
            raise sqlite3.DatabaseError(f"{self.path} is no longer a SQLite database; leaving it alone")
        with self._lock:
            for conn in self._connections:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._connections.clear()
            self._generation += 1
            stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
            moved = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
            for suffix in ("", "-wal", "-shm"):
                source = Path(str(self.path) + suffix)
                if source.exists():
                    try:
                        os.replace(source, Path(str(moved) + suffix))
                    except OSError:
                        source.unlink(missing_ok=True)
            self.recoveries += 1
        message = f"simulator cache {self.path} was unreadable ({exc}); moved it to {moved} and started a new one"
        logger.warning(message)
        warnings.warn(message, CacheCorruptWarning, stacklevel=3)
        self._connection()

    def _run(self, action, default):  # type: ignore[no-untyped-def]
        """Run ``action(conn)``; recover once from corruption; on any other failure count it."""
        for attempt in range(2):
            try:
                return action(self._connection())
            except sqlite3.DatabaseError as exc:
                if attempt == 0 and _is_corruption(exc):
                    try:
                        self._recover(exc)
                        continue
                    except sqlite3.Error:
                        pass
                self.errors += 1
                logger.warning("simulator cache error (%s); continuing without it for this call", exc)
                return default
        return default

    # -- API ---------------------------------------------------------------------------------

    def get(self, key: str) -> str | None:
        def action(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT text FROM responses WHERE key = ?", (key,)).fetchone()
            return row[0] if row else None

        return self._run(action, None)

    def put(self, key: str, text: str) -> str:
        """Store ``text`` unless the key is already there; returns the text the cache holds."""

        def action(conn: sqlite3.Connection) -> str:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO responses (key, text, created_at) VALUES (?, ?, ?)",
                (key, text, time.time()),
            )
            if cursor.rowcount == 1:
                return text
            row = conn.execute("SELECT text FROM responses WHERE key = ?", (key,)).fetchone()
            return row[0] if row else text

        return self._run(action, text)

    def __len__(self) -> int:
        return self._run(lambda conn: conn.execute("SELECT count(*) FROM responses").fetchone()[0], 0)

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._connections.clear()
            self._generation += 1


def refuse_as_cache(path: Path) -> str | None:
    """Why the file at ``path`` may not serve as a cache, or None when it may: nothing there yet, an
    empty file, or a file that starts with the SQLite header (a cache, possibly damaged)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if stat.S_ISDIR(info.st_mode):
        return "is a directory; give the SQLite file's path"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file (a device, pipe or socket); give the SQLite file's path"
    if info.st_size == 0:
        return None
    try:
        with open(path, "rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if header != SQLITE_HEADER:
        return "exists and is not a SQLite database; refusing to replace it, give a new file's path"
    return None
