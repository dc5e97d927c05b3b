import sys
from pathlib import Path

# Test helpers (fake servers, scripted models and rollouts, shared tool schemas) live beside the tests;
# test modules import them, never one another.
sys.path.insert(0, str(Path(__file__).parent))

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _float32_unless_asked(monkeypatch):
    """``bf16: auto`` (the default) is float32 in tests on every machine, so results do not depend on
    whether this CPU has native bfloat16; tests of ``auto`` itself patch the probe back."""
    from slca_grpo.models import device

    monkeypatch.setattr(device, "cpu_has_native_bf16", lambda: False)
