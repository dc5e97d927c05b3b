"""Pretraining a small base model on the generated corpus: the "reader".

    python -m recipes.reader.pretrain --out runs/reader        # from the repository's root

A plain next-token loop, read top to bottom: documents come from :mod:`recipes.reader.corpus` in
index order, are packed whole into rows of ``seq_len`` tokens (2,048, as long as the evaluations'
prompts and trajectories; a longer document would be cut; a length curriculum may pack shorter
rows first, ``short_seq_steps``), and the model learns every token, the
output layer's loss a chunk of rows at a time (:mod:`recipes.reader.chunked_loss`). Every
``probe_every`` steps fixed probe sets measure the model (:mod:`recipes.reader.probes`):
documents of another corpus seed, and task documents of the suite's test split.
Checkpoints hold the model, optimizer, RNG and the corpus position, so a resumed run is the run
that was not interrupted. The command line (:func:`main`) is at the end.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from recipes.reader.chunked_loss import chunked_next_token_loss
from recipes.reader.corpus import PARAPHRASE, CorpusConfig, document, heldout_task_document
from recipes.reader.probes import drill_accuracy, probe, task_evaluation
from slca_grpo.config import apply_overrides
from slca_grpo.models import load_model
from slca_grpo.models.checkpoint import (
    CheckpointError,
    load_latest_checkpoint,
    remove_path,
    save_checkpoint,
    save_pretrained_atomic,
    set_rng_state,
)
from slca_grpo.models.device import resolve_device
from slca_grpo.models.tiny import TinyModelConfig, build_tiny_model, count_parameters
from slca_grpo.models.tokenizer import train_tokenizer
from slca_grpo.trainer.logger import MetricsLogger, read_metrics
from slca_grpo.trainer.run_folder import RunFolderBusy, check_out_folder, hold_run_folder

READER_SHAPE = TinyModelConfig(num_layers=4, hidden_size=128, num_heads=4, num_kv_heads=2, intermediate_size=384)


@dataclass
class PretrainConfig:
    """Everything that decides the pretrained model (saved beside it as ``pretrain_config.json``)."""

    steps: int = 3000
    rows_per_step: int = 6
    seq_len: int = 2048
    # A length curriculum: the first ``short_seq_steps`` steps pack rows of ``short_seq_len`` tokens
    # instead (as many more rows, the same tokens a step; a longer document is cut there). 0: none.
    # The default matches the drill-heavy warm-up: the shipped build, which learned to copy, had
    # rows of 1,024 tokens throughout.
    short_seq_len: int = 1024
    short_seq_steps: int = 1000
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 100
    # bfloat16 autocast for the matrix products (weights and optimizer stay float32): ~1.5x faster
    # where the CPU has native bf16 (AMX / avx512_bf16), 50-100x slower where it has not.
    bf16: bool = False
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    vocab_size: int = 4096
    pretokenizer: str = "words-nl"
    tokenizer_docs: int = 3000
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    model: TinyModelConfig = field(default_factory=lambda: READER_SHAPE)
    probe_docs: int = 48
    # Task documents of the suite's test split, written as the corpus writes its own: the probe's
    # choice of tool on phrasings and tools the corpus never shows (``probe_heldout/*``; 0: none).
    probe_heldout_docs: int = 48
    probe_every: int = 100
    # Every ``task_eval_every`` steps (0: never) the model is also rolled out greedily on
    # ``task_eval_tasks`` synthetic test-split tasks (Name-F1, ArgMatch, calls to tools not
    # offered): drills and probe accuracy alone passed a build that could not call its tools.
    task_eval_every: int = 500
    task_eval_tasks: int = 40
    save_every: int = 100
    seed: int = 0
    # A model to continue from (``reader`` or a folder) instead of a fresh one: its weights, shape
    # and tokenizer are kept, so ``model`` and the tokenizer settings are then not used, and the
    # corpus starts at its first document.
    init: str = ""

    def __post_init__(self) -> None:
        for name in ("steps", "rows_per_step", "seq_len", "vocab_size", "tokenizer_docs", "probe_every", "save_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"pretrain.{name} must be a positive int, got {value!r}")
        for name in ("task_eval_every", "task_eval_tasks", "probe_heldout_docs"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"pretrain.{name} must be an int >= 0, got {value!r}")
        steps = self.short_seq_steps
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
            raise ValueError(f"pretrain.short_seq_steps must be an int >= 0, got {steps!r}")
        if steps and not (isinstance(self.short_seq_len, int) and 1 <= self.short_seq_len <= self.seq_len):
            raise ValueError(f"pretrain.short_seq_len must be an int in [1, seq_len], got {self.short_seq_len!r}")
        if not (self.lr > 0 and 0 <= self.min_lr_ratio <= 1 and self.warmup_steps >= 0):
            raise ValueError("pretrain.lr must be > 0, min_lr_ratio in [0, 1] and warmup_steps >= 0")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def next_token_loss(model: torch.nn.Module, ids: torch.Tensor, labels: torch.Tensor, *, bf16: bool) -> torch.Tensor:
    """The mean next-token loss of packed rows, the output layer a chunk at a time (see chunked_loss)."""
    with torch.autocast(ids.device.type, dtype=torch.bfloat16, enabled=bf16):
        hidden = model.model(input_ids=ids).last_hidden_state
    weight = model.get_output_embeddings().weight
    return chunked_next_token_loss(hidden, weight, labels, compute_dtype=torch.bfloat16 if bf16 else torch.float32)


def row_shape(config: PretrainConfig, step: int) -> tuple[int, int]:
    """(rows, tokens a row) of a step: short rows during the length curriculum, the same tokens."""
    if step < config.short_seq_steps:
        return max(1, config.rows_per_step * config.seq_len // config.short_seq_len), config.short_seq_len
    return config.rows_per_step, config.seq_len


def learning_rate(config: PretrainConfig, step: int) -> float:
    """Linear warm-up, then cosine decay to ``min_lr_ratio * lr`` at the last step."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    floor = config.min_lr_ratio
    return config.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


