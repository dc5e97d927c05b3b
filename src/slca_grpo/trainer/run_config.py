"""The configuration of a whole run (``slca train CONFIG``): one section per part, and the checks
that need the estimator and reward registries, made before anything trains."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import yaml

from slca_grpo.algos import estimator_spec, list_estimators
from slca_grpo.config import ConfigError, at_least, to_dict
from slca_grpo.data.config import DataConfig
from slca_grpo.models.config import ModelConfig
from slca_grpo.models.device import DEVICE_SPEC
from slca_grpo.rewards import list_rewards
from slca_grpo.rewards.config import RewardConfig
from slca_grpo.rollout.loop import RolloutConfig
from slca_grpo.simulator.config import SimulatorConfig, SimulatorServiceConfig
from slca_grpo.trainer.rl import RLConfig
from slca_grpo.trainer.sft import SFTConfig


@dataclass
class TrainConfig:
    out_dir: str = "runs/default"
    seed: int = 0
    eval_every: int = 10  # RL steps between held-out evaluations (0: only at the end)
    eval_tasks: int = 64
    # Sampled rollouts per held-out task at the rollout temperature, beside the greedy one (0: greedy
    # only), drawn with the same seed at every evaluation: whether what RL raises on the sampled
    # policy reaches tasks it never trained on (sampled_* metrics, eval_sampled_items.jsonl).
    eval_samples: int = 0
    eval_batch_size: int = 32
    # RL steps between greedy evaluations of the probe set (data.probe_tasks: training-distribution
    # tasks no update trains on), before RL and after the last step too: the learning curve. 0: none.
    probe_every: int = 4
    # Sampled rollouts per probe task at the rollout temperature, beside the greedy one (0: greedy
    # only). RL raises the sampled policy's reward, which a greedy probe near its ceiling cannot
    # show; every evaluation draws with the same seed, so two of them differ by the policy alone.
    probe_samples: int = 4
    save_every: int = 10
    keep_last: int = 2
    tensorboard: bool = False
    wandb: bool = False
    wandb_project: str = "slca-grpo"
    progress: bool = True
    torch_threads: int = 0  # 0: torch's default
    plugins: list[str] = field(default_factory=list)  # your modules (names or .py files) imported first
    device: str = "auto"  # auto (CUDA when there is one), cpu, cuda or cuda:N
    keep_freed_memory: bool = True  # reuse freed host memory instead of faulting in fresh pages (Linux glibc)

    def __post_init__(self) -> None:
        if not self.out_dir.strip():  # "" would train into the current folder
            raise ConfigError("out_dir is empty: name the run's folder, e.g. runs/my-run")
        if not DEVICE_SPEC.fullmatch(self.device):
            raise ConfigError(f"device must be auto, cpu, cuda or cuda:N, got {self.device!r}")
        at_least(
            self,
            0,
            "eval_every",
            "eval_tasks",
            "eval_samples",
            "probe_every",
            "probe_samples",
            "save_every",
            "torch_threads",
        )
        at_least(self, 1, "eval_batch_size", "keep_last")


@dataclass
class RunConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    simulator: SimulatorConfig = field(default_factory=SimulatorConfig)
    simulator_service: SimulatorServiceConfig = field(default_factory=SimulatorServiceConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    rl: RLConfig = field(default_factory=RLConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    # Imported before a config file is read: they may register names its settings use.
    plugins_key: ClassVar[str] = "train.plugins"


# Settings that may hold a secret: read from the config, never written out (the key then comes
# from its environment variable, as the setting's own comment says).
SECRET_SETTINGS = ("simulator.openai.api_key",)


def run_settings(config: RunConfig) -> dict[str, Any]:
    """Every setting of a run as plain YAML data (lists, not tuples), secrets left out: the one
    description that ``config.yaml``, the resume check, the SFT fingerprint and the logger read."""
    settings = yaml.safe_load(yaml.safe_dump(to_dict(config)))
    for dotted in SECRET_SETTINGS:
        *sections, name = dotted.split(".")
        node = settings
        for section in sections:
            node = node[section]
        node[name] = None
    return settings


def check_estimators(names, log_rewards=()) -> None:
    """Fail before any training on an estimator the registry does not know, or a reward (read by
    an estimator or asked for in ``rl.log_rewards``) that no reward family provides."""
    unknown = [n for n in names if n not in list_estimators()]
    if unknown:
        raise ConfigError(
            f"unknown estimator(s) {', '.join(unknown)}; registered: {', '.join(list_estimators())} "
            "(one a plugin registers needs that plugin: slca --plugin MODULE_OR_FILE ..., or train.plugins)"
        )
    wanted = [(f"estimator {n!r} reads", r) for n in names for r in estimator_spec(n).rewards]
    wanted += [("rl.log_rewards names", r) for r in log_rewards]
    for who, reward in wanted:
        if reward not in list_rewards():
            raise ConfigError(
                f"{who} reward {reward!r}, which no reward family provides; registered: {', '.join(list_rewards())}"
            )
