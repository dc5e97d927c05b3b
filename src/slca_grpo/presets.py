"""Named YAML presets shipped with the package (``configs/`` at the repository root)."""

from __future__ import annotations

from pathlib import Path

PRESET_DIR = Path(__file__).parent / "configs"


def list_presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def resolve_config_path(name_or_path: str) -> Path:
    """A config file path, or the path of a preset given by name (``demo``, ``smollm2`` …)."""
    path = Path(name_or_path)
    if path.exists():
        return path
    preset = PRESET_DIR / f"{name_or_path.removesuffix('.yaml')}.yaml"
    if preset.exists():
        return preset
    raise FileNotFoundError(
        f"no config file {name_or_path!r} and no preset of that name (presets: {', '.join(list_presets())})"
    )
