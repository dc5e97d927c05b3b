"""What code and environment a run was made with, so results are paired only within one of each.

A run folder's ``provenance.json`` records the package's source digest (a hash of every file of
the installed ``slca_grpo`` package, so it needs no git and sees uncommitted edits), the git commit
when the source is a checkout, and the environment that moves a run's digits: Python, torch,
transformers and numpy versions, and the CPU model. Two runs may be compared seed by seed only when
their :func:`pairing_key` agrees.
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

PROVENANCE_FILE = "provenance.json"
PACKAGE_DIR = Path(__file__).resolve().parent
LIBRARIES = ("torch", "transformers", "numpy")
# The fields that must agree for two runs to be paired (the commit is implied by the digest).
PAIRING_FIELDS = ("source_digest", "python", *LIBRARIES, "cpu")

# Fields this module writes as text (or null); "dirty" is a boolean (or null).
TEXT_FIELDS = ("source_digest", "commit", "version", "python", *LIBRARIES, "cpu")

__all__ = [
    "PROVENANCE_FILE",
    "ProvenanceDamaged",
    "describe",
    "pairing_key",
    "provenance",
    "read_provenance",
    "record_provenance",
]


class ProvenanceDamaged(ValueError):
    """A run folder's provenance.json that cannot be read or holds fields of the wrong type: the
    code and environment the run was made with are not known (and it is left as it is)."""


def source_digest(root: Path = PACKAGE_DIR) -> str:
    """sha256 (first 16 hex digits) over the package's files: their paths and contents."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        if path.suffix in (".pyc", ".pyo"):
            continue
        digest.update(str(path.relative_to(root)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(PACKAGE_DIR), *args], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def provenance() -> dict[str, Any]:
    """This process's code and environment (computed once)."""
    commit = _git("rev-parse", "HEAD")
    dirty = None
    if commit is not None:
        status = _git("status", "--porcelain", "--", ".")
        dirty = bool(status) if status is not None else None
    return {
        "source_digest": source_digest(),
        "commit": commit,
        "dirty": dirty,
        "version": _version("slca-grpo"),
        "python": platform.python_version(),
        **{library: _version(library) for library in LIBRARIES},
        "cpu": cpu_model(),
    }


def pairing_key(record: dict[str, Any]) -> tuple[Any, ...]:
    """What must agree between runs that are compared seed by seed."""
    return tuple(record.get(field) for field in PAIRING_FIELDS)


def printable(value: Any) -> str:
    """``value`` as text with control characters (terminal escape codes) written as escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(value))


def describe(record: dict[str, Any]) -> str:
    """One line: ``commit 9c222a1 (+ uncommitted changes), source 1a2b…, torch 2.13.0, …, CPU …``."""
    commit = record.get("commit")
    where = f"commit {printable(commit)[:7]}" if commit else "no git checkout"
    if record.get("dirty"):
        where += " (+ uncommitted changes)"
    libraries = ", ".join(f"{name} {printable(record.get(name))}" for name in ("python", *LIBRARIES))
    digest, cpu = printable(record.get("source_digest")), printable(record.get("cpu"))
    return f"{where}, source digest {digest}, {libraries}, CPU {cpu}"


def read_provenance(run_dir: str | Path) -> dict[str, Any] | None:
    """The provenance a run folder recorded; None for a folder made before it was recorded.
    Raises :class:`ProvenanceDamaged` (one line naming the file) for one that cannot be read."""
    path = Path(run_dir) / PROVENANCE_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ProvenanceDamaged(f"{path} cannot be read ({type(exc).__name__})") from None
    try:
        data = json.loads(text)
    except ValueError:
        raise ProvenanceDamaged(f"{path} is not JSON") from None
    if not isinstance(data, dict):
        raise ProvenanceDamaged(f"{path} holds {type(data).__name__}, not an object")
    for field in TEXT_FIELDS:
        if data.get(field) is not None and not isinstance(data[field], str):
            raise ProvenanceDamaged(f"{path}: {field} is {type(data[field]).__name__}, not text")
    if data.get("dirty") is not None and not isinstance(data["dirty"], bool):
        raise ProvenanceDamaged(f"{path}: dirty is {type(data['dirty']).__name__}, not true or false")
    return data


def add_to_provenance(run_dir: str | Path, **fields: Any) -> None:
    """Add ``fields`` (what became known as the run went: which C kernels ran, say) to a run
    folder's provenance, written whole or not at all; pairing reads none of them. A damaged
    provenance.json is left as it is (replacing it would pass the run off as made by this code)."""
    try:
        earlier = read_provenance(run_dir)
    except ProvenanceDamaged:
        return
    _write(Path(run_dir) / PROVENANCE_FILE, {**(earlier or provenance()), **fields})


def _write(path: Path, record: dict[str, Any]) -> None:
    """``record`` into ``path``, whole or not at all (a temporary file renamed into place)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1), encoding="utf-8")
    tmp.replace(path)


def record_provenance(run_dir: str | Path) -> dict[str, Any] | None:
    """Write this process's provenance into a run folder that has none; return the one recorded
    before when it differs (a run resumed with other code or on another machine), else None.
    Raises :class:`ProvenanceDamaged` for a damaged one, which is left as it is."""
    path = Path(run_dir) / PROVENANCE_FILE
    current = provenance()
    earlier = read_provenance(run_dir)
    if earlier is None:
        _write(path, current)
        return None
    return earlier if pairing_key(earlier) != pairing_key(current) else None
