"""SGLS: the schema-guided tool simulator (docs/method.md §7).

In process::

    from slca_grpo.simulator import SimulatorConfig, build_simulator
    sim = build_simulator(SimulatorConfig(backend="schema", seed=0, cache_path="sim.sqlite"))
    obs = sim.simulate(ToolCall("get_weather", {"city": "Paris"}), tools, session_id="episode-1")

Over HTTP (``slca serve-sim``) the same interface is offered by ``SimulatorClient``.
Names are imported on first use, so ``slca --help`` does not load jsonschema or httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from slca_grpo.lazy import lazy_exports

_EXPORTS = {
    "Backend": "base",
    "BackendRequest": "base",
    "BackendResult": "base",
    "SimulatorLike": "base",
    "SimulatorClient": "client",
    "ErrorInjectionConfig": "config",
    "OpenAIConfig": "config",
    "SimulatorConfig": "config",
    "Simulator": "core",
    "SimulatorStats": "core",
    "build_simulator": "core",
    "ERROR_KINDS": "errors",
    "INJECTED_KINDS": "errors",
    "approx_token_count": "text",
    "truncate_middle": "text",
    "create_app": "service",
}
__all__ = [
    "ERROR_KINDS",
    "INJECTED_KINDS",
    "Backend",
    "BackendRequest",
    "BackendResult",
    "ErrorInjectionConfig",
    "OpenAIConfig",
    "Simulator",
    "SimulatorClient",
    "SimulatorConfig",
    "SimulatorLike",
    "SimulatorStats",
    "approx_token_count",
    "build_simulator",
    "create_app",
    "truncate_middle",
]

if TYPE_CHECKING:
    from slca_grpo.simulator.base import (
        Backend,
        BackendRequest,
        BackendResult,
        SimulatorLike,
    )
    from slca_grpo.simulator.client import SimulatorClient
    from slca_grpo.simulator.config import (
        ErrorInjectionConfig,
        OpenAIConfig,
        SimulatorConfig,
    )
    from slca_grpo.simulator.core import Simulator, SimulatorStats, build_simulator
    from slca_grpo.simulator.errors import ERROR_KINDS, INJECTED_KINDS
    from slca_grpo.simulator.service import create_app
    from slca_grpo.simulator.text import approx_token_count, truncate_middle


__getattr__ = lazy_exports(__name__, _EXPORTS)
