"""Tasks: loading, validation and the synthetic suite."""

from slca_grpo.data.loader import load_tasks
from slca_grpo.data.tasks import LoadReport, TaskFormatError, task_from_dict, write_tasks

__all__ = ["LoadReport", "TaskFormatError", "load_tasks", "task_from_dict", "write_tasks"]
