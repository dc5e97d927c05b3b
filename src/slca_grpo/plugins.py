"""User plugins: modules of yours that add names to the registries (:mod:`slca_grpo.registry`).

A plugin is a module of yours, imported before a command runs, that registers estimators, reward
families, simulator backends or commands (a benchmark is a command under ``slca eval``).
``slca --plugin my_estimators train ...`` (a dotted module name on ``sys.path``) or
``--plugin path/to/file.py``; a module's top-level registration calls (``@register_estimator(...)``
and the like) then make its names usable like the built-ins. ``train.plugins`` in a config does the
same for that run. A run records every plugin it was started with in its ``config.yaml``, so
``slca train RUN/config.yaml --resume`` loads them again.

Every registry is a :class:`~slca_grpo.registry.Registry` held by the layer it serves, with one
rule for names: a name is taken once per registry, and registering it again is an error unless
``replace=True``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import ModuleType

_LOADED: dict[str, ModuleType] = {}


class PluginError(ImportError):
    """A plugin that cannot be found or fails while importing (one line, no traceback needed)."""


def _is_path(spec: str) -> bool:
    return spec.endswith(".py") or "/" in spec or "\\" in spec


def load_plugin(spec: str) -> ModuleType:
    """Import ``spec`` once (a dotted module name or a ``.py`` file) and return the module."""
    spec = spec.strip()
    if not spec:
        raise PluginError("a plugin must name a module or a .py file")
    key = str(Path(spec).expanduser().resolve()) if _is_path(spec) else spec
    if key in _LOADED:
        return _LOADED[key]
    try:
        if _is_path(spec):
            path = Path(key)
            if not path.is_file():
                raise PluginError(f"plugin file {spec} does not exist")
            name = f"slca_plugin_{path.stem}_{hashlib.sha1(key.encode()).hexdigest()[:8]}"
            module_spec = importlib.util.spec_from_file_location(name, path)
            if module_spec is None or module_spec.loader is None:
                raise PluginError(f"plugin file {spec} is not a Python module")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            try:
                module_spec.loader.exec_module(module)
            except BaseException:
                sys.modules.pop(name, None)
                raise
        else:
            module = importlib.import_module(spec)
    except PluginError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name and (spec == exc.name or spec.startswith(exc.name + ".")):
            raise PluginError(
                f"plugin module {spec!r} not found (is it on PYTHONPATH? a file needs its .py path)"
            ) from None
        raise PluginError(f"plugin {spec} failed to import: {type(exc).__name__}: {exc}") from exc
    except Exception as exc:  # the plugin's own code failed: say which plugin and why, once
        raise PluginError(f"plugin {spec} failed to import: {type(exc).__name__}: {exc}") from exc
    _LOADED[key] = module
    return module


def load_plugins(specs: Iterable[str]) -> list[ModuleType]:
    return [load_plugin(spec) for spec in specs]


def loaded_plugins() -> list[str]:
    """Every plugin imported so far (``--plugin`` and ``train.plugins``), in order, as a run
    records them: a file by its absolute path (so a resume from another folder finds it), a
    module by its name."""
    return list(_LOADED)


def split_plugin_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(plugin specs, the remaining arguments): ``--plugin X`` / ``--plugin=X`` anywhere on the line,
    so a plugin is loaded before the parser checks names such as ``--estimators``."""
    plugins: list[str] = []
    rest: list[str] = []
    items = iter(argv)
    for item in items:
        if item == "--plugin":
            value = next(items, None)
            if value is None:
                raise PluginError("--plugin needs a module name or a .py file")
            plugins.append(value)
        elif item.startswith("--plugin="):
            plugins.append(item.split("=", 1)[1])
        elif item == "--":
            rest.append(item)
            rest.extend(items)
        else:
            rest.append(item)
    return plugins, rest
