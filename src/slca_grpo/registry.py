"""Named entries that plugins add to: the one registry type behind estimators, reward families,
simulator backends and commands. Each registry lives with the layer it serves
(:data:`slca_grpo.algos.registry.ESTIMATORS`, :data:`slca_grpo.rewards.registry.REWARD_FAMILIES`,
:data:`slca_grpo.simulator.core.SIMULATOR_BACKENDS`, :data:`slca_grpo.cli.COMMANDS`); one rule for
names holds in all: a name is taken once per registry, and registering it again is an error unless
``replace=True``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


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
