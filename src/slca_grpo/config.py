"""Typed dataclass configs: built from nested dicts (YAML), overridden with ``a.b=c`` strings.

Unknown keys and values of the wrong type are errors that name the dotted key, so a typo in a
preset or on the command line never passes silently.

A section may also hold named subsections known only once plugins are loaded (``rl.advantage.<name>``:
the settings of an estimator): a field made with :func:`subsections_field`, and a classmethod
``subsection_types()`` mapping each name to its dataclass. They read and print as keys of the section.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, Union

import yaml

from slca_grpo.plugins import load_plugins

T = TypeVar("T")

# Field metadata marking the one field of a section that holds its named subsections.
SUBSECTIONS = "subsections"


class ConfigError(ValueError):
    """A bad config value or key: one line that names it. The one error type of every config."""


def at_least(config: Any, minimum: float, *names: str) -> None:
    """ConfigError naming the first of ``names`` whose value on ``config`` is below ``minimum``."""
    for name in names:
        value = getattr(config, name)
        if not value >= minimum:  # also catches NaN
            raise ConfigError(f"{name} must be >= {minimum}, got {value!r}")


def one_of(config: Any, name: str, choices: Iterable[Any]) -> None:
    """ConfigError unless ``config.name`` is one of ``choices``."""
    choices = tuple(choices)
    if getattr(config, name) not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(map(str, choices))}, got {getattr(config, name)!r}")


def subsections_field() -> Any:
    """The field of a section that holds its named subsections (name -> settings dataclass)."""
    return dataclasses.field(default_factory=dict, hash=False, metadata={SUBSECTIONS: True})


def subsections_of(cls: Any) -> tuple[str | None, dict[str, type]]:
    """(the subsections field of dataclass ``cls``, or None; each subsection's name -> its dataclass)."""
    for f in dataclasses.fields(cls):
        if f.metadata.get(SUBSECTIONS):
            return f.name, dict(cls.subsection_types())
    return None, {}


def check_subsection_type(what: str, name: str, settings: Any, section: type) -> None:
    """Refuse ``settings`` as the subsection ``name`` of ``section`` (``what`` says whose, for the
    message) unless it is a dataclass whose fields all have defaults, under a name that is a key
    of its own (no '.', not one of the section's fields)."""
    if not (isinstance(settings, type) and dataclasses.is_dataclass(settings)):
        raise TypeError(f"settings of {what} {name!r} must be a dataclass, got {settings!r}")
    taken = sorted(f.name for f in dataclasses.fields(section) if not f.metadata.get(SUBSECTIONS))
    if "." in name or name in taken:
        raise ValueError(
            f"{what} {name!r} has settings, so its name is a settings key: it may hold no '.' and may not be "
            f"one of {', '.join(taken)}"
        )
    try:
        settings()
    except (TypeError, ValueError) as exc:
        raise TypeError(f"settings of {what} {name!r} need a default for every field: {exc}") from None


def subsection_settings(subsections: Mapping[str, Any], name: str, settings: type | None, key: str) -> Any:
    """The settings object of subsection ``name`` (``key`` is its full config key, for the
    message): the one given, or the defaults of ``settings`` when a config predates the
    registration; None for an entry without settings."""
    if settings is None:
        return None
    own = subsections.get(name)
    if own is None:
        return settings()
    if not isinstance(own, settings):
        raise ConfigError(f"{key}: expected {settings.__name__}, got {own!r}")
    return own


def fill_subsections(section: Any, given: Mapping[str, Any]) -> dict[str, Any]:
    """Every subsection ``type(section)`` knows: the given one (a mapping is read), or its defaults.
    For a section's ``__post_init__``, so that a section built in code is complete too. Settings
    objects of a name no longer registered (a plugin unregistered since) are kept as they are."""
    _, types_by_name = subsections_of(type(section))
    unknown = [name for name in map(str, given) if name not in types_by_name and not _is_settings(given[name])]
    if unknown:
        raise ConfigError(f"unknown setting(s): {', '.join(unknown)} (known: {', '.join(types_by_name)})")
    filled = {name: value for name, value in given.items() if name not in types_by_name}
    for name, settings_type in types_by_name.items():
        value = given.get(name)
        if value is None:
            value = settings_type()
        elif isinstance(value, Mapping):
            value = from_dict(settings_type, value, prefix=f"{name}.")
        elif not isinstance(value, settings_type):
            raise ConfigError(f"{name}: expected {settings_type.__name__} settings, got {value!r}")
        filled[name] = value
    return filled


def _is_settings(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _float(value: Any) -> float | None:
    """``value`` as a float, also from the spellings YAML leaves as strings (``1e-3``, ``5E4``)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _coerce(value: Any, hint: Any, key: str) -> Any:
    origin = typing.get_origin(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _coerce(value, option, key)
            except ConfigError as exc:
                errors.append(str(exc))
        if all(o is bool or typing.get_origin(o) is Literal for o in options):  # e.g. bool | Literal["auto"]
            spelled = ["true", "false"] + [str(a) for o in options if o is not bool for a in typing.get_args(o)]
            raise ConfigError(f"{key} must be {', '.join(spelled[:-1])} or {spelled[-1]}, got {value!r}")
        raise ConfigError(errors[0] if errors else f"{key}: invalid value {value!r}")
    if origin is Literal:
        if isinstance(value, str) and value in typing.get_args(hint):
            return value
        raise ConfigError(f"{key} must be one of {', '.join(map(str, typing.get_args(hint)))}, got {value!r}")
    if dataclasses.is_dataclass(hint):
        if isinstance(value, hint):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        return from_dict(hint, value, prefix=key + ".")
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        args = typing.get_args(hint)
        item_hint = args[0] if args else Any
        items = [_coerce(v, item_hint, f"{key}[{i}]") for i, v in enumerate(value)]
        return items if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        return dict(value)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: expected true/false, got {value!r}")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if hint is float:
        number = _float(value)
        if number is None:
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        if not math.isfinite(number):
            raise ConfigError(f"{key} must be a finite number, got {value!r}")
        return number
    if hint is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    return value


def from_dict(cls: type[T], data: Mapping[str, Any], *, prefix: str = "") -> T:
    """Build dataclass ``cls`` from a nested mapping, checking keys and types; the one loader of
    every config section (each dataclass checks its own values in ``__post_init__``)."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{prefix.rstrip('.') or cls.__name__}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    open_field, subsection_types = subsections_of(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init and f.name != open_field}
    unknown = sorted(str(k) for k in data if k not in names and k not in subsection_types)
    if unknown:
        known = sorted(names) + list(subsection_types)
        raise ConfigError(f"unknown setting(s): {', '.join(prefix + k for k in unknown)} (known: {', '.join(known)})")
    kwargs = {name: _coerce(value, hints[name], prefix + name) for name, value in data.items() if name in names}
    if open_field is not None:
        kwargs[open_field] = {
            name: _coerce(value, subsection_types[name], prefix + name)
            for name, value in data.items()
            if name in subsection_types and name not in names
        }
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        message = str(exc)
        if message.split(" ", 1)[0].split(".", 1)[0] in names:  # "field must be ...": name it in full
            raise ConfigError(prefix + message) from None
        raise ConfigError(f"{prefix.rstrip('.') or cls.__name__}: {message}") from None


def to_dict(config: Any) -> Any:
    """``dataclasses.asdict``, with each section's subsections as keys of the section itself."""
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        data: dict[str, Any] = {}
        for f in dataclasses.fields(config):
            value = getattr(config, f.name)
            if f.metadata.get(SUBSECTIONS):
                data.update((name, to_dict(settings)) for name, settings in value.items())
            else:
                data[f.name] = to_dict(value)
        return data
    if isinstance(config, tuple) and hasattr(config, "_fields"):  # a named tuple
        return type(config)(*[to_dict(v) for v in config])
    if isinstance(config, (list, tuple)):
        return type(config)(to_dict(v) for v in config)
    if isinstance(config, dict):
        return type(config)((to_dict(k), to_dict(v)) for k, v in config.items())
    return copy.deepcopy(config)


def _set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = data
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            raise ConfigError(f"--set {dotted}: '{part}' is not a section")
        node = child
    if parts[-1] not in node:
        raise ConfigError(f"--set {dotted}: unknown setting '{parts[-1]}'")
    node[parts[-1]] = value


def apply_overrides(config: T, overrides: Iterable[str]) -> T:
    """Apply ``a.b=c`` overrides (values parsed as YAML scalars/lists) and re-validate."""
    data = to_dict(config)
    for override in overrides:
        if "=" not in override:
            raise ConfigError(f"--set expects KEY=VALUE, got {override!r}")
        key, raw = override.split("=", 1)
        try:
            value = load_yaml_text(raw) if raw.strip() else ""
        except yaml.YAMLError as exc:
            raise ConfigError(f"--set {key}: cannot parse value {raw!r} ({exc})") from None
        _set_path(data, key.strip(), value)
    return from_dict(type(config), data)


class DuplicateKeyError(yaml.YAMLError):
    """A key written twice in one mapping of a YAML file (PyYAML keeps the last one silently)."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key written twice in one mapping. Keys brought in by a
    merge (``<<: *base``) may be overridden: only keys written out are compared."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            first_line: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    earlier = first_line.get(key)
                except TypeError:  # an unhashable key: the constructor reports it
                    continue
                if earlier is not None:
                    raise DuplicateKeyError(
                        f"line {line}: key {key!r} is written twice in one section (also on line {earlier}); "
                        "keep one of them"
                    )
                first_line[key] = line
        return super().construct_mapping(node, deep=deep)


def load_yaml_text(text: str) -> Any:
    """``yaml.safe_load`` of a config text that refuses duplicate keys (``DuplicateKeyError``)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass


def load_yaml_config(cls: type[T], path: str | Path, overrides: Iterable[str] = ()) -> T:
    path = Path(path)
    try:
        data = load_yaml_text(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text (UTF-8) YAML file") from None
    except DuplicateKeyError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML ({exc})") from None
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: the top level must be a mapping")
    load_named_plugins(cls, data, overrides)
    try:
        config = from_dict(cls, data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return apply_overrides(config, overrides)


def load_named_plugins(cls: type, data: Mapping[str, Any], overrides: Iterable[str] = ()) -> None:
    """Import the plugins a config names (at ``cls.plugins_key``, e.g. ``train.plugins``, in the data
    or an override) before it is read: they may register names its settings use, such as an
    estimator's ``rl.advantage.<name>`` section. A malformed list is left for ``from_dict`` to report."""
    dotted = getattr(cls, "plugins_key", None)
    if not dotted:
        return
    node: Any = data
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    for override in overrides:
        key, sep, raw = override.partition("=")
        if sep and key.strip() == dotted:
            try:
                node = load_yaml_text(raw)
            except yaml.YAMLError:
                node = None
    if isinstance(node, list):
        load_plugins([item for item in node if isinstance(item, str)])


def save_yaml_config(config: Any, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(to_dict(config), sort_keys=False), encoding="utf-8")
