"""Training: a whole run from one config (SFT, then RL with evaluations and checkpoints).

Its doors: ``run.train`` (what ``slca train`` and ``slca demo`` call) with ``run_config.RunConfig``
and ``run_config.run_settings`` (the run's one plain description); ``rl.RLTrainer`` (one RL step,
read top to bottom); ``sft.train_sft``; ``bench`` (``slca bench``). Beside them, what a run is built
from (``build``), its tasks (``run_data``), its folder (``run_folder``), its SFT checkpoint
(``sft_cache``), batches, optimizer, logger, memory estimate and the step's floor. The reader's
pretraining is not here: it is a recipe outside the package (``recipes/reader``).
"""
