"""The registration entry point, run in every Ray worker of a verl job.

``ray_kwargs.ray_init.runtime_env.worker_process_setup_hook=slca_grpo.integrations.verl.register.setup_worker``
makes our trainers (``trainer.v1.trainer_mode=slca_sync``), our agent loop (``slca_tool_agent``) and
the ``slca`` tool parser known in the processes where verl looks them up: the trainer's task runner
and the agent-loop workers.
"""

from __future__ import annotations

# Importing these registers our verl trainers, agent loop and tool parser in this process.
import slca_grpo.integrations.verl.agent_loop  # noqa: F401
import slca_grpo.integrations.verl.trainer  # noqa: F401

HOOK = "slca_grpo.integrations.verl.register.setup_worker"

__all__ = ["HOOK", "setup_worker"]


def setup_worker() -> None:
    """Ray's worker hook: importing this module, which Ray does to call it, registered everything."""
