"""SGLS: the schema-guided tool simulator (docs/method.md §7).

In process::

    from slca_grpo.simulator import SimulatorConfig, build_simulator
    sim = build_simulator(SimulatorConfig(backend="schema", seed=0, cache_path="sim.sqlite"))
    obs = sim.simulate(ToolCall("get_weather", {"city": "Paris"}), tools, session_id="episode-1")

Over HTTP (``slca serve-sim``) the same interface is offered by ``SimulatorClient``.
"""

from __future__ import annotations

from slca_grpo.simulator.base import Backend, BackendRequest, BackendResult, SimulatorLike
from slca_grpo.simulator.client import SimulatorClient
from slca_grpo.simulator.config import ErrorInjectionConfig, OpenAIConfig, SimulatorConfig, SimulatorServiceConfig
from slca_grpo.simulator.core import Simulator, SimulatorStats, build_simulator
from slca_grpo.simulator.errors import ERROR_KINDS, INJECTED_KINDS
from slca_grpo.simulator.service import create_app
from slca_grpo.simulator.text import approx_token_count, truncate_middle_to_tokens

__all__ = [
    "Backend",
    "BackendRequest",
    "BackendResult",
    "ERROR_KINDS",
    "ErrorInjectionConfig",
    "INJECTED_KINDS",
    "OpenAIConfig",
    "Simulator",
    "SimulatorClient",
    "SimulatorConfig",
    "SimulatorLike",
    "SimulatorServiceConfig",
    "SimulatorStats",
    "approx_token_count",
    "build_simulator",
    "create_app",
    "truncate_middle_to_tokens",
]
