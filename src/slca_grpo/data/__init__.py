"""Tasks: loading any supported dataset, validating rows, the synthetic suite, benchmark data.

Its doors are the names below (``load_tasks``, ``write_tasks``, ``task_from_dict``, ``TaskFormatError``
naming a bad row's file and line); beside them ``loader.read_tasks`` (streamed), ``synthetic``
(``generate_suite``), ``bfcl`` and ``tau2`` (the benchmarks' data, from their packages), ``formats``,
``split``, ``stats`` and ``sft`` (``slca data``). The reader's pretraining corpus is not here: it is a
recipe outside the package (``recipes/reader``).
"""

from slca_grpo.data.loader import load_tasks
from slca_grpo.data.tasks import LoadReport, TaskFormatError, task_from_dict, write_tasks

__all__ = ["LoadReport", "TaskFormatError", "load_tasks", "task_from_dict", "write_tasks"]
