"""Run a credit-assignment study: one SFT checkpoint, then seeds × noise levels × estimators of RL.

Every RL run starts from the same SFT checkpoint. Runs of one seed are paired: the prompts of each
step are a pure function of (seed, step) (``trainer.run_data.task_sampler``), and so are the summary
noise draws (``rewards.noise``), so the estimators of a seed — and its noise levels — see the same
prompts and the same noise slots. Runs go seed by seed, so an interrupted study leaves balanced
cells; a finished run (``summary.json``) is skipped and an interrupted one resumes from its last
checkpoint, after checking it was made with the same settings, code and environment (a study pairs
runs of one commit only; ``provenance.json`` in each run folder records it).
"""

from __future__ import annotations

import copy
import json
import shutil
import time
from pathlib import Path
from typing import Any

from slca_grpo.config import ConfigError, apply_overrides, load_yaml_config
from slca_grpo.models.checkpoint import latest_checkpoint
from slca_grpo.presets import resolve_config_path
from slca_grpo.provenance import ProvenanceDamaged, describe, pairing_key, provenance, read_provenance
from slca_grpo.study.arms import trained_once, trained_runs
from slca_grpo.study.bfcl import bfcl_categories, final_model, score_on_bfcl
from slca_grpo.study.outcomes import BFCL_FOLDER, START_FOLDER, read_bfcl
from slca_grpo.study.plan import BFCL_TIMINGS_FILE, PLAN_FILE, TIMINGS_FILE, NoiseLevel, StudyPlan, read_json, run_dir
from slca_grpo.study.report import write_study_report
from slca_grpo.trainer.logger import clock
from slca_grpo.trainer.run import train
from slca_grpo.trainer.run_config import RunConfig, check_estimators
from slca_grpo.trainer.run_folder import (
    RESUME_MAY_DIFFER,
    RunFolderTaken,
    check_out_folder,
    check_steps_change,
    checkpoint_step,
    hold_run_folder,
    run_work,
    settings_difference,
)
from slca_grpo.trainer.sft_cache import ensure_sft, sft_is_current

# Set by the study from --out, so they may differ between a run and its resumption (the study
# checks the SFT checkpoint model.name points at is current itself).
LOCATION_KEYS = ("train.out_dir", "model.name")
STUDY_MAY_DIFFER = (*RESUME_MAY_DIFFER, *LOCATION_KEYS)


def base_config(plan: StudyPlan) -> RunConfig:
    """The preset (read now, so changes to the demo's model and data carry over), the budget,
    then the user's ``--set`` overrides."""
    path = resolve_config_path(plan.budget.preset)
    return load_yaml_config(RunConfig, path, [*plan.budget_overrides(), *plan.overrides])


def run_config(base: RunConfig, sft_dir: Path, target: Path, level: NoiseLevel, estimator: str, seed: int) -> RunConfig:
    """One RL run: from the shared SFT checkpoint, with this seed, estimator and noise level."""
    return apply_overrides(
        copy.deepcopy(base),
        [
            f"model.name={sft_dir}",
            "sft.steps=0",
            f"train.seed={seed}",
            f"rl.estimator={estimator}",
            f"train.out_dir={target}",
            *level.overrides(),
        ],
    )


def _once(plan: StudyPlan) -> str:
    """A note naming the estimators trained at one noise level only (their runs stand for every level)."""
    blind = trained_once(plan)
    return f" ({', '.join(blind)}: once, the noise cannot reach it)" if blind else ""


def provenance_difference(target: Path) -> str | None:
    """Why a started run cannot be paired with runs made now (other code or environment), or None."""
    try:
        earlier = read_provenance(target)
    except ProvenanceDamaged as exc:
        return f"{exc}, so the code and environment it was made with are not known"
    if earlier is None:
        return "it was made by an earlier version that did not record its code and environment"
    if pairing_key(earlier) != pairing_key(provenance()):
        return f"it was run with {describe(earlier)}; this is {describe(provenance())}"
    return None


# What a single training run leaves at its folder's top level; a study keeps its runs in subfolders.
SINGLE_RUN_WORK = ("summary.json", "checkpoints", "metrics.jsonl", "model/")


