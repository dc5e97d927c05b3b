"""``slca demo``: SFT a model once, then RL it with each estimator from that same start.

Every estimator gets the same SFT checkpoint, seeds, prompts per step and step budget; the
report compares their held-out metrics and learning curves. Quick mode (GRPO vs SLCA) starts from
the shipped reader model (``model="tiny"``: a tiny model built here); full mode trains a tiny
model, adds ToolPO and RLTR and trains longer; ``model="smollm2"`` runs GRPO vs SLCA on
SmolLM2-135M-Instruct. Timings: docs/performance.md.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

from slca_grpo.config import ConfigError, load_yaml_config
from slca_grpo.models.checkpoint import remove_path
from slca_grpo.plugins import load_plugins
from slca_grpo.presets import resolve_config_path
from slca_grpo.report import compare_runs
from slca_grpo.trainer.run import train
from slca_grpo.trainer.run_config import RunConfig, check_estimators
from slca_grpo.trainer.run_folder import check_out_folder, hold_run_folder
from slca_grpo.trainer.sft_cache import ensure_sft

QUICK_ESTIMATORS = ("grpo", "slca")
FULL_ESTIMATORS = ("grpo", "slca", "toolpo", "rltr")
# (quick, model) -> preset. The quick demo starts from the shipped reader; the full one from a
# tiny model built here; SmolLM2 has one size.
DEMO_PRESETS = {
    (True, "reader"): "demo-quick",
    (True, "tiny"): "demo-quick-tiny",
    (False, "tiny"): "demo",
    (False, "smollm2"): "demo-smollm2",
}
DEMO_MODELS = ("reader", "tiny", "smollm2")


def default_demo_model(quick: bool) -> str:
    return "reader" if quick else "tiny"


def demo_preset(quick: bool, model: str | None = None) -> str:
    model = model or default_demo_model(quick)
    if model not in DEMO_MODELS:
        raise ConfigError(f"demo model must be one of {', '.join(DEMO_MODELS)}, got {model!r}")
    preset = DEMO_PRESETS.get((quick, model))
    if preset is None:
        sizes = [("--quick" if q else "the full demo") for q, m in DEMO_PRESETS if m == model]
        raise ConfigError(f"the {model} demo exists as {' and '.join(sizes)} only")
    return preset


def demo_config(quick: bool, overrides: tuple[str, ...] = (), model: str | None = None) -> RunConfig:
    return load_yaml_config(RunConfig, resolve_config_path(demo_preset(quick, model)), overrides)


def run_demo(
    out_dir: str | Path,
    *,
    quick: bool = False,
    model: str | None = None,
    estimators: tuple[str, ...] | None = None,
    overrides: tuple[str, ...] = (),
    echo: bool = True,
    force: bool = False,
) -> dict[str, Any]:
    """SFT once, then RL with each estimator from that checkpoint, and the comparison report.

    A folder that holds a demo (or any run's work) is refused before any work unless ``force``
    replaces it (its SFT checkpoint is kept and reused when its settings match); the folder is
    held while the demo writes it."""
    check_out_folder(out_dir, flag="--out", resume=False, force=force, can_resume=False)
    with hold_run_folder(out_dir, "slca demo", next_step="use another --out"):
        return _run_demo(Path(out_dir), quick, model, estimators, overrides, echo, force)


def _run_demo(
    out_dir: Path,
    quick: bool,
    model: str | None,
    estimators: tuple[str, ...] | None,
    overrides: tuple[str, ...],
    echo: bool,
    force: bool,
) -> dict[str, Any]:
    started = time.perf_counter()
    base = demo_config(quick, overrides, model)
    load_plugins(base.train.plugins)
    model = model or default_demo_model(quick)
    estimators = estimators or (FULL_ESTIMATORS if model == "tiny" and not quick else QUICK_ESTIMATORS)
    check_estimators(estimators, base.rl.log_rewards)
    if force:  # the earlier demo's report and RL runs; its SFT stays, reused if its settings match
        for name in ("report.md", "report.json", "curves.png", *estimators):
            remove_path(out_dir / name)

    sft_dir = ensure_sft(base, out_dir, announce="[demo]" if echo else None)
    sft_seconds = time.perf_counter() - started

    run_dirs = []
    start_eval = start_probe = None  # every estimator starts from the same checkpoint: evaluate it once
    for estimator in estimators:
        config = copy.deepcopy(base)
        config.model.name = str(sft_dir)
        config.sft.steps = 0
        config.rl.estimator = estimator
        config.train.out_dir = str(out_dir / estimator)
        if echo:
            print(
                f"[demo] RL with {estimator}: {config.rl.steps} steps × {config.rl.prompts_per_step} prompts"
                f" × G={config.rollout.group_size}",
                flush=True,
            )
        summary = train(config, echo=echo, start_eval=start_eval, start_probe=start_probe)
        start_eval = start_eval or next((e for e in summary.get("evals", []) if e.get("step") == -1), None)
        start_probe = start_probe or next((e for e in summary.get("probes", []) if e.get("step") == -1), None)
        run_dirs.append(out_dir / estimator)

    report = compare_runs(run_dirs, out_dir)
    report["seconds"] = {"total": time.perf_counter() - started, "sft": sft_seconds}
    report["mode"] = "quick" if quick else "full"
    report["model"] = model
    (out_dir / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    if echo:
        print((out_dir / "report.md").read_text(encoding="utf-8"))
        print(f"[demo] wrote {out_dir / 'report.md'}, {out_dir / 'report.json'} and {out_dir / 'curves.png'}")
    return report
