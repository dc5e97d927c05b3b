"""``slca demo``: SFT a model once, then RL it with each estimator from that same start.

Every estimator gets the same SFT checkpoint, seeds, prompts per step and step budget; the
report compares their held-out metrics and learning curves. On the tiny model, quick mode (GRPO
vs SLCA) fits in about ten minutes on two CPU cores and full mode adds ToolPO and RLTR and trains
longer; ``model="smollm2"`` runs GRPO vs SLCA on SmolLM2-135M-Instruct in about 40 minutes.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

from slca_grpo.config import ConfigError, load_yaml_config
from slca_grpo.plugins import load_plugins
from slca_grpo.presets import resolve_config_path
from slca_grpo.report import compare_runs
from slca_grpo.trainer.run import RunConfig, ensure_sft

QUICK_ESTIMATORS = ("grpo", "slca")
FULL_ESTIMATORS = ("grpo", "slca", "toolpo", "rltr")
DEMO_MODELS = ("tiny", "smollm2")


def demo_preset(quick: bool, model: str = "tiny") -> str:
    if model not in DEMO_MODELS:
        raise ConfigError(f"demo model must be one of {', '.join(DEMO_MODELS)}, got {model!r}")
    if model == "smollm2":
        if quick:
            raise ConfigError("--quick applies to the tiny model; the SmolLM2 demo has one size")
        return "demo-smollm2"
    return "demo-quick" if quick else "demo"


def demo_config(quick: bool, overrides: tuple[str, ...] = (), model: str = "tiny") -> RunConfig:
    return load_yaml_config(RunConfig, resolve_config_path(demo_preset(quick, model)), overrides)


def run_demo(
    out_dir: str | Path,
    *,
    quick: bool = False,
    model: str = "tiny",
    estimators: tuple[str, ...] | None = None,
    overrides: tuple[str, ...] = (),
    echo: bool = True,
) -> dict[str, Any]:
    from slca_grpo.trainer.run import check_estimators, train

    started = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    base = demo_config(quick, overrides, model)
    load_plugins(base.train.plugins)
    estimators = estimators or (FULL_ESTIMATORS if model == "tiny" and not quick else QUICK_ESTIMATORS)
    check_estimators(estimators, base.rl.log_rewards)

    sft_dir = ensure_sft(base, out_dir, announce="[demo]" if echo else None)
    sft_seconds = time.perf_counter() - started

    run_dirs = []
    start_eval = None  # every estimator starts from the same checkpoint: evaluate it once
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
        summary = train(config, echo=echo, start_eval=start_eval)
        start_eval = start_eval or next((e for e in summary.get("evals", []) if e.get("step") == -1), None)
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