def check_study_folder(out_dir: Path) -> None:
    """Before any work: a file, a folder inside a checkpoint, or a training run's folder is refused
    (a study resumes only a study: rerunning it continues its unfinished runs)."""
    check_out_folder(out_dir, flag="--out", resume=True, force=False)  # a file, or inside a checkpoint
    single = [item for item in run_work(out_dir) if item in SINGLE_RUN_WORK] if out_dir.is_dir() else []
    if single:
        raise RunFolderTaken(
            f"--out {out_dir} holds a training run ({', '.join(single)}), not a study; give the study another --out"
        )


def seed_start(out_dir: Path, runs: list[tuple[int, NoiseLevel, str]], seed: int, key: str = "evals") -> dict | None:
    """The evaluation before RL (``key``: ``evals`` held out, ``probes`` the probe set) of a finished
    run of ``seed``, or None. Every run starts from the same checkpoint and a seed's evaluations draw
    the same samples (``train.seed``), while the evaluation reward is the clean one at every noise
    level: the runs of one seed share it."""
    for other, level, estimator in runs:
        if other != seed:
            continue
        summary = read_json(run_dir(out_dir, level, estimator, seed) / "summary.json", {})
        records = summary.get(key) or [{}]
        if records[0].get("step") == -1:
            return records[0]
    return None


class _BFCLScoring:
    """Scores a model on the budget's BFCL categories into ``<folder>/bfcl`` once, timing it in
    ``bfcl_timings.json``; does nothing when the budget names none."""

    def __init__(self, out_dir: Path, plan: StudyPlan, base: RunConfig, *, echo: bool):
        self.out_dir, self.echo = out_dir, echo
        self.categories, self.limit = bfcl_categories(plan.budget.bfcl), plan.budget.bfcl_limit
        # Greedy, in the precision the runs evaluate in, through the model's chat format.
        self.options = {
            "bf16": base.rl.bf16,
            "chat_format": base.model.chat_format,
            "chat_template": base.model.chat_template or None,
            "tool_parser": base.model.tool_parser,
        }

    def __call__(self, folder: Path, name: str, model: Path | None = None) -> None:
        """Score ``model`` (default: the last checkpoint of the run in ``folder``) into ``folder``."""
        if not self.categories or read_bfcl(folder) is not None:
            return
        model = model or final_model(folder)
        if self.echo:
            print(f"[study] BFCL ({', '.join(self.categories)}, first {self.limit}): {name} ...", flush=True)
        seconds = score_on_bfcl(
            model, folder, self.categories, self.limit, scratch=self.out_dir / ".bfcl-scratch", **self.options
        )
        timings = read_json(self.out_dir / BFCL_TIMINGS_FILE, {})
        timings[name] = seconds
        (self.out_dir / BFCL_TIMINGS_FILE).write_text(json.dumps(timings, indent=1), encoding="utf-8")
        if self.echo:
            scores = read_bfcl(folder) or {}
            print(
                f"[study] BFCL {name}: {100 * scores.get('overall_accuracy', 0):.1f} % in {seconds:.0f} s", flush=True
            )


def _finished(run: Path, steps: int) -> bool:
    """Whether ``run`` has done ``steps`` steps (a study asked for more extends it)."""
    try:
        return json.loads((run / "summary.json").read_text(encoding="utf-8")).get("steps") == steps
    except (OSError, ValueError, AttributeError):
        return False


def run_study(out_dir: str | Path, plan: StudyPlan, *, echo: bool = True, verbose: bool = False) -> dict[str, Any]:
    """SFT once, run every (seed, level, estimator) not yet finished, then write the report."""
    started = time.perf_counter()
    out_dir = Path(out_dir)
    check_study_folder(out_dir)
    base = base_config(plan)
    check_estimators(plan.estimators, base.rl.log_rewards)
    # Held from before the started runs are read until the report is written: a second study on
    # this --out would interleave its writes with this one's.
    with hold_run_folder(out_dir, "slca study", next_step="give it another --out"):
        return _run_study_in(out_dir, plan, base, started, echo=echo, verbose=verbose)


