"""Named YAML presets shipped with the package (``configs/`` at the repository root)."""

from __future__ import annotations

from pathlib import Path

PRESET_DIR = Path(__file__).parent / "configs"


def list_presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def resolve_config_path(name_or_path: str) -> Path:
    """A config file path, or the path of a preset given by name (``demo``, ``smollm2`` …)."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    if len(path.parts) > 1:  # a name with a path in it is the user's file, never a preset
        what = "a folder, not a config file" if path.is_dir() else "not a file"
        raise FileNotFoundError(
            f"{name_or_path!r} is {what} (a preset is named without a folder: {', '.join(list_presets())})"
        )
    # A folder of that name (a run's output, say ``demo-smollm2``) is not a config: the preset is meant.
    preset = PRESET_DIR / f"{name_or_path.removesuffix('.yaml')}.yaml"
    if preset.is_file():
        return preset
    what = "a folder, not a config file," if path.is_dir() else "no config file"
    raise FileNotFoundError(
        f"{name_or_path!r} is {what} and no preset has that name (presets: {', '.join(list_presets())})"
    )
