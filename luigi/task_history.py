"""Task history: where the scheduler reports task transitions, e.g. to a database (see db_task_history).

The scheduler passes its own task records, which have ``id``, ``family``, ``params`` and ``status``.
"""

from __future__ import annotations

import abc
from typing import Any


class TaskHistory(abc.ABC):
    """Receives PENDING, RUNNING and finished (DONE or FAILED) events for every scheduled task."""

    @abc.abstractmethod
    def task_scheduled(self, task: Any) -> None:
        """The task was reported PENDING."""

    @abc.abstractmethod
    def task_started(self, task: Any, worker_host: str | None) -> None:
        """The task was granted to a worker on ``worker_host``."""

    @abc.abstractmethod
    def task_finished(self, task: Any, successful: bool) -> None:
        """The task ended: DONE when ``successful``, else FAILED."""


class NopHistory(TaskHistory):
    """History that records nothing (``[scheduler] record_task_history = false``)."""

    def task_scheduled(self, task: Any) -> None:
        """Ignored."""

    def task_started(self, task: Any, worker_host: str | None) -> None:
        """Ignored."""

    def task_finished(self, task: Any, successful: bool) -> None:
        """Ignored."""