# Documents are tokenised whole with ``verbose=False``: one past the model's positions is cut where
# it is used (``DocumentStream.rows``, ``probe``), so transformers' "will result in indexing errors"
# warning about it would be a false alarm in the build's log.


class DocumentStream:
    """Corpus documents in index order, tokenised, each ending with the end-of-text token."""

    def __init__(self, tokenizer: Any, config: CorpusConfig, start: int = 0) -> None:
        self.tokenizer = tokenizer
        self.config = config
        self.position = start
        self._pending: list[int] | None = None

    def next(self) -> list[int]:
        if self._pending is not None:
            ids, self._pending = self._pending, None
            self.position += 1
            return ids
        _, text = document(self.position, self.config)
        self.position += 1
        ids = self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        return ids + [self.tokenizer.eos_token_id]

    def push_back(self, ids: list[int]) -> None:
        self._pending = ids
        self.position -= 1  # the checkpointed position is that of the next unread document

    def rows(self, count: int, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``count`` rows of whole documents (a document that does not fit starts the next row)."""
        pad = self.tokenizer.pad_token_id
        ids = torch.full((count, seq_len), pad, dtype=torch.long)
        labels = torch.full((count, seq_len), -100, dtype=torch.long)
        for row in range(count):
            used = 0
            while used < seq_len:
                doc = self.next()[:seq_len]
                if used and used + len(doc) > seq_len:
                    self.push_back(doc)
                    break
                ids[row, used : used + len(doc)] = torch.tensor(doc)
                labels[row, used : used + len(doc)] = torch.tensor(doc)
                used += len(doc)
        return ids, labels


def probe_texts(config: PretrainConfig) -> list[str]:
    """The probe set: documents of another corpus seed (never trained on)."""
    other = replace(config.corpus, seed=config.corpus.seed + 1_000_003, warmup_docs=0)
    return [document(index, other)[1] for index in range(config.probe_docs)]


def heldout_probe_texts(config: PretrainConfig) -> list[str]:
    """The held-out probe: task documents of the suite's test split (never trained on)."""
    return [heldout_task_document(index, config.corpus) for index in range(config.probe_heldout_docs)]


# Settings that only measure: a build may be resumed with others.
MEASURING_SETTINGS = ("task_eval_every", "task_eval_tasks", "probe_heldout_docs")
# The corpus switches that builds written before the corpus was frozen record, at the values that
# make this corpus: a checkpoint that records all of them so continues here; one that records
# other values, or only some of them (an earlier corpus), does not.
RETIRED_CORPUS_SETTINGS = {
    "readable_names": True,
    "catalogue_names": False,
    "near_misses": False,
    "paraphrase": PARAPHRASE,
    "task_returns": False,
}


def same_build(saved: Any, config: PretrainConfig) -> bool:
    """Whether a checkpoint written with ``saved`` continues as ``config`` would (measuring settings aside)."""
    if not isinstance(saved, dict):
        return False
    today = json.loads(json.dumps(config.to_dict()))
    corpus = saved.get("corpus")
    if isinstance(corpus, dict) and all(
        key in corpus and corpus[key] == value for key, value in RETIRED_CORPUS_SETTINGS.items()
    ):
        saved = {**saved, "corpus": {k: v for k, v in corpus.items() if k not in RETIRED_CORPUS_SETTINGS}}
    return {k: v for k, v in saved.items() if k not in MEASURING_SETTINGS} == {
        k: v for k, v in today.items() if k not in MEASURING_SETTINGS
    }


# What a build writes into its folder (``--force`` removes an earlier build's before starting).
BUILD_FILES = ("checkpoints", "model", "metrics.jsonl", "curves.png", "pretrain_config.json")


def pretrain(
    config: PretrainConfig,
    out_dir: str | Path,
    *,
    resume: bool = False,
    force: bool = False,
    progress: bool = True,
    stop_at: int | None = None,
    device: str = "cpu",
) -> Path | None:
    """Train the base model into ``out_dir`` (``checkpoints/``, ``metrics.jsonl``, ``model/`` at the end).

    ``device`` (``cpu``, ``cuda``, ``cuda:N`` or ``auto``) only decides where the steps run: the
    corpus, the schedule and the checkpoints are the same, so a build may be resumed on another.
    ``stop_at`` ends this call after that step with a checkpoint (a build split over sessions;
    ``resume=True`` continues it); the final model is written only when all steps are done, and
    only then is a path returned. A folder that holds a run is refused unless ``resume`` continues
    it or ``force`` replaces it (``RunFolderTaken``); the folder is held (locked) while the build writes it.
    """
    if stop_at is not None and (not isinstance(stop_at, int) or stop_at < 1):
        raise ValueError(f"stop_at must be a positive step number, got {stop_at!r}")
    where = resolve_device(device, key="--device")
    check_out_folder(out_dir, flag="--out", resume=resume, force=force)
    # Loaded before --force removes an earlier build: a model that cannot be loaded loses nothing.
    initial = _load_init(config.init) if config.init and not resume else None
    with hold_run_folder(out_dir, "recipes.reader.pretrain", next_step="use another --out"):
        if force and not resume:
            for name in BUILD_FILES:
                remove_path(Path(out_dir) / name)
        return _pretrain(
            config, Path(out_dir), resume=resume, progress=progress, stop_at=stop_at, device=where, initial=initial
        )


def _load_init(spec: str) -> tuple[Any, Any]:
    """(model, tokenizer) a build continues from; a spec that names no model is one line naming the key."""
    try:
        return load_model(spec)
    except ValueError as exc:
        raise ValueError(f"pretrain.init: {exc}") from None


def _pretrain(
    config: PretrainConfig,
    out: Path,
    *,
    resume: bool,
    progress: bool,
    stop_at: int | None,
    device: torch.device,
    initial: tuple[Any, Any] | None = None,
) -> Path | None:
    checkpoints = out / "checkpoints"
    found = load_latest_checkpoint(checkpoints) if resume else None
    if found is not None:
        path, state, info = found
        if not same_build(info.get("config"), config):
            raise ValueError(f"{path} was written with another pretraining config; resume with the same one")
        model, tokenizer = load_model(path / "model")
        start, position = int(info["step"]), int(info["corpus_position"])
    elif config.init:
        torch.manual_seed(config.seed)
        model, tokenizer = initial or _load_init(config.init)
        start, position, state = 0, 0, None
    else:
        torch.manual_seed(config.seed)
        texts = [document(index, config.corpus)[1] for index in range(config.tokenizer_docs)]
        tokenizer = train_tokenizer(texts, vocab_size=config.vocab_size, pretokenizer=config.pretokenizer)
        model = build_tiny_model(tokenizer, config.model)
        start, position, state = 0, config.tokenizer_docs, None
    model.to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay, betas=(0.9, 0.95))
    if state is not None:
        optimizer.load_state_dict(state["optimizer"])
        set_rng_state(state["rng"])
    (out / "pretrain_config.json").write_text(json.dumps(config.to_dict(), indent=1), encoding="utf-8")
    logger = MetricsLogger(out, stdout=None, resume=resume and found is not None, resume_step=start)
    stream = DocumentStream(tokenizer, config.corpus, start=position)
    probes, heldout_probes = probe_texts(config), heldout_probe_texts(config)
    bar = _progress(config.steps, start, progress)
    began = time.monotonic()
    print(f"pretraining {count_parameters(model) / 1e6:.2f} M parameters for {config.steps} steps into {out}")
    last = config.steps if stop_at is None else max(start, min(config.steps, stop_at))
    for step in range(start, last):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(config, step)
        ids, labels = (tensor.to(device) for tensor in stream.rows(*row_shape(config, step)))
        loss = next_token_loss(model, ids, labels, bf16=config.bf16)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"pretraining loss is {loss.item()} at step {step}; lower pretrain.lr")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm))
        optimizer.step()
        metrics: dict[str, float] = {
            "train/loss": loss.item(),
            "train/grad_norm": grad_norm,
            "train/lr": learning_rate(config, step),
        }
        done = step + 1
        if done % config.probe_every == 0 or done == config.steps:
            metrics.update(probe(model, tokenizer, probes, config.seq_len))
            if heldout_probes:
                metrics.update(probe(model, tokenizer, heldout_probes, config.seq_len, prefix="probe_heldout"))
            if config.task_eval_every and (done % config.task_eval_every == 0 or done == config.steps):
                metrics.update(task_evaluation(model, tokenizer, config.task_eval_tasks))
                # Greedy drills too: teacher-forced copy accuracy rose in builds that copied nothing greedily.
                metrics.update(drill_accuracy(model, tokenizer))
            metrics["time/elapsed_s"] = time.monotonic() - began
            _report(bar, done, metrics)
        logger.log(done, metrics, echo=False)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{metrics['train/loss']:.3f}", refresh=False)
        if done % config.save_every == 0 or done in (config.steps, last):
            save_checkpoint(
                checkpoints,
                done,
                model=model,
                tokenizer=tokenizer,
                state={"optimizer": optimizer.state_dict()},
                info={"config": config.to_dict(), "corpus_position": stream.position},
            )
    if bar is not None:
        bar.close()
    logger.close()
    plot_curves(logger.path, out / "curves.png")
    if last < config.steps:
        return None
    model.eval()
    final = save_pretrained_atomic(model, tokenizer, out / "model")
    (final / "pretrain_config.json").write_text(json.dumps(config.to_dict(), indent=1), encoding="utf-8")
    return final


