"""BFCL evaluation with the official data and checkers of the ``bfcl-eval`` package, offline.

Importing this package does not import bfcl-eval; :func:`run_bfcl` and the loaders do, through
:func:`slca_grpo.data.bfcl.package.load_bfcl`, which explains how to install it when it is missing.
"""

from slca_grpo.data.bfcl.calls import UnsafeCallError, build_call_string, parse_call_string
from slca_grpo.data.bfcl.convert import (
    calls_to_checker_format,
    convert_schema,
    doc_to_tool,
    docs_to_tools,
    exposed_names,
)
from slca_grpo.data.bfcl.entries import (
    EXCLUDED_CATEGORIES,
    PAPER_CATEGORIES,
    SUPPORTED_CATEGORIES,
    BFCLEntry,
    UnsupportedCategoryError,
    load_entries,
    resolve_categories,
    resolve_category,
)
from slca_grpo.data.bfcl.package import BFCL_INSTALL_COMMAND, BFCLNotInstalledError, load_bfcl
from slca_grpo.eval.bfcl.multi_turn import MultiTurnEpisode
from slca_grpo.eval.bfcl.oracle import BFCLOracleAgent
from slca_grpo.eval.bfcl.results import BFCLReport, CategoryScore, EntryResult
from slca_grpo.eval.bfcl.runner import run_bfcl
from slca_grpo.eval.bfcl.single_turn import SingleTurnEpisode, score_single_turn

__all__ = [
    "BFCL_INSTALL_COMMAND",
    "BFCLEntry",
    "BFCLNotInstalledError",
    "BFCLOracleAgent",
    "BFCLReport",
    "CategoryScore",
    "EXCLUDED_CATEGORIES",
    "EntryResult",
    "MultiTurnEpisode",
    "PAPER_CATEGORIES",
    "SUPPORTED_CATEGORIES",
    "SingleTurnEpisode",
    "UnsafeCallError",
    "UnsupportedCategoryError",
    "build_call_string",
    "calls_to_checker_format",
    "convert_schema",
    "doc_to_tool",
    "docs_to_tools",
    "exposed_names",
    "load_bfcl",
    "load_entries",
    "parse_call_string",
    "resolve_categories",
    "resolve_category",
    "run_bfcl",
    "score_single_turn",
]
