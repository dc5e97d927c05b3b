"""SGLS fidelity: replay τ² tool-call sequences through τ²'s real tools and through the simulator,
and measure how far apart they are (``slca fidelity``; metrics defined in docs/simulator.md).

Modules: ``sequences`` (gold and perturbed call sequences), ``replay`` (real environment and SGLS
sessions), ``metrics`` (pure comparisons and tallies), ``reward_fidelity`` (HierR of the same
rollout on both sides), ``report`` (report.md / report.json) and ``runner`` (``run_fidelity``).
Importing the package does not import τ² (litellm takes seconds); ``runner`` does, so a run imports
``slca_grpo.eval.fidelity.runner`` itself.
"""

from __future__ import annotations

from slca_grpo.eval.fidelity.sequences import PERTURBATIONS, CallSequence, Step, ToolCatalog, perturbed_sequences

__all__ = [
    "PERTURBATIONS",
    "CallSequence",
    "Step",
    "ToolCatalog",
    "perturbed_sequences",
]
