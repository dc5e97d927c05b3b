"""The TRL this integration is written against, checked before anything of TRL is used.

The integration overrides a few methods of TRL's ``GRPOTrainer`` (and of the transformers
``Trainer`` beneath it) and reads the batch it returns; both change between TRL releases, so any
TRL outside the pin is refused with one line naming both versions rather than trained on with a
silently different loss.
"""

from __future__ import annotations

from importlib import metadata

TRL_PIN = "1.16"  # major.minor; any patch release of it

__all__ = ["TRL_PIN", "TRLVersionError", "require_trl"]


class TRLVersionError(ImportError):
    """TRL is missing, or is a release outside :data:`TRL_PIN`."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def require_trl(version: str | None = None) -> str:
    """The installed TRL's version; :class:`TRLVersionError` when it is missing or not ``TRL_PIN.x``.

    ``version`` checks a given version string instead of the installed one.
    """
    if version is None:
        try:
            version = metadata.version("trl")
        except metadata.PackageNotFoundError:
            raise TRLVersionError(
                f"slca_grpo.integrations.trl needs TRL {TRL_PIN}.x, which is not installed: "
                f"pip install 'slca-grpo[trl]' (or 'trl=={TRL_PIN}.*')"
            ) from None
    if version.split("+")[0].split(".")[:2] != TRL_PIN.split("."):
        raise TRLVersionError(
            f"slca_grpo.integrations.trl is written against TRL {TRL_PIN}.x, but TRL {version} is installed: "
            f"pip install 'trl=={TRL_PIN}.*'"
        )
    return version
