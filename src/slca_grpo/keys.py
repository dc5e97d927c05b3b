"""Secrets (service tokens, API keys): where each comes from.

**Endpoint API keys** (:func:`resolve_api_key`), one order everywhere, first found wins:

1. a key given explicitly: the simulator config's ``openai.api_key``, or ``--api-key-file``;
2. the role's own variable: ``$SLCA_SIM_API_KEY`` for the simulator's LLM backend, the variable
   named by ``RewardConfig.api_key_env`` for the judge and the completeness checker;
3. ``$OPENAI_API_KEY``.

No key at all is fine for local servers (vLLM, SGLang): the request then has no ``Authorization``.

**On the command line**, a secret given as a flag value is visible to every user of the machine in
``ps`` and lands in shell history, so those flags are kept only as deprecated aliases that warn;
``--x-file`` flags read the secret from a file instead (:func:`resolve_secret`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

MAX_SECRET_BYTES = 64 * 1024
SIMULATOR_TOKEN_ENV = "SLCA_SIM_TOKEN"  # the simulator service's bearer token, for server and clients
OPENAI_KEY_ENV = "OPENAI_API_KEY"  # every endpoint's last resort
SIMULATOR_KEY_ENV = "SLCA_SIM_API_KEY"  # the simulator's LLM backend, before $OPENAI_API_KEY


class SecretError(ValueError):
    """A secret file that cannot be used (missing, empty, too large)."""


def resolve_api_key(explicit: str | None = None, env: Sequence[str | None] = ()) -> str | None:
    """An endpoint's API key: ``explicit``, else the first set variable of ``env``, else
    ``$OPENAI_API_KEY``; None when there is none (see the module docstring)."""
    if explicit:
        return explicit
    for name in (*env, OPENAI_KEY_ENV):
        if name and os.environ.get(name):
            return os.environ[name]
    return None


def read_secret_file(path: str | os.PathLike[str], flag: str) -> str:
    """The first line of ``path``, stripped; a one-line error naming ``flag`` otherwise."""
    file = Path(path).expanduser()
    try:
        if file.stat().st_size > MAX_SECRET_BYTES:
            raise SecretError(f"{flag} {file}: larger than {MAX_SECRET_BYTES} bytes, not a secret file")
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise SecretError(f"{flag} {file}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise SecretError(f"{flag} {file}: not UTF-8 text") from None
    secret = text.strip().splitlines()[0].strip() if text.strip() else ""
    if not secret:
        raise SecretError(f"{flag} {file}: the file is empty")
    return secret


def resolve_secret(
    *,
    file: str | None,
    file_flag: str,
    env: Sequence[str],
    flag_value: str | None = None,
    flag: str | None = None,
    read_env: bool = True,
) -> str | None:
    """A secret from ``--x-file``, else from the deprecated plain flag (with a warning on stderr),
    else from the first set variable of ``env`` (unless ``read_env`` is false: the caller reads it
    later itself); ``None`` when none is given."""
    if file:
        return read_secret_file(file, file_flag)
    if flag_value:
        where = " or ".join(f"${name}" for name in env)
        print(
            f"warning: {flag} puts the secret in the process list and shell history; "
            f"use {where} or {file_flag} FILE instead ({flag} will be removed)",
            file=sys.stderr,
        )
        return flag_value
    for name in env if read_env else ():
        if os.environ.get(name):
            return os.environ[name]
    return None
