"""What every command shares."""

from __future__ import annotations

import sys


def fail(message: str, code: int = 2) -> int:
    """Print a one-line error (no traceback) and return the exit status."""
    print(f"error: {message}", file=sys.stderr)
    return code
