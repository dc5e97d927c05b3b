"""Charts written to files: matplotlib without a display, for every report that draws one."""

from __future__ import annotations

from typing import Any


def agg_pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
