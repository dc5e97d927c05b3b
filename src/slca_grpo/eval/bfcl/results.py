"""Result records of a BFCL run: per entry, per category and overall."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

_MAX_ERROR_CHARS = 2_000


def short_error(error: Any) -> str:
    """A checker's error (string, list or dict) as one bounded, JSON-safe string."""
    if error is None:
        return ""
    if isinstance(error, str):
        text = error
    else:
        try:
            text = json.dumps(error, default=str, ensure_ascii=False)
        except (TypeError, ValueError):
            text = str(error)
    return text if len(text) <= _MAX_ERROR_CHARS else text[:_MAX_ERROR_CHARS] + "..."


@dataclass
class EntryResult:
    """How one entry went: the checker's verdict, the agent's texts and the calls parsed from them.

    ``responses`` and ``calls`` have one element per assistant step (single-turn entries have
    one step); ``turns`` groups step indices by user turn for multi-turn entries. Calls use the
    original BFCL function names.
    """

    id: str
    category: str
    valid: bool
    error_type: str = ""
    error: str = ""
    responses: list[str] = field(default_factory=list)
    calls: list[list[dict[str, Any]]] = field(default_factory=list)
    turns: list[list[int]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CategoryScore:
    category: str
    correct: int
    total: int

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "accuracy": self.accuracy,
            "correct": self.correct,
            "total": self.total,
        }


@dataclass
class BFCLReport:
    """Per-entry results and accuracies of one run.

    ``overall_accuracy`` is the unweighted mean of the category accuracies, so a small category
    (live_parallel, 16 entries) counts as much as a large one (live_multiple, 1,053). This is
    simpler than BFCL's leaderboard aggregation (which mixes weighted and unweighted means over
    its groups) and is the mean the paper's single BFCL number is compared against.
    """

    agent: str
    categories: list[str]
    results: list[EntryResult]
    limit: int | None = None
    bfcl_eval_version: str = ""
    out_dir: Path | None = None

    def category_scores(self) -> dict[str, CategoryScore]:
        scores = {category: CategoryScore(category, 0, 0) for category in self.categories}
        for result in self.results:
            score = scores.setdefault(result.category, CategoryScore(result.category, 0, 0))
            score.total += 1
            score.correct += int(result.valid)
        return scores

    @property
    def accuracy(self) -> dict[str, float]:
        """Accuracy per category."""
        return {name: score.accuracy for name, score in self.category_scores().items()}

    @property
    def overall_accuracy(self) -> float:
        """Unweighted mean over the categories that have at least one entry."""
        scored = [score.accuracy for score in self.category_scores().values() if score.total]
        return sum(scored) / len(scored) if scored else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "bfcl_eval_version": self.bfcl_eval_version,
            "limit": self.limit,
            "overall_accuracy": self.overall_accuracy,
            "overall_definition": "unweighted mean of the per-category accuracies",
            "categories": {name: score.to_dict() for name, score in self.category_scores().items()},
            "num_entries": len(self.results),
        }
