"""What the recipe's tests need of the package's test set-up (tests/conftest.py), and no more."""

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _kernels_built_in_a_session_folder(tmp_path_factory):
    """The C kernels (engine/native.py) build into this session's folder, not the user's cache;
    subprocesses inherit it."""
    os.environ["SLCA_GRPO_CACHE"] = str(tmp_path_factory.getbasetemp() / "slca-cache")


@pytest.fixture(autouse=True)
def _float32_unless_asked(monkeypatch):
    """``bf16: auto`` is float32 in tests on every machine, so results do not depend on whether this
    CPU has native bfloat16."""
    from slca_grpo.models import device

    monkeypatch.setattr(device, "cpu_has_native_bf16", lambda: False)
