"""A synthetic tool-calling suite: 38 tools in 9 domains, five task kinds, fixtures and gold answers.

>>> from slca_grpo.data.synthetic import generate_suite, gold_messages
>>> suite = generate_suite(seed=0, n_train=1000, n_test=200)
>>> suite.train[0].metadata["kind"] in KINDS
True

See ``docs/data.md`` for the catalogue, task kinds, splits and fixtures.
"""

from slca_grpo.data.synthetic.catalogue import (
    DEFAULT_HELDOUT_TOOLS,
    SIBLINGS,
    all_tools,
    domains,
    fabricate_response,
    get_spec,
    tools_by_domain,
)
from slca_grpo.data.synthetic.generator import (
    DEFAULT_KIND_WEIGHTS,
    KINDS,
    SPLITS,
    SuiteConfig,
    SyntheticSuite,
    generate_suite,
    generate_tasks,
)
from slca_grpo.data.synthetic.gold import gold_messages, render_gold, task_to_json, write_jsonl
from slca_grpo.data.synthetic.leaks import value_leaks, value_pools
from slca_grpo.data.synthetic.values import ValuePool, value_split

__all__ = [
    "DEFAULT_HELDOUT_TOOLS",
    "DEFAULT_KIND_WEIGHTS",
    "KINDS",
    "SIBLINGS",
    "SPLITS",
    "SuiteConfig",
    "SyntheticSuite",
    "ValuePool",
    "all_tools",
    "domains",
    "fabricate_response",
    "generate_suite",
    "generate_tasks",
    "get_spec",
    "gold_messages",
    "render_gold",
    "task_to_json",
    "tools_by_domain",
    "value_leaks",
    "value_pools",
    "value_split",
    "write_jsonl",
]
