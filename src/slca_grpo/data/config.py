"""The ``data`` section of a run config."""

from __future__ import annotations

from dataclasses import dataclass, field

from slca_grpo.config import ConfigError, at_least
from slca_grpo.data.formats import AUTO, get_format
from slca_grpo.data.synthetic.catalogue import TOOL_SPECS
from slca_grpo.data.synthetic.generator import KINDS, MAX_SYNTHETIC_TASKS


@dataclass
class DataConfig:
    # "synthetic" (the built-in suite), a dataset file or folder in any format `slca data` reads
    # (docs/data.md), or a benchmark source such as "bfcl:simple_python" (test only) or "tau2:airline".
    train: str = "synthetic"
    test: str = "synthetic"
    train_format: str = "auto"  # "auto" (detected per file) or a format name
    test_format: str = "auto"
    n_train: int = 1000
    n_test: int = 100
    seed: int = 0
    tools_per_task: list[int] = field(default_factory=lambda: [3, 5])  # synthetic: offered tools (min, max)
    # synthetic: the mix of task kinds, kind -> weight (e.g. {two_step: 1}); empty: the default mix.
    kinds: dict[str, float] = field(default_factory=dict)
    skip_bad_rows: bool = False
    # Training tasks set aside as the probe set: no SFT or RL update trains on them, and the run
    # evaluates them every train.probe_every RL steps (its learning curve). At most a quarter of
    # the training tasks are set aside; 0: none.
    probe_tasks: int = 32

    def __post_init__(self) -> None:
        at_least(self, 1, "n_train")
        at_least(self, 0, "n_test", "probe_tasks")
        self._check_synthetic_sizes()
        for key in ("train_format", "test_format"):
            _check_format(key, getattr(self, key))
        bounds = list(self.tools_per_task)
        if len(bounds) != 2 or not 1 <= bounds[0] <= bounds[1] <= len(TOOL_SPECS):
            raise ConfigError(
                f"tools_per_task must be [min, max] with 1 <= min <= max <= {len(TOOL_SPECS)} (the synthetic "
                f"catalogue's tools), got {self.tools_per_task!r}"
            )
        if self.kinds:
            unknown = sorted(str(kind) for kind in self.kinds if kind not in KINDS)
            if unknown:
                raise ConfigError(f"kinds names unknown task kind(s) {unknown}; kinds are {', '.join(KINDS)}")
            weights = list(self.kinds.values())
            if any(isinstance(w, bool) or not isinstance(w, (int, float)) or not w >= 0 for w in weights) or not (
                sum(weights) > 0
            ):
                raise ConfigError(f"kinds must map kinds to weights >= 0 with a positive sum, got {self.kinds!r}")

    def _check_synthetic_sizes(self) -> None:
        """The synthetic suite is generated into memory, both splits whenever either source is
        synthetic: an absurd count is a one-line error, not an allocation that never ends."""
        if "synthetic" not in (self.train, self.test):
            return  # a file's n_train / n_test only limit what is read: the file bounds them
        for key in ("n_train", "n_test"):
            value = getattr(self, key)
            if value > MAX_SYNTHETIC_TASKS:
                raise ConfigError(
                    f"{key} must be <= {MAX_SYNTHETIC_TASKS:,} while data.train or data.test is synthetic "
                    f"(the suite is generated in memory, ~4 KB a task), got {value:,}; lower it, or train "
                    "from a dataset file"
                )


def _check_format(key: str, name: object) -> None:
    if name == AUTO:
        return
    try:
        get_format(str(name))
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None
