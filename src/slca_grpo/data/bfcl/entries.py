"""BFCL categories and entries, read from the bfcl-eval package's own data files."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from slca_grpo.data.bfcl.package import load_bfcl

# The 13 categories the paper reports (docs/method.md §8), under bfcl-eval's file names.
PAPER_CATEGORIES: tuple[str, ...] = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "simple_java",
    "simple_javascript",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
)
# Offline-capable but not in the paper's set: scored on request only.
EXTRA_CATEGORIES: tuple[str, ...] = ("multi_turn_long_context",)
SUPPORTED_CATEGORIES: tuple[str, ...] = PAPER_CATEGORIES + EXTRA_CATEGORIES

CATEGORY_ALIASES: dict[str, str] = {
    "simple": "simple_python",
    "python": "simple_python",
    "java": "simple_java",
    "javascript": "simple_javascript",
    "js": "simple_javascript",
}

_RELEVANCE_REASON = (
    "relevance detection (no call expected / any call expected) is not among the paper's 13 "
    "categories and is not implemented by this harness"
)
EXCLUDED_CATEGORIES: dict[str, str] = {
    "web_search_base": "needs live web search (SerpAPI key and network access)",
    "web_search_no_snippet": "needs live web search (SerpAPI key and network access)",
    "memory_kv": "memory categories replay multi-session prerequisite conversations and write "
    "memory snapshots; not supported offline by this harness",
    "memory_vector": "needs a sentence-transformers model from the Hugging Face Hub and faiss",
    "memory_rec_sum": "memory categories replay multi-session prerequisite conversations and write "
    "memory snapshots; not supported offline by this harness",
    "format_sensitivity": "a non-scoring diagnostic of prompt formats, not a BFCL accuracy category",
    "irrelevance": _RELEVANCE_REASON,
    "live_irrelevance": _RELEVANCE_REASON,
    "live_relevance": _RELEVANCE_REASON,
}


class UnsupportedCategoryError(ValueError):
    """A category this harness cannot (or deliberately does not) score."""


def resolve_category(name: str) -> str:
    """bfcl-eval's name for a category or alias; a clear error for excluded or unknown ones."""
    key = name.strip()
    key = CATEGORY_ALIASES.get(key, key)
    if key in SUPPORTED_CATEGORIES:
        return key
    if key in EXCLUDED_CATEGORIES:
        raise UnsupportedCategoryError(f"BFCL category {name!r} is excluded: {EXCLUDED_CATEGORIES[key]}")
    known = ", ".join(SUPPORTED_CATEGORIES)
    raise UnsupportedCategoryError(f"unknown BFCL category {name!r}; supported: {known}")


def resolve_categories(names: list[str] | tuple[str, ...] | None) -> list[str]:
    """Resolved, de-duplicated categories in the given order; ``None`` means the paper's 13.

    Each name may also be a comma list, as bfcl's own CLI takes them (``simple_python,multiple``).
    """
    names = [part for name in names or () for part in name.split(",") if part.strip()]
    if not names:
        return list(PAPER_CATEGORIES)
    resolved: list[str] = []
    for name in names:
        category = resolve_category(name)
        if category not in resolved:
            resolved.append(category)
    return resolved


def is_multi_turn(category: str) -> bool:
    return category.startswith("multi_turn")


def language_of(category: str) -> str:
    """``python``, ``java`` or ``javascript``: how the AST checker reads argument values."""
    if category.endswith("_java"):
        return "java"
    if category.endswith("_javascript"):
        return "javascript"
    return "python"


@dataclass
class BFCLEntry:
    """One BFCL test entry with its gold answer.

    ``functions`` are the raw docs the checker reads; ``prompt_functions`` are the docs a model
    sees in the official generation step (bfcl-eval's language hints appended; Java/JavaScript
    parameters retyped as strings). ``missed_functions`` maps a turn index to the docs that
    become available at that turn (``multi_turn_miss_func``).
    """

    id: str
    category: str
    question: list[list[dict[str, Any]]]
    functions: list[dict[str, Any]]
    prompt_functions: list[dict[str, Any]]
    ground_truth: list[Any]
    initial_config: dict[str, Any] = field(default_factory=dict)
    involved_classes: list[str] = field(default_factory=list)
    missed_functions: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)  # the entry as bfcl-eval loads it

    @property
    def language(self) -> str:
        return language_of(self.category)

    @property
    def multi_turn(self) -> bool:
        return is_multi_turn(self.category)

    @property
    def long_context(self) -> bool:
        return "long_context" in self.category

    def all_prompt_functions(self) -> list[dict[str, Any]]:
        """Every doc the entry can ever show, including those held out until a later turn."""
        held_out = [doc for turn in sorted(self.missed_functions) for doc in self.missed_functions[turn]]
        return list(self.prompt_functions) + held_out


def _missed_functions(entry: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    return {int(turn): list(docs) for turn, docs in (entry.get("missed_function") or {}).items()}


@functools.cache
def _category_files(category: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(raw entries, entries with prompt hints, answers) of a category, read once per process.

    Multi-turn categories take ~0.6 s to load (bfcl-eval re-reads the doc files per entry), and
    the runner and the oracle both need them. Callers must treat the result as read-only.
    """
    bfcl = load_bfcl()
    raw_entries = bfcl.load_dataset_entry(category, include_prereq=False, include_language_specific_hint=False)
    prompt_entries = bfcl.load_dataset_entry(category, include_prereq=False, include_language_specific_hint=True)
    answers = bfcl.load_ground_truth_entry(category)
    if not (len(raw_entries) == len(prompt_entries) == len(answers)):
        raise RuntimeError(
            f"bfcl-eval data for {category} is inconsistent: {len(raw_entries)} entries, {len(answers)} answers"
        )
    return raw_entries, prompt_entries, answers


def load_entries(category: str, limit: int | None = None) -> list[BFCLEntry]:
    """The first ``limit`` entries (file order) of a category, with docs and gold answers.

    Entries share the cached data of their category: treat them as read-only.
    """
    category = resolve_category(category)
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    raw_entries, prompt_entries, answers = _category_files(category)
    count = len(raw_entries) if limit is None else min(limit, len(raw_entries))
    entries: list[BFCLEntry] = []
    # bfcl-eval aligns prompts and answers by position (some answer ids differ in format).
    for raw, prompt, answer in zip(raw_entries[:count], prompt_entries[:count], answers[:count], strict=True):
        entries.append(
            BFCLEntry(
                id=raw["id"],
                category=category,
                question=raw["question"],
                functions=raw.get("function") or [],
                prompt_functions=prompt.get("function") or [],
                ground_truth=answer["ground_truth"],
                initial_config=raw.get("initial_config") or {},
                involved_classes=list(raw.get("involved_classes") or []),
                missed_functions=_missed_functions(prompt),
                raw=raw,
            )
        )
    return entries