def plot_curves(metrics_path: str | Path, out_png: str | Path) -> Path:
    """``curves.png``: training and probe loss, and the probe's assistant and copy accuracy, by step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(metrics_path)
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    steps = [r["step"] for r in rows if "train/loss" in r]
    left.plot(steps, [r["train/loss"] for r in rows if "train/loss" in r], lw=0.6, alpha=0.6, label="train loss")
    probes = [r for r in rows if "probe/loss" in r]
    left.plot([r["step"] for r in probes], [r["probe/loss"] for r in probes], marker="o", label="probe loss")
    left.set_xlabel("step")
    left.set_ylabel("cross-entropy (nats/token)")
    left.legend()
    curves = (
        ("probe/assistant_acc", "assistant tokens", probes),
        ("probe/copy_acc", "copied tokens", probes),
        ("probe/name_acc", "called tools' names", probes),
        ("probe/choice_acc", "the name's choosing token", probes),
        ("probe_heldout/choice_acc", "choosing token, held-out tasks", probes),
        ("tasks/name_f1", "tasks: Name-F1 (greedy)", [r for r in rows if "tasks/name_f1" in r]),
    )
    for key, label, points in curves:
        points = [r for r in points if key in r]
        if points:
            right.plot([r["step"] for r in points], [r[key] for r in points], marker="o", label=label)
    right.set_xlabel("step")
    right.set_ylabel("accuracy (probe: teacher-forced)")
    right.set_ylim(0, 1)
    right.legend()
    figure.tight_layout()
    figure.savefig(out_png, dpi=110)
    plt.close(figure)
    return Path(out_png)


def _progress(total: int, start: int, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=start, desc="pretrain", unit="step", dynamic_ncols=True)


def _report(bar: Any, step: int, metrics: dict[str, float]) -> None:
    line = (
        f"step {step}: loss {metrics['train/loss']:.3f}  probe loss {metrics['probe/loss']:.3f}  "
        f"assistant acc {metrics['probe/assistant_acc']:.3f}  copy acc {metrics['probe/copy_acc']:.3f}  "
        f"name acc {metrics['probe/name_acc']:.3f}  choice acc {metrics['probe/choice_acc']:.3f}"
    )
    if "probe_heldout/choice_acc" in metrics:
        line += f" (held-out tasks {metrics['probe_heldout/choice_acc']:.3f})"
    if "tasks/name_f1" in metrics:
        line += (
            f"  tasks: Name-F1 {metrics['tasks/name_f1']:.3f} ArgMatch {metrics['tasks/arg_match']:.3f} "
            f"unoffered calls {metrics['tasks/unoffered_calls']:.3f}"
        )
    drills = [f"{key.split('/')[1]} {value:.2f}" for key, value in metrics.items() if key.startswith("drill/")]
    if drills:
        line += f"  drills: {' '.join(drills)}"
    line += f"  ({metrics['time/elapsed_s']:.0f} s)"
    if bar is not None:
        bar.write(line)
    else:
        print(line, flush=True)


# --- the command line: python -m recipes.reader.pretrain ---

COMMAND = "python -m recipes.reader.pretrain"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=COMMAND,
        description="Pretrain a small Qwen2-style base model and its tokenizer on a corpus generated here "
        "(train-split synthetic tasks with disguised tools and fresh values, requests for invented tools, "
        "copy and conversion drills). The defaults are the next build of the 'reader' model; the shipped "
        "reader's own settings are in its pretrain_config.json (docs/models.md, The reader). Rerun with "
        "--resume to continue an interrupted build. Run it from the repository's root.",
    )
    parser.add_argument("--out", default="runs/reader", help="output folder (default: runs/reader)")
    parser.add_argument("--steps", type=int, help="optimizer steps (default: 3000)")
    parser.add_argument("--seed", type=int, default=0, help="corpus and initialisation seed (default: 0)")
    parser.add_argument(
        "--bf16",
        action="store_true",
        help="bfloat16 autocast: ~1.5x faster on CPUs with native bf16 (AMX, avx512_bf16), far slower elsewhere "
        "(off by default)",
    )
    parser.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in --out")
    parser.add_argument(
        "--force", action="store_true", help="replace the build that --out holds (refused without --resume or this)"
    )
    parser.add_argument(
        "--stop-at",
        type=int,
        metavar="STEP",
        help="stop after STEP with a checkpoint (split a build; --resume goes on)",
    )
    parser.add_argument(
        "--task-eval-every",
        type=int,
        metavar="STEPS",
        help="roll the model out greedily on 40 synthetic test tasks every STEPS steps (default: 500; 0: never)",
    )
    parser.add_argument(
        "--device",
        default="cpu",
        help="where the steps run: cpu (default), cuda, cuda:N or auto; the build is the same, so one may be "
        "resumed on another",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any pretraining setting (repeatable): lr=1e-3, corpus.warmup_docs=0, init=reader "
        "(continue that model's weights and tokenizer), model.hidden_size=192 (docs/models.md)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (probe lines are still printed)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Build (or continue) a reader; an expected error is one line on stderr and exit status 2."""
    args = build_parser().parse_args(argv)
    try:
        config = PretrainConfig(seed=args.seed, corpus=CorpusConfig(seed=args.seed), bf16=args.bf16)
        if args.steps is not None:
            config = replace(config, steps=args.steps)
        if args.task_eval_every is not None:
            config = replace(config, task_eval_every=args.task_eval_every)
        config = apply_overrides(config, args.set)
        final = pretrain(
            config,
            args.out,
            resume=args.resume,
            force=args.force,
            progress=not args.no_progress,
            stop_at=args.stop_at,
            device=args.device,
        )
    except (ValueError, CheckpointError, FloatingPointError, RunFolderBusy) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    if final is None:
        print(f"stopped after step {args.stop_at}; continue with: {resume_command(args)}")
        return 0
    print(f"base model written to {final} (use it as model.name: {final}, or slca eval --policy hf:{final})")
    return 0


def resume_command(args: argparse.Namespace) -> str:
    """The command that continues this build: every setting it was started with, and --resume."""
    words = [COMMAND, "--out", shlex.quote(str(args.out))]
    if args.steps is not None:
        words += ["--steps", str(args.steps)]
    if args.seed != 0:
        words += ["--seed", str(args.seed)]
    if args.bf16:
        words.append("--bf16")
    if args.device != "cpu":
        words += ["--device", shlex.quote(args.device)]
    for override in args.set:
        words += ["--set", shlex.quote(override)]
    return " ".join([*words, "--resume"])


if __name__ == "__main__":
    sys.exit(main())
