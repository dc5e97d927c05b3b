"""Evaluation: any policy on the in-domain tasks, BFCL and τ²-Bench.

Its doors: ``policies.resolve_model_agent`` (a ``--policy`` spec, local or ``openai:``, as a
``ChatAgent``), ``agent.ChatAgent`` / ``AgentRequest`` (the text-level interface every harness
drives), ``indomain`` (the in-domain metrics, over the training stack's agent loop), ``bfcl.run_bfcl``,
``tau2``, and ``report`` (the files every evaluation writes). The simulator's sim-to-real fidelity
against τ²'s real tools is a recipe outside the package (``recipes/sim_fidelity/``).
"""
