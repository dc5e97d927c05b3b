"""A whole training run from one config: data → model → SFT → RL with evals and checkpoints.

``slca train CONFIG`` calls :func:`train`; ``slca demo`` calls it once per estimator from a
shared SFT checkpoint. Resuming (``resume=True``) restores model, optimizer, scheduler and RNG
state from the newest checkpoint; every step's randomness is derived from (seed, step), so a
resumed run continues exactly as the uninterrupted one would have.

:func:`train` reads top to bottom; its parts live beside it: the config (``run_config``), what a
run is built from (``build``), the SFT checkpoint it starts from (``sft_cache``), its tasks
(``run_data``) and its folder's lock and resume checks (``run_folder``).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from slca_grpo.config import save_yaml_config
from slca_grpo.datatypes import Task
from slca_grpo.engine import NonFiniteLogits, kernel_calls
from slca_grpo.models.checkpoint import latest_checkpoint, load_latest_checkpoint, save_checkpoint, set_rng_state
from slca_grpo.plugins import load_plugins, loaded_plugins
from slca_grpo.provenance import (
    ProvenanceDamaged,
    add_to_provenance,
    describe,
    provenance,
    read_provenance,
    record_provenance,
)
from slca_grpo.trainer.build import (
    build_rl_trainer,
    check_rl_fits,
    keep_lora_base,
    rl_models,
    start_process,
    thread_settings,
)
from slca_grpo.trainer.diagnostics import std
from slca_grpo.trainer.logger import MetricsLogger, progress_note
from slca_grpo.trainer.optim import TrainingDiverged
from slca_grpo.trainer.rl import RLTrainer
from slca_grpo.trainer.run_config import RunConfig, check_estimators, run_settings
from slca_grpo.trainer.run_data import load_data, task_sampler
from slca_grpo.trainer.run_eval import evaluate_tasks
from slca_grpo.trainer.run_folder import check_model_name, checkpoint_step, hold_run_folder, resume_config
from slca_grpo.trainer.sft_cache import rl_starting_model

BUSY_NEXT_STEP = "give this run another train.out_dir"


def train(
    config: RunConfig,
    *,
    resume: bool = False,
    echo: bool = True,
    start_eval: dict[str, Any] | None = None,
    start_probe: dict[str, Any] | None = None,
    resume_may_differ: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Run SFT (when ``sft.steps > 0``) then RL; returns the final summary (also in ``summary.json``).

    ``start_eval`` / ``start_probe``: the held-out / probe evaluation of this very starting model
    on the same tasks (the step -1 record of a run from the same checkpoint, as the demo has):
    recorded instead of evaluating again, which on a real model costs minutes per run. ``resume_may_differ``: settings
    (dotted keys) a caller allows to differ from the resumed run's ``config.yaml``, beyond
    ``RESUME_MAY_DIFFER``. The run folder is locked while the run writes it.
    """
    load_plugins(config.train.plugins)
    check_model_name(config.model.name)  # before anything is created
    with _run_folder_held(config, resume=resume, may_differ=resume_may_differ) as config:
        out_dir = Path(config.train.out_dir)
        finished = _finished_summary(config, out_dir) if resume else None
        if finished is not None:  # nothing to do, and nothing it wrote is written again
            if echo:
                print(f"{out_dir} has done its {config.rl.steps} steps; --set rl.steps=N (more) extends it")
            return finished
        _record_start(config, out_dir)
        device = start_process(config)
        _record_threads(out_dir)
        kernels_before = kernel_calls()
        train_tasks, test_tasks, probe_tasks = load_data(config.data)
        eval_tasks = test_tasks[: config.train.eval_tasks]
        if not config.train.probe_every:
            probe_tasks = []
        checkpoints = out_dir / "checkpoints"
        resumed = load_latest_checkpoint(checkpoints) if resume else None
        start_step = resumed[2]["step"] + 1 if resumed is not None else 0
        logger = MetricsLogger(
            out_dir,
            stdout=sys.stdout if echo else None,
            tensorboard=config.train.tensorboard,
            wandb=config.train.wandb,
            wandb_project=config.train.wandb_project,
            run_name=out_dir.name,
            config=run_settings(config),
            resume=resumed is not None,
            resume_step=start_step - 1 if resumed is not None else None,
        )

        # The models: the policy starts from the SFT result (or the model as loaded), which is also
        # the reference policy; a resumed run continues from its newest checkpoint.
        reference_spec = rl_starting_model(
            config, out_dir, train_tasks, device, resuming=resumed is not None, echo=echo
        )
        reference_spec, lora_base = keep_lora_base(config, out_dir, reference_spec, train_tasks)
        resume_from = resumed[0] if resumed is not None else None
        model, tokenizer, ref_model = rl_models(config, reference_spec, resume_from, train_tasks, device)
        if config.rl.steps > start_step:
            check_rl_fits(config, model, ref_model, device)
        trainer = build_rl_trainer(config, model, ref_model, tokenizer)
        history: dict[str, list] = {"grad_norms": [], "evals": [], "probes": []}
        if resumed is not None:
            _, state, info = resumed
            trainer.load_state_dict(state["trainer"])
            set_rng_state(state["rng"])
            history = {**history, **info.get("history", {})}  # a checkpoint from before probes has none

        evaluate = _Evaluation("eval", trainer, eval_tasks, config, device, history["evals"], logger, out_dir, echo)
        probe = _Evaluation("probe", trainer, probe_tasks, config, device, history["probes"], logger, out_dir, echo)
        if start_step == 0:
            for evaluation, given in ((evaluate, start_eval), (probe, start_probe)):
                if evaluation.tasks:
                    evaluation.starting_point(given)

        tasks_for_step = task_sampler(train_tasks, config.train.seed, config.rl.prompts_per_step)
        loop_started = time.perf_counter()
        for step in tqdm(
            range(start_step, config.rl.steps),
            desc=f"RL {config.rl.estimator}",
            disable=not config.train.progress,
            initial=start_step,
            total=config.rl.steps,
        ):
            try:
                metrics, _ = trainer.step(tasks_for_step(step), step)
            except (TrainingDiverged, NonFiniteLogits) as exc:
                kept = latest_checkpoint(checkpoints)
                where = f"the newest checkpoint, {kept}, is intact" if kept else "no RL checkpoint was written yet"
                raise TrainingDiverged(f"training stopped: {exc}; {where} (lower rl.lr, then --resume)") from None
            if "train/grad_norm" in metrics:  # a step skipped for void rollouts took none
                history["grad_norms"].append(metrics["train/grad_norm"])
                metrics["train/grad_norm_std"] = std(history["grad_norms"])
            done = step + 1
            note = progress_note(done, config.rl.steps, time.perf_counter() - loop_started, done_here=done - start_step)
            logger.log(step, metrics, echo=echo, progress=note)
            last = step == config.rl.steps - 1
            if probe_tasks and (last or done % config.train.probe_every == 0):
                probe(step)
            if eval_tasks and (last or (config.train.eval_every and done % config.train.eval_every == 0)):
                evaluate(step)
            if last or (config.train.save_every and done % config.train.save_every == 0):
                save_checkpoint(
                    checkpoints,
                    step,
                    model=model,
                    tokenizer=tokenizer,
                    state={"trainer": trainer.state_dict()},
                    info={"history": history, "lora_base": lora_base},
                    keep_last=config.train.keep_last,
                )

        ran = {name: count - kernels_before.get(name, 0) for name, count in kernel_calls().items()}
        summary = {**_run_summary(config, history), "native_kernels": ran}
        add_to_provenance(out_dir, native_kernels=summary["native_kernels"])
        (out_dir / "summary.json").write_text(json.dumps(summary, indent=1))
        logger.close()
        return summary


