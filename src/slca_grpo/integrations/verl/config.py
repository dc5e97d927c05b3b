"""The ``slca`` section of a verl config: our settings, read by the trainer, agent loop and reward.

verl's own sections are typed dataclasses that refuse unknown keys, so ours live in a top-level
``slca:`` section (``+slca.advantage.lambda_tool=2`` on verl's command line). It is checked like
every config of this project: an unknown key or a bad value is a ``ConfigError`` naming it. The
plugins it names are imported before it is read, so a plugin estimator's own settings
(``+slca.advantage.<name>.<key>=...``) and a plugin reward's (``+slca.reward.<family>.<key>=...``)
are checked like ours.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from slca_grpo.algos.registry import AdvantageConfig
from slca_grpo.config import ConfigError, at_least, from_dict, load_named_plugins
from slca_grpo.rewards.config import RewardConfig
from slca_grpo.simulator.config import SimulatorConfig, SimulatorServiceConfig

SECTION = "slca"

__all__ = ["SECTION", "VerlSLCAConfig", "plain", "read_section"]


@dataclass
class VerlSLCAConfig:
    """Everything of ours a verl run needs besides verl's own settings."""

    advantage: AdvantageConfig = field(default_factory=AdvantageConfig)
    # The simulator runs in each agent-loop worker from `simulator`, or is a `slca serve-sim`
    # service shared by all of them when `simulator_service.url` is set.
    simulator: SimulatorConfig = field(default_factory=SimulatorConfig)
    simulator_service: SimulatorServiceConfig = field(default_factory=SimulatorServiceConfig)
    use_fixtures: bool = True  # a task's recorded responses answer its gold calls (docs/data.md)
    # Tool responses are cut in the middle to this many policy tokens (the paper: 2,048).
    max_tool_response_tokens: int = 2048
    reward: RewardConfig = field(default_factory=RewardConfig)
    plugins: list[str] = field(default_factory=list)  # modules or .py files: estimators, rewards, backends
    plugins_key: ClassVar[str] = "plugins"  # imported before the section is read

    def __post_init__(self) -> None:
        at_least(self, 1, "max_tool_response_tokens")
        if self.reward.has_summary_noise:
            raise ConfigError("reward.summary_noise_*: the study's summary-reward noise is not available on verl")


def plain(value: Any) -> Any:
    """``value`` with every mapping and sequence as a plain dict or list (OmegaConf's included)."""
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [plain(item) for item in value]
    return value


def read_section(config: Mapping[str, Any] | None, *, defaults: Mapping[str, Any] | None = None) -> VerlSLCAConfig:
    """The checked ``slca`` section of a verl config (all defaults when it has none).

    ``defaults`` fills keys the section leaves out (nested: ``{"advantage": {"norm_std": False}}``).
    """
    section = plain(config.get(SECTION) if isinstance(config, Mapping) else None) or {}
    if not isinstance(section, dict):
        raise ConfigError(f"{SECTION}: expected a mapping, got {section!r}")
    for key, values in plain(defaults or {}).items():
        given = section.get(key)
        section[key] = {**values, **given} if isinstance(given, dict) else (values if given is None else given)
    load_named_plugins(VerlSLCAConfig, section)
    return from_dict(VerlSLCAConfig, section, prefix=f"{SECTION}.")