def _run_study_in(
    out_dir: Path, plan: StudyPlan, base: RunConfig, started: float, *, echo: bool, verbose: bool
) -> dict[str, Any]:
    runs = list(trained_runs(plan))
    # Refuse settings that clash with finished or interrupted runs before spending any time.
    sft_dir = out_dir / "sft"
    configs = {}
    started_runs = []
    for seed, level, estimator in runs:
        target = run_dir(out_dir, level, estimator, seed)
        config = configs[(seed, level, estimator)] = run_config(base, sft_dir, target, level, estimator, seed)
        if (target / "config.yaml").exists():
            started_runs.append(target)
            difference = settings_difference(target / "config.yaml", config, ignore=(*STUDY_MAY_DIFFER, "rl.steps"))
            if difference:
                raise ConfigError(
                    f"{target} was run with other settings ({difference}); use another --out or remove it"
                )
            checkpoint = latest_checkpoint(target / "checkpoints")
            if checkpoint is not None:  # more steps (or fewer not yet done) only where that changes none taken
                started_with = load_yaml_config(RunConfig, target / "config.yaml").rl.steps
                check_steps_change(target, started_with, checkpoint_step(checkpoint) + 1, config)
            reason = provenance_difference(target)
            if reason:
                raise ConfigError(
                    f"{target} cannot be paired with runs made now: {reason}. A study pairs runs of one commit and "
                    "one environment only; use another --out"
                )
    if started_runs and not sft_is_current(base, out_dir):
        raise ConfigError(
            f"{out_dir} holds runs from an SFT checkpoint made with other settings (model, data or SFT "
            "changed); use another --out"
        )
    (out_dir / PLAN_FILE).write_text(json.dumps(plan.to_dict(), indent=1), encoding="utf-8")
    if not sft_is_current(base, out_dir):
        shutil.rmtree(out_dir / START_FOLDER, ignore_errors=True)  # scores of a start that is made anew
    ensure_sft(base, out_dir, announce="[study]" if echo else None)

    timings = read_json(out_dir / TIMINGS_FILE, {})
    if echo:
        print(
            f"[study] {len(runs)} RL runs: {len(plan.seeds)} seeds × {len(plan.levels)} noise levels × "
            f"{len(plan.estimators)} estimators, {base.rl.steps} steps each{_once(plan)}",
            flush=True,
        )
    bfcl = _BFCLScoring(out_dir, plan, base, echo=echo)
    bfcl(out_dir / START_FOLDER, "start", model=sft_dir)
    spent: list[float] = []
    for index, (seed, level, estimator) in enumerate(runs, 1):
        target = run_dir(out_dir, level, estimator, seed)
        name = f"{level.name}/{estimator}/seed-{seed}"
        if _finished(target, base.rl.steps):
            bfcl(target, name)  # scored unless it was before the study stopped
            continue
        # A run extended to more steps ends with another model: its earlier BFCL scores go.
        shutil.rmtree(target / BFCL_FOLDER, ignore_errors=True)
        run_started = time.perf_counter()
        summary = train(
            configs[(seed, level, estimator)],
            resume=True,
            echo=verbose,
            start_eval=seed_start(out_dir, runs, seed),
            start_probe=seed_start(out_dir, runs, seed, "probes"),
            resume_may_differ=LOCATION_KEYS,
        )
        spent.append(time.perf_counter() - run_started)
        bfcl(target, name)
        timings[name] = spent[-1]
        (out_dir / TIMINGS_FILE).write_text(json.dumps(timings, indent=1), encoding="utf-8")
        if echo:
            remaining = sum(
                1 for s, lv, e in runs[index:] if not (run_dir(out_dir, lv, e, s) / "summary.json").exists()
            )
            final, start = summary.get("final_eval", {}), (summary.get("evals") or [{}])[0]
            print(
                f"[study] {index}/{len(runs)} {name}: {spent[-1]:.0f} s, held-out Name-F1 "
                f"{100 * final.get('name_f1', 0):.1f} (start {100 * start.get('name_f1', 0):.1f}); elapsed "
                f"{clock(time.perf_counter() - started)}, ETA {clock(remaining * sum(spent) / len(spent))}",
                flush=True,
            )
    report = write_study_report(out_dir, plan)
    if echo:
        print(
            f"[study] done in {clock(time.perf_counter() - started)}; "
            f"wrote {out_dir / 'report.md'}, report.json and charts"
        )
    return report
