"""Pluggable side effects of the scheduler: disable notices, batched failure e-mails, metrics, history."""

from __future__ import annotations

import importlib
import logging
import sys
from typing import Any, Protocol

from luigi.scheduler.settings import SchedulerConfig
from luigi.task_history import NopHistory, TaskHistory
from luigi.task_status import DONE, FAILED, PENDING, RUNNING

logger = logging.getLogger("luigi.scheduler")


class FailureBatcher(Protocol):
    """Collects failures for periodic summary e-mails (``[scheduler] batch_emails = true``)."""

    def add_failure(
        self, task_name: str, family: str, unbatched_params: dict[str, Any], expl: Any, owners: Any
    ) -> None:
        """A task failed (``expl`` is its explanation)."""

    def add_disable(self, task_name: str, family: str, unbatched_params: dict[str, Any], owners: Any) -> None:
        """The scheduler disabled a task for failing too often."""

    def add_scheduling_fail(
        self, task_name: str, family: str, unbatched_params: dict[str, Any], expl: Any, owners: Any
    ) -> None:
        """A worker could not schedule a task."""

    def update(self) -> None:
        """Send what is due."""

    def send_email(self) -> None:
        """Send everything collected now (``luigid`` at exit)."""


def default_batch_notifier() -> FailureBatcher:
    """A new ``luigi.scheduler.BatchNotifier()``, looked up there at each call so tests may replace it."""
    notifier: FailureBatcher = importlib.import_module("luigi.scheduler").BatchNotifier()
    return notifier


def default_notifier(subject: str, message: str, owners: list[str]) -> None:
    """Log the notice and hand it to ``luigi.scheduler.notifications.send_error_email`` (patchable)."""
    logger.warning("%s: %s", subject, message)
    notifications = getattr(sys.modules.get("luigi.scheduler"), "notifications", None)
    if notifications is not None:
        notifications.send_error_email(subject, message, owners)


def default_history(config: SchedulerConfig) -> TaskHistory:
    """The database history when ``record_task_history`` is on (and available), else no history."""
    if not config.record_task_history:
        return NopHistory()
    try:
        from luigi.db_task_history import DbTaskHistory
    except ImportError:
        logger.warning("record_task_history is on but luigi.db_task_history is unavailable; not recording")
        return NopHistory()
    history: TaskHistory = DbTaskHistory()
    return history


def record_history(history: TaskHistory, task: Any, status: str, host: str | None = None) -> None:
    """Tell the history about a PENDING, RUNNING, DONE or FAILED transition; failures are only logged."""
    try:
        if status in (DONE, FAILED):
            history.task_finished(task, status == DONE)
        elif status == PENDING:
            history.task_scheduled(task)
        elif status == RUNNING:
            history.task_started(task, host)
    except Exception:  # history is best effort: a broken store must not stop scheduling
        logger.warning("Error saving Task history", exc_info=True)
