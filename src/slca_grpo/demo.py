"""``slca demo``: SFT a tiny model once, then RL it with each estimator from that same start.

Every estimator gets the same SFT checkpoint, seeds, prompts per step and step budget; the
report compares their held-out metrics and learning curves. Quick mode (GRPO vs SLCA) fits in
about ten minutes on two CPU cores; full mode adds ToolPO and RLTR and trains longer.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

from slca_grpo.config import load_yaml_config
from slca_grpo.presets import resolve_config_path
from slca_grpo.report import compare_runs
from slca_grpo.trainer.run import RunConfig, ensure_sft

QUICK_ESTIMATORS = ("grpo", "slca")
FULL_ESTIMATORS = ("grpo", "slca", "toolpo", "rltr")


def demo_config(quick: bool, overrides: tuple[str, ...] = ()) -> RunConfig:
    return load_yaml_config(RunConfig, resolve_config_path("demo-quick" if quick else "demo"), overrides)


def run_demo(
    out_dir: str | Path,
    *,
    quick: bool = False,
    estimators: tuple[str, ...] | None = None,
    overrides: tuple[str, ...] = (),
    echo: bool = True,
) -> dict[str, Any]:
    from slca_grpo.trainer.run import check_estimators, train

    started = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    base = demo_config(quick, overrides)
    estimators = estimators or (QUICK_ESTIMATORS if quick else FULL_ESTIMATORS)
    check_estimators(estimators)

    sft_dir = ensure_sft(base, out_dir, announce="[demo]" if echo else None)
    sft_seconds = time.perf_counter() - started

    run_dirs = []
    for estimator in estimators:
        config = copy.deepcopy(base)
        config.model.name = str(sft_dir)
        config.sft.steps = 0
        config.rl.estimator = estimator
        config.train.out_dir = str(out_dir / estimator)
        if echo:
            print(f"[demo] RL with {estimator}: {config.rl.steps} steps × {config.rl.prompts_per_step} prompts × G={config.rollout.group_size}", flush=True)
        train(config, echo=echo)
        run_dirs.append(out_dir / estimator)

    report = compare_runs(run_dirs, out_dir)
    report["seconds"] = {"total": time.perf_counter() - started, "sft": sft_seconds}
    report["mode"] = "quick" if quick else "full"
    (out_dir / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    if echo:
        print((out_dir / "report.md").read_text(encoding="utf-8"))
        print(f"[demo] wrote {out_dir / 'report.md'}, {out_dir / 'report.json'} and {out_dir / 'curves.png'}")
    return report
