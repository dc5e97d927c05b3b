"""SLCA-GRPO on an unmodified, pinned verl (``pip install 'slca-grpo[verl]'``; docs/verl.md).

- ``rows``: our tasks as verl parquet rows (no verl import);
- ``reward.compute_score``: HierR as verl's custom reward function (no verl import);
- ``advantages``: segments and our estimators over a verl batch (no verl import);
- ``trainer``: verl v1 trainers (``slca_sync``, ...) whose advantage step runs our estimators;
- ``agent_loop``: verl's tool agent loop with each task's tools answered by our simulator;
- ``register.setup_worker``: the Ray worker hook that registers the trainers and the parser.

Importing this package imports no verl module; ``trainer`` and ``agent_loop`` do.
"""
