"""Rollouts: the multi-turn agent loop that turns a policy and tasks into token-exact trajectories.

Its doors: ``loop.AgentLoop`` with ``loop.RolloutConfig`` (generate, parse, call tools, append,
continue, for a whole batch), and ``environment.ToolEnvironment`` (a task's fixtures, then the
simulator). The sampling itself is ``slca_grpo.engine``'s; scoring is ``slca_grpo.rewards``'.
"""
