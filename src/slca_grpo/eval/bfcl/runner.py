"""Run an agent over BFCL categories and score it with bfcl-eval's checkers."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from tqdm import tqdm

from slca_grpo.data.bfcl.entries import BFCLEntry, load_entries, resolve_categories
from slca_grpo.data.bfcl.package import load_bfcl
from slca_grpo.eval.agent import AgentRequest, ChatAgent
from slca_grpo.eval.bfcl.multi_turn import MultiTurnEpisode
from slca_grpo.eval.bfcl.report import write_report
from slca_grpo.eval.bfcl.results import BFCLReport, EntryResult
from slca_grpo.eval.bfcl.single_turn import SingleTurnEpisode


class Episode(Protocol):
    entry: BFCLEntry

    def next_request(self) -> AgentRequest | None: ...

    def receive(self, text: str) -> None: ...

    def finish(self) -> EntryResult: ...

    def close(self) -> None: ...


def make_episode(entry: BFCLEntry, max_steps_per_turn: int | None = None) -> Episode:
    if entry.multi_turn:
        return MultiTurnEpisode(entry, max_steps_per_turn=max_steps_per_turn)
    return SingleTurnEpisode(entry)


def run_episodes(
    agent: ChatAgent,
    entries: Sequence[BFCLEntry],
    batch_size: int = 8,
    max_steps_per_turn: int | None = None,
    progress: tqdm | None = None,
) -> list[EntryResult]:
    """Drive up to ``batch_size`` episodes at once, one agent call per round; results in order.

    An episode starts only when a slot frees up, so at most ``batch_size`` rollouts hold backend
    instances at any time.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    waiting = deque(enumerate(entries))
    active: list[tuple[int, Episode]] = []
    results: dict[int, EntryResult] = {}
    try:
        while waiting or active:
            while waiting and len(active) < batch_size:
                index, entry = waiting.popleft()
                active.append((index, make_episode(entry, max_steps_per_turn)))
            pending: list[tuple[int, Episode, AgentRequest]] = []
            still_active: list[tuple[int, Episode]] = []
            for index, episode in active:
                request = episode.next_request()
                if request is None:
                    results[index] = episode.finish()
                    if progress is not None:
                        progress.update(1)
                else:
                    pending.append((index, episode, request))
                    still_active.append((index, episode))
            active = still_active
            if not pending:
                continue
            texts = agent.respond([request for _, _, request in pending])
            if not isinstance(texts, (list, tuple)) or len(texts) != len(pending):
                got = len(texts) if isinstance(texts, (list, tuple)) else type(texts).__name__
                agent_name = getattr(agent, "name", agent)
                raise ValueError(f"agent {agent_name!r} returned {got} answers for {len(pending)} requests")
            for (_, episode, _), text in zip(pending, texts, strict=True):
                episode.receive(text)
    finally:
        for _, episode in active:
            episode.close()
    return [results[index] for index in range(len(entries))]


def run_bfcl(
    agent: ChatAgent,
    categories: Sequence[str] | None = None,
    limit: int | None = None,
    out_dir: str | Path | None = None,
    batch_size: int = 8,
    max_steps_per_turn: int | None = None,
    progress: bool = True,
) -> BFCLReport:
    """Score ``agent`` on BFCL categories (default: the paper's 13) with bfcl-eval's checkers.

    ``limit`` takes the first N entries of each category. With ``out_dir``, writes
    ``per_item.jsonl``, ``summary.json``, ``report.md`` and ``accuracy.png`` there.
    ``max_steps_per_turn`` defaults to bfcl-eval's limit (20) for multi-turn entries.
    """
    bfcl = load_bfcl()
    resolved = resolve_categories(list(categories) if categories else None)
    entries_by_category = {category: load_entries(category, limit) for category in resolved}
    total = sum(len(entries) for entries in entries_by_category.values())
    results: list[EntryResult] = []
    with tqdm(total=total, desc="BFCL", unit="entry", disable=not progress) as bar:
        for category, entries in entries_by_category.items():
            bar.set_postfix_str(category)
            results.extend(run_episodes(agent, entries, batch_size, max_steps_per_turn, bar))
    report = BFCLReport(
        agent=str(getattr(agent, "name", type(agent).__name__)),
        categories=resolved,
        results=results,
        limit=limit,
        bfcl_eval_version=bfcl.version,
    )
    if out_dir is not None:
        report.out_dir = Path(out_dir)
        write_report(report, report.out_dir)
    return report
