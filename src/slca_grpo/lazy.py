"""Lazy package exports (PEP 562): a package's public names load from their submodules on first
use, so ``slca --help`` and light importers do not pay for torch, httpx or τ²."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str], *, load_first: str | None = None) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports ``exports[name]`` (a submodule name)
    on first access and caches the value; ``load_first`` is a submodule imported before any name
    (e.g. one that registers built-ins)."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if load_first is not None:
            importlib.import_module(f"{package}.{load_first}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return __getattr__
