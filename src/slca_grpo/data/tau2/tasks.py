"""Choosing τ² tasks: domain, split, ids, limit — with errors that say what is available."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slca_grpo.data.tau2.package import DOMAINS, import_tau2

DEFAULT_SPLIT = "base"  # τ²'s default: the published task set of each domain


class TaskSelectionError(ValueError):
    """An unknown domain, split or task id, or a selection with no tasks."""


def check_domain(domain: str) -> str:
    if domain not in DOMAINS:
        raise TaskSelectionError(f"unknown τ² domain {domain!r}: choose one of {', '.join(DOMAINS)}")
    return domain


def task_splits(domain: str) -> dict[str, list[str]]:
    """Split name → task ids, as τ² ships them (e.g. ``base``, ``train``, ``test``)."""
    registry = import_tau2("tau2.registry").registry
    loader = registry.get_task_splits_loader(check_domain(domain))
    return dict(loader()) if loader is not None else {}


def load_tau2_tasks(domain: str, split: str | None = DEFAULT_SPLIT) -> list[Any]:
    """τ² ``Task`` objects of ``domain``; ``split=None`` gives every task the domain ships."""
    registry = import_tau2("tau2.registry").registry
    check_domain(domain)
    if split is not None:
        splits = task_splits(domain)
        if split not in splits:
            raise TaskSelectionError(
                f"τ² domain {domain!r} has no split {split!r}: choose one of {', '.join(sorted(splits))}"
            )
    return list(registry.get_tasks_loader(domain)(task_split_name=split))


def select_tasks(
    domain: str,
    split: str | None = DEFAULT_SPLIT,
    task_ids: Sequence[str] | None = None,
    limit: int | None = None,
) -> list[Any]:
    """Tasks of a split, in τ²'s order, optionally only ``task_ids`` (in the order given), then the
    first ``limit`` of them."""
    if limit is not None and limit < 1:
        raise TaskSelectionError(f"limit must be >= 1, got {limit}")
    tasks = load_tau2_tasks(domain, split)
    if task_ids is not None:
        by_id = {str(t.id): t for t in tasks}
        missing = [str(i) for i in task_ids if str(i) not in by_id]
        if missing:
            shown = ", ".join(repr(m) for m in missing[:5])
            raise TaskSelectionError(
                f"task id(s) {shown} not in τ² {domain!r} split {split!r} "
                f"({len(by_id)} tasks, e.g. {', '.join(repr(k) for k in list(by_id)[:3])})"
            )
        tasks = [by_id[str(i)] for i in dict.fromkeys(task_ids)]
    if limit is not None:
        tasks = tasks[:limit]
    if not tasks:
        raise TaskSelectionError(f"no τ² tasks selected in domain {domain!r} split {split!r}")
    return tasks
