"""Completeness checkers for the RLTR planner reward (docs/method.md §5): does a plan of tool calls cover
the user's request? ``check`` returns N verdicts (0/1) whose mean is ``R_comp``; failures are
counted and read as "not complete", never raised. The LLM checker is in ``openai_checker.py``."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from slca_grpo.datatypes import Task, ToolCall
from slca_grpo.rewards.matching import max_bipartite_matching, strict_call_match


@dataclass(frozen=True)
class CompletenessVerdict:
    complete: bool
    failed: bool = False
    error: str | None = None
    raw: str | None = None

    @property
    def score(self) -> float:
        return 1.0 if self.complete and not self.failed else 0.0


@dataclass(frozen=True)
class CompletenessRequest:
    task: Task
    calls: tuple[ToolCall, ...]


class CompletenessChecker(ABC):
    """Gives N completeness verdicts per plan; ``calls``/``failures`` count single verdicts."""

    name = "checker"

    def __init__(self) -> None:
        self.calls = 0
        self.failures = 0
        self._counter_lock = threading.Lock()

    @abstractmethod
    def _check_many(self, requests: Sequence[CompletenessRequest], n: int) -> list[list[CompletenessVerdict]]:
        """N verdicts for each request; may raise (turned into failures)."""

    def check(self, task: Task, calls: Sequence[ToolCall], n: int = 3) -> list[CompletenessVerdict]:
        return self.check_many([(task, calls)], n)[0]

    def check_many(
        self, items: Sequence[tuple[Task, Sequence[ToolCall]]], n: int = 3
    ) -> list[list[CompletenessVerdict]]:
        """N verdicts per (task, plan), in order; never raises."""
        requests = [CompletenessRequest(task, tuple(calls)) for task, calls in items]
        if not requests:
            return []
        n = max(1, int(n))
        try:
            results = self._check_many(requests, n)
            if len(results) != len(requests) or any(len(r) != n for r in results):
                raise RuntimeError("checker returned the wrong number of verdicts")
        except Exception as exc:
            failure = CompletenessVerdict(False, failed=True, error=f"{type(exc).__name__}: {exc}")
            results = [[failure] * n for _ in requests]
        with self._counter_lock:
            for verdicts in results:
                self.calls += len(verdicts)
                self.failures += sum(1 for v in verdicts if v.failed)
        return results

    def close(self) -> None:
        """Release network resources, if any."""


def rule_complete(task: Task, calls: Sequence[ToolCall]) -> bool:
    """The offline rule: with no gold calls, complete iff the plan makes no call; else complete iff
    every gold call is strictly matched one-to-one by a plan call (same name, every gold key with a
    loosely equal value). Extra calls do not make a plan incomplete (R_repeat/R_error see to them)."""
    gold = task.flat_gold_calls
    if not gold:
        return not calls
    partners = max_bipartite_matching(gold, list(calls), strict_call_match)
    return all(p is not None for p in partners)


class RuleCompletenessChecker(CompletenessChecker):
    """Deterministic: the N verdicts are identical, so R_comp ∈ {0, 1}."""

    name = "rule"

    def _check_many(self, requests: Sequence[CompletenessRequest], n: int) -> list[list[CompletenessVerdict]]:
        return [[CompletenessVerdict(rule_complete(r.task, r.calls))] * n for r in requests]
