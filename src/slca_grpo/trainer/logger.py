"""Metrics to stdout and a JSONL file always; TensorBoard and Weights & Biases when asked."""

from __future__ import annotations

import json
import math
import secrets
import sys
from pathlib import Path
from typing import Any, TextIO

from slca_grpo.rewards import list_rewards

HEADLINE = ("reward/score", "reward/tool", "reward/summary", "train/kl", "train/clip_frac", "train/grad_norm")


class MetricsLogger:
    def __init__(
        self,
        out_dir: str | Path,
        *,
        name: str = "metrics",
        stdout: TextIO | None = sys.stdout,
        tensorboard: bool = False,
        wandb: bool = False,
        wandb_project: str = "slca-grpo",
        run_name: str | None = None,
        config: dict[str, Any] | None = None,
        resume: bool = False,
        resume_step: int | None = None,
    ):
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.out_dir / f"{name}.jsonl"
        if resume and resume_step is not None and self.path.exists():
            # Steps logged after the checkpoint (before a crash) are redone: drop their old lines.
            keep_metrics_through(self.path, resume_step)
        self._file = open(self.path, "a" if resume else "w", encoding="utf-8")
        self._stdout = stdout
        self._tensorboard = None
        self._wandb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise RuntimeError(
                    "TensorBoard logging needs the 'tensorboard' package: pip install tensorboard"
                ) from exc
            self._tensorboard = SummaryWriter(log_dir=str(self.out_dir / "tensorboard"))
        if wandb:
            try:
                import wandb as wandb_module
            except ImportError as exc:
                raise RuntimeError("W&B logging needs the 'wandb' package: pip install wandb") from exc
            # One W&B run per output folder: a resumed training run continues the same W&B run.
            id_file = self.out_dir / f"{name}.wandb_id"
            run_id = id_file.read_text().strip() if resume and id_file.exists() else secrets.token_hex(6)
            id_file.write_text(run_id)
            self._wandb = wandb_module.init(
                project=wandb_project, name=run_name, config=config, dir=str(self.out_dir), id=run_id, resume="allow"
            )

    def log(self, step: int, metrics: dict[str, Any], *, echo: bool = True, progress: str = "") -> None:
        """Write one step's metrics; ``progress`` (e.g. ``3/16, 0m42s, ETA 2m10s``) ends the stdout line."""
        clean = {
            k: (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v) for k, v in metrics.items()
        }
        self._file.write(json.dumps({"step": step, **clean}, default=str) + "\n")
        self._file.flush()
        numeric = {k: v for k, v in clean.items() if isinstance(v, float) and math.isfinite(v)}
        if self._tensorboard is not None:
            for key, value in numeric.items():
                self._tensorboard.add_scalar(key, value, step)
        if self._wandb is not None:
            self._wandb.log(numeric, step=step)
        if echo and self._stdout is not None:
            shown = [f"{k.split('/')[-1]}={numeric[k]:.4g}" for k in HEADLINE if k in numeric]
            shown += [f"{k.split('/')[-1]}={numeric[k]:.4g}" for k in _other_rewards(numeric)]
            shown += [f"{k}={v:.4g}" for k, v in numeric.items() if k.startswith("eval/") and "success@0.9" in k]
            shown += [f"{k}={numeric[k]:.4g}" for k in ("probe/r_tool", "probe/success@0.7") if k in numeric]
            tail = f" [{progress}]" if progress else ""
            print(f"step {step}: " + " ".join(shown) + tail, file=self._stdout, flush=True)

    def close(self) -> None:
        self._file.close()
        if self._tensorboard is not None:
            self._tensorboard.close()
        if self._wandb is not None:
            self._wandb.finish()


def _other_rewards(numeric: dict[str, float]) -> list[str]:
    """``reward/NAME`` keys of registered rewards beyond the headline ones (a plugin's too)."""
    return [key for key in (f"reward/{name}" for name in list_rewards()) if key in numeric and key not in HEADLINE]


def clock(seconds: float) -> str:
    """``42s``, ``3m05s`` or ``1h02m``."""
    minutes, seconds = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def progress_note(done: int, total: int, elapsed: float, *, done_here: int | None = None) -> str:
    """``done/total, elapsed, ETA``; the rate comes from the ``done_here`` steps this process ran."""
    ran = done if done_here is None else done_here
    left = total - done
    eta = f", ETA {clock(elapsed / ran * left)}" if ran > 0 and left > 0 else ""
    return f"{done}/{total}, {clock(elapsed)}{eta}"


def keep_metrics_through(path: Path, step: int) -> None:
    """Rewrite a metrics file without the lines of steps after ``step`` (and any torn last line)."""
    kept = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), int) and record["step"] <= step:
            kept.append(line + "\n")
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text("".join(kept), encoding="utf-8")
    temporary.replace(path)


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
