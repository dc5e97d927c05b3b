"""Deduplication by normalised question, and a train/test split whose sides share no question.

A task's key is the text of its prompt's user turns, normalised (Unicode NFKC, case-folded,
every run of non-alphanumeric characters one space), so ``"Weather in Paris?"`` and ``"weather
in  paris"`` are one question. The first task of each key is kept. Its side is decided by a hash
of (seed, key), not by a draw: the same question always lands on the same side, whatever order
or file it comes in, and the split streams (only 16-byte digests of the keys are held). The test
share is therefore close to, not exactly, the fraction asked for.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from slca_grpo.data.tasks import atomic_text, task_line
from slca_grpo.datatypes import Task

_NOT_WORD = re.compile(r"[\W_]+")


def normalise(text: str) -> str:
    return _NOT_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def question_key(task: Task) -> str:
    """The normalised text of the prompt's user turns."""
    return normalise("\n".join(str(m.get("content") or "") for m in task.messages if m.get("role") == "user"))


def _digest(key: str) -> bytes:
    return hashlib.blake2b(key.encode("utf-8"), digest_size=16).digest()


def goes_to_test(key: str, test_fraction: float, seed: int = 0) -> bool:
    """Whether the question ``key`` belongs to the test side."""
    draw = hashlib.sha256(f"{seed}\0{key}".encode()).digest()
    return int.from_bytes(draw[:8], "big") / 2**64 < test_fraction


@dataclass
class SplitReport:
    read: int = 0
    duplicates: int = 0  # a question seen before: dropped
    excluded: int = 0  # a question of an ``exclude`` dataset: dropped
    train: int = 0
    test: int = 0


def split_tasks(
    tasks: Iterable[Task],
    train_path: str | os.PathLike[str],
    test_path: str | os.PathLike[str] | None,
    *,
    test_fraction: float,
    seed: int = 0,
    exclude: Iterable[Task] = (),
) -> SplitReport:
    """Deduplicate ``tasks`` and write them to ``train_path`` / ``test_path`` (JSONL, atomically).

    ``exclude``: tasks (e.g. a benchmark) whose questions must not appear on either side.
    ``test_fraction=0`` only deduplicates (``test_path`` may then be None).
    """
    if not 0 <= test_fraction < 1:
        raise ValueError(f"the test fraction must be in [0, 1), got {test_fraction}")
    if test_fraction > 0 and test_path is None:
        raise ValueError("a test fraction above 0 needs a test file to write")
    banned = {_digest(question_key(t)) for t in exclude}
    seen: set[bytes] = set()
    report = SplitReport()
    test_file = atomic_text(test_path) if test_path is not None else contextlib.nullcontext(None)
    with atomic_text(train_path) as train, test_file as test:
        for task in tasks:
            report.read += 1
            key = question_key(task)
            digest = _digest(key)
            if digest in banned:
                report.excluded += 1
                continue
            if digest in seen:
                report.duplicates += 1
                continue
            seen.add(digest)
            if test is not None and test_fraction > 0 and goes_to_test(key, test_fraction, seed):
                test.write(task_line(task))
                report.test += 1
            else:
                train.write(task_line(task))
                report.train += 1
    return report
