"""SLCA-GRPO inside other trainers, each on an unmodified, pinned release: ``trl`` (``SLCATrainer``,
a drop-in for TRL's ``GRPOTrainer``; docs/trl.md) and ``verl`` (a registered advantage estimator,
agent loop and reward; docs/verl.md). Both run the same pure estimator math as our own trainer
(``slca_grpo.algos``); each subpackage's ``__init__`` names its doors.
"""
