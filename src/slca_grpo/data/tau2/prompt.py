"""τ²'s own agent system prompt, shared by the τ² task format and the harness's agent adapter."""

from __future__ import annotations

from slca_grpo.data.tau2.package import import_tau2


def tau2_system_prompt(domain_policy: str) -> str:
    """τ²'s own agent system prompt (instructions + domain policy), as its ``LLMAgent`` uses."""
    llm_agent = import_tau2("tau2.agent.llm_agent")
    return llm_agent.SYSTEM_PROMPT.format(agent_instruction=llm_agent.AGENT_INSTRUCTION, domain_policy=domain_policy)
