"""The multi-seed credit-assignment study (``slca study``): paired GRPO-vs-SLCA runs under
summary-reward noise, with bootstrap confidence intervals over seeds (docs/study.md)."""
