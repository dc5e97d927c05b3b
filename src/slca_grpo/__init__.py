"""slca-grpo: Segment-Locked Credit Assignment for tool-calling RL."""

__version__ = "0.1.0"