# Keys of a sampled evaluation (``train.eval_samples``, ``train.probe_samples``) in its records.
SAMPLED = "sampled_"


def _flat(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary.items() if k not in ("by_kind", "slots")}


@dataclass
class _Evaluation:
    """The run's evaluations of one task set, each recorded in ``records``, the metrics
    (``<name>/<metric>``), ``<name>_items.jsonl`` (the starting one's also in
    ``<name>_start_items.jsonl``) and ``<name>_summary.json``: ``eval`` on the held-out tasks,
    ``probe`` on the probe set (training-distribution tasks no update trains on).
    Greedy, and also sampled where ``train.eval_samples`` / ``train.probe_samples`` ask for it."""

    name: str
    trainer: RLTrainer
    tasks: list[Task]
    config: RunConfig
    device: torch.device
    records: list[dict[str, Any]]
    logger: MetricsLogger
    out_dir: Path
    echo: bool

    @property
    def samples(self) -> int:
        """Sampled rollouts per task at each evaluation (0: greedy only)."""
        train = self.config.train
        return train.probe_samples if self.name == "probe" else train.eval_samples

    def starting_point(self, start_eval: dict[str, Any] | None) -> None:
        """Step -1, before any RL update: ``start_eval`` when it is this very evaluation, else evaluated."""
        sampled = self.samples > 0
        if (
            start_eval is not None
            and start_eval.get("step") == -1
            and start_eval.get("n") == len(self.tasks)
            and (f"{SAMPLED}r_tool" in start_eval) == sampled
        ):
            self._record(dict(start_eval))
        else:
            self(-1)

    def __call__(self, step: int) -> None:
        if self.echo:  # an evaluation prints nothing until it ends
            when = "before RL" if step < 0 else f"after step {step}"
            what = "held-out tasks" if self.name == "eval" else "probe tasks"
            print(f"evaluating {len(self.tasks)} {what} ({when}) ...", flush=True)
        items, summary = self._evaluate(step, self.tasks, "", temperature=0.0)
        record = {"step": step, **_flat(summary)}
        samples = self.samples
        if samples:
            # Each task ``samples`` times at the training temperature, drawn with the same seed at
            # every evaluation: the sampled policy's expected reward, the quantity RL raises.
            repeated = [task for task in self.tasks for _ in range(samples)]
            sampled_items, sampled = self._evaluate(
                step, repeated, "-sampled", temperature=self.trainer.loop.config.temperature
            )
            record |= {f"{SAMPLED}{k}": v for k, v in _flat(sampled).items() if k != "n"}
            self._write_items("sampled_items", step, sampled_items)
        self._record(record)
        self._write_items("items", step, items)
        (self.out_dir / f"{self.name}_summary.json").write_text(json.dumps(summary, indent=1))

    def _write_items(self, kind: str, step: int, items: list[dict[str, Any]]) -> None:
        """``<name>_<kind>.jsonl``, the latest evaluation's items; the starting one's are also kept as
        ``<name>_start_<kind>.jsonl``, which task-level comparisons with the start read."""
        text = "".join(json.dumps(i) + "\n" for i in items)
        (self.out_dir / f"{self.name}_{kind}.jsonl").write_text(text)
        if step < 0:
            (self.out_dir / f"{self.name}_start_{kind}.jsonl").write_text(text)

    def _evaluate(
        self, step: int, tasks: list[Task], kind: str, *, temperature: float
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        return evaluate_tasks(  # the one evaluation path: slca eval indomain --run takes it too
            self.trainer.loop,
            self.trainer.judge,
            self.config,
            tasks,
            name=f"{self.name}{kind}",
            step=step,
            temperature=temperature,
            bf16=self.trainer.bf16,  # evaluated in the precision it trains in
            device=self.device,
        )

    def _record(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        metrics = {f"{self.name}/{k}": v for k, v in record.items() if k != "step"}
        self.logger.log(record["step"], metrics, echo=self.echo)


@contextmanager
def _run_folder_held(config: RunConfig, *, resume: bool, may_differ: tuple[str, ...]) -> Iterator[RunConfig]:
    """The config to run with, while this process holds the run folder: on resume the folder is
    held before its ``config.yaml`` is compared with ``config``, and the config records every
    plugin loaded (the run's own and ``--plugin``'s), so a resume has them."""
    out_dir = Path(config.train.out_dir)
    with ExitStack() as held:
        locked = resume and out_dir.is_dir()  # then it is held before what it holds is read
        if locked:
            held.enter_context(hold_run_folder(out_dir, "slca train", next_step=BUSY_NEXT_STEP))
            config = resume_config(config, out_dir, may_differ=may_differ)
        check_estimators([config.rl.estimator], config.rl.log_rewards)
        if not locked:
            held.enter_context(hold_run_folder(out_dir, "slca train", next_step=BUSY_NEXT_STEP))
        yield replace(config, train=replace(config.train, plugins=loaded_plugins()))


def _finished_summary(config: RunConfig, out_dir: Path) -> dict[str, Any] | None:
    """The summary of a run that has done ``config.rl.steps`` steps (None while it has more to do)."""
    checkpoint = latest_checkpoint(out_dir / "checkpoints")
    if checkpoint is None or checkpoint_step(checkpoint) + 1 < config.rl.steps:
        return None
    try:
        summary = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # not written, or damaged: the run writes it again from its last checkpoint
    return summary if isinstance(summary, dict) and summary.get("steps") == config.rl.steps else None


def _record_threads(out_dir: Path) -> None:
    """The threads the run computes with, into its provenance; a resume with others is recorded
    beside them (``threads_resumed``) and said, since the run's steps then mix the two."""
    now = thread_settings()
    try:
        earlier = (read_provenance(out_dir) or {}).get("threads")
    except ProvenanceDamaged:
        return  # said at the start, and left as it is
    if earlier is None:
        add_to_provenance(out_dir, threads=now)
    elif earlier != now:
        print(f"warning: {out_dir} was started with {earlier}; it continues with {now}", file=sys.stderr)
        add_to_provenance(out_dir, threads_resumed=now)


def _record_start(config: RunConfig, out_dir: Path) -> None:
    """``config.yaml``, and the code and machine the run is on (a warning when it was started on others)."""
    save_yaml_config(run_settings(config), out_dir / "config.yaml")
    try:
        earlier = record_provenance(out_dir)
    except ProvenanceDamaged as exc:
        print(
            f"warning: {exc}: the code and environment this run was started with are not known, so its "
            "steps cannot be paired with other runs; the file is left as it is",
            file=sys.stderr,
        )
        return
    if earlier is not None:
        print(
            f"warning: {out_dir} was started with {describe(earlier)}; it continues with {describe(provenance())}, "
            "so its steps mix the two (results of different code or machines are not comparable seed by seed)",
            file=sys.stderr,
        )


def _run_summary(config: RunConfig, history: dict[str, list]) -> dict[str, Any]:
    grad_norms = history["grad_norms"]
    return {
        "estimator": config.rl.estimator,
        "steps": config.rl.steps,
        "final_eval": history["evals"][-1] if history["evals"] else {},
        "evals": history["evals"],
        "final_probe": history["probes"][-1] if history["probes"] else {},
        "probes": history["probes"],
        "grad_norm_std": std(grad_norms),
        "grad_norm_mean": sum(grad_norms) / max(1, len(grad_norms)),
        "provenance": provenance(),
    }
