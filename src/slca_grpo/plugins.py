"""User plugins, and the registries they add names to.

A plugin is a module of yours, imported before a command runs, that registers estimators, reward
families, simulator backends or commands (a benchmark is a command under ``slca eval``).
``slca --plugin my_estimators train ...`` (a dotted module name on ``sys.path``) or
``--plugin path/to/file.py``; a module's top-level registration calls (``@register_estimator(...)``
and the like) then make its names usable like the built-ins. ``train.plugins`` in a config does the
same for that run. A run records every plugin it was started with in its ``config.yaml``, so
``slca train RUN/config.yaml --resume`` loads them again.

Every registry is a :class:`Registry` held here, with one rule for names: a name is taken once per
registry, and registering it again is an error unless ``replace=True``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from slca_grpo.algos.registry import Estimator
    from slca_grpo.rewards.registry import RewardFamily
    from slca_grpo.simulator.core import BackendFactory

T = TypeVar("T")

_LOADED: dict[str, ModuleType] = {}


class UnknownNameError(KeyError):
    """A name no entry of a registry has; the message lists the known ones."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


class UnknownEstimatorError(UnknownNameError):
    """Raised for an estimator name that is not registered."""


class UnknownRewardError(UnknownNameError):
    """Raised for a reward (or family) name nothing registered provides."""


class Registry(Generic[T]):
    """Named entries that plugins add to: the one registry type behind estimators, reward
    families, simulator backends and commands.

    The rule for name clashes, the same in every registry: a name is taken once; registering it
    again raises ``ValueError`` naming the registry, the name and the module that took it, unless
    ``replace=True`` (tests, or a plugin that means to replace a built-in).
    """

    def __init__(self, kind: str, *, unknown: type[UnknownNameError] = UnknownNameError) -> None:
        self.kind = kind
        self._unknown = unknown
        self._entries: dict[str, T] = {}
        self._origins: dict[str, str] = {}

    def add(self, name: str, entry: T, *, origin: str = "", replace: bool = False) -> T:
        """Register ``entry`` as ``name``; ``origin`` is the module that registers it."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"{self.kind} name must be a non-empty string, got {name!r}")
        if name in self._entries and not replace:
            raise ValueError(
                f"{self.kind} {name!r} is already registered (by {self._origins[name] or 'unknown'}); "
                "pass replace=True to replace it"
            )
        self._entries[name] = entry
        self._origins[name] = origin
        return entry

    def remove(self, name: str) -> None:
        """Unregister ``name`` (plugins and tests); an unknown name raises."""
        self.get(name)
        del self._entries[name]
        del self._origins[name]

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise self._unknown(f"unknown {self.kind} {name!r}; known: {', '.join(self._entries)}") from None

    def names(self) -> list[str]:
        """The registered names, in registration order."""
        return list(self._entries)

    def values(self) -> list[T]:
        return list(self._entries.values())

    def origin(self, name: str) -> str:
        """The module that registered ``name``."""
        self.get(name)
        return self._origins[name]

    def is_builtin(self, name: str) -> bool:
        """Whether ``name`` was registered by this package rather than by a plugin."""
        return self.origin(name).split(".", 1)[0] == "slca_grpo"

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


ESTIMATORS: Registry[Estimator] = Registry("advantage estimator", unknown=UnknownEstimatorError)
REWARD_FAMILIES: Registry[RewardFamily] = Registry("reward family", unknown=UnknownRewardError)
SIMULATOR_BACKENDS: Registry[BackendFactory] = Registry("simulator backend")
# A plugin's commands: ``register(subparsers)`` and the parent command (None: the top level).
COMMANDS: Registry[tuple[Any, str | None]] = Registry("command")


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
