"""The tool catalogue, one module per domain; each module exports ``TOOLS`` and ``CHAINS``."""

from __future__ import annotations

from slca_grpo.data.synthetic.domains import (
    dining,
    finance,
    home,
    messaging,
    scheduling,
    shopping,
    travel,
    utilities,
    weather,
)

DOMAIN_MODULES = (weather, travel, shopping, scheduling, finance, messaging, dining, home, utilities)

__all__ = ["DOMAIN_MODULES"]
