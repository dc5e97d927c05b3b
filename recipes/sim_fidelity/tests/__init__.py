"""The sim-to-real fidelity recipe's tests: ``python -m pytest recipes/sim_fidelity``."""
