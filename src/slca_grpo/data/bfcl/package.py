"""Isolated, offline import of the ``bfcl-eval`` package's data and checkers.

Importing ``bfcl_eval`` naively has two side effects we avoid:

* ``bfcl_eval.constants.eval_config`` creates ``result/``, ``score/`` and ``.file_locks/`` under
  ``BFCL_PROJECT_ROOT`` (by default inside site-packages). We point it at a private temporary
  folder for the duration of the import and remove that folder at exit.
* ``bfcl_eval.constants.model_config`` imports every provider SDK (OpenAI, Anthropic, CUDA torch,
  ...). The checkers only read ``MODEL_CONFIG_MAPPING[name].underscore_to_dot``, so a small
  stand-in module is placed in ``sys.modules`` first.

Everything else reaches bfcl-eval through :func:`load_bfcl`, so importing ``slca_grpo.data.bfcl``
or ``slca_grpo.eval.bfcl`` stays cheap and works without the package installed.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import sys
import tempfile
import types
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

BFCL_EVAL_VERSION = "2026.3.23"
# Measured: these are all the third-party modules the data loaders, the AST checker and the
# multi-turn backends import (tree-sitter is only needed by bfcl-eval's own prompt decoders).
BFCL_INSTALL_COMMAND = f"pip install --no-deps bfcl-eval=={BFCL_EVAL_VERSION} mpmath filelock"

# The checkers look this name up (after replacing "_" by "/") in MODEL_CONFIG_MAPPING; it has no
# underscore so the lookup key is the name itself. ``underscore_to_dot=False`` makes the AST
# checker compare dotted function names as they are; our converter maps names back beforehand.
CHECKER_MODEL_NAME = "slca-grpo-harness"

_MODEL_CONFIG_MODULE = "bfcl_eval.constants.model_config"
_EVAL_CONFIG_MODULE = "bfcl_eval.constants.eval_config"


class BFCLNotInstalledError(ImportError):
    """``bfcl-eval`` (or one of the few modules its checkers need) is missing."""


@dataclass(frozen=True)
class _StandInModelConfig:
    """The one attribute of bfcl-eval's ``ModelConfig`` that the checkers read."""

    model_name: str
    underscore_to_dot: bool = False


@dataclass(frozen=True)
class BFCL:
    """Handles on the parts of bfcl-eval the harness uses."""

    version: str
    project_root: Path  # the private folder bfcl-eval writes its (empty) result/score dirs to
    data_dir: Path
    ast_checker: Callable[..., dict[str, Any]]
    multi_turn_checker: Callable[..., dict[str, Any]]
    execute_multi_turn_func_call: Callable[..., tuple[list[str], dict[str, Any]]]
    multi_turn_utils: types.ModuleType  # holds the backend instances in its globals()
    load_dataset_entry: Callable[..., list[dict[str, Any]]]
    load_ground_truth_entry: Callable[[str], list[dict[str, Any]]]
    add_language_hints: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]  # in place, by entry id
    language: Any  # the bfcl_eval.constants.enums.Language enum
    class_module_paths: dict[str, str]  # backend class name -> module path
    max_steps_per_turn: int
    additional_function_prompt: str  # the user message of a miss_func turn (FC style)

    def backend_class(self, class_name: str) -> type:
        """A multi-turn backend class (imported, not instantiated)."""
        import importlib

        if class_name not in self.class_module_paths:
            raise KeyError(f"unknown BFCL backend class {class_name!r}")
        return getattr(importlib.import_module(self.class_module_paths[class_name]), class_name)


def _install_model_config_stand_in() -> None:
    entry = _StandInModelConfig(model_name=CHECKER_MODEL_NAME)
    existing = sys.modules.get(_MODEL_CONFIG_MODULE)
    if existing is not None:
        # The real module (or our stand-in) is already loaded: just make sure our name resolves.
        existing.MODEL_CONFIG_MAPPING.setdefault(CHECKER_MODEL_NAME, entry)
        return
    stand_in = types.ModuleType(_MODEL_CONFIG_MODULE)
    stand_in.__doc__ = "slca-grpo stand-in: keeps provider SDKs out of the checker import."
    stand_in.ModelConfig = _StandInModelConfig
    stand_in.MODEL_CONFIG_MAPPING = {CHECKER_MODEL_NAME: entry}
    sys.modules[_MODEL_CONFIG_MODULE] = stand_in


def _private_project_root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="slca-bfcl-"))
    atexit.register(shutil.rmtree, root, True)
    return root


@functools.lru_cache(maxsize=1)
def load_bfcl() -> BFCL:
    """Import bfcl-eval's checkers and loaders once, without side effects outside a temp folder.

    Raises :class:`BFCLNotInstalledError` with the install command when something is missing.
    """
    try:
        version = metadata.version("bfcl-eval")
    except metadata.PackageNotFoundError as exc:
        raise BFCLNotInstalledError(
            f"the BFCL harness needs the bfcl-eval package; install it with:\n  {BFCL_INSTALL_COMMAND}"
        ) from exc

    already_configured = _EVAL_CONFIG_MODULE in sys.modules
    root = _private_project_root()
    previous_root = os.environ.get("BFCL_PROJECT_ROOT")
    os.environ["BFCL_PROJECT_ROOT"] = str(root)
    _install_model_config_stand_in()
    try:
        from bfcl_eval.constants import default_prompts, eval_config
        from bfcl_eval.constants.enums import Language
        from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
        from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker
        from bfcl_eval.utils import (
            add_language_specific_hint_to_function_doc,
            load_dataset_entry,
            load_ground_truth_entry,
        )
    except ImportError as exc:
        raise BFCLNotInstalledError(
            f"bfcl-eval {version} is installed but cannot be imported ({exc}); "
            f"install the checker dependencies with:\n  {BFCL_INSTALL_COMMAND}"
        ) from exc
    finally:
        if previous_root is None:
            os.environ.pop("BFCL_PROJECT_ROOT", None)
        else:
            os.environ["BFCL_PROJECT_ROOT"] = previous_root

    return BFCL(
        version=version,
        project_root=Path(eval_config.PROJECT_ROOT) if already_configured else root,
        data_dir=Path(eval_config.PROMPT_PATH),
        ast_checker=ast_checker,
        multi_turn_checker=multi_turn_checker,
        execute_multi_turn_func_call=multi_turn_utils.execute_multi_turn_func_call,
        multi_turn_utils=multi_turn_utils,
        load_dataset_entry=load_dataset_entry,
        load_ground_truth_entry=load_ground_truth_entry,
        add_language_hints=add_language_specific_hint_to_function_doc,
        language=Language,
        class_module_paths=dict(CLASS_FILE_PATH_MAPPING),
        max_steps_per_turn=int(default_prompts.MAXIMUM_STEP_LIMIT),
        additional_function_prompt=str(default_prompts.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC),
    )
