"""What this worker has told the scheduler: the tasks it scheduled, and every ``add_task`` it sent.

Both halves of the worker report through here (``Worker.add`` walking the graph, ``Worker.run`` reporting
outcomes), so the record that ``luigi.execution_summary`` reads is complete.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from luigi import notifications
from luigi.task import Task
from luigi.worker.reconnect import SchedulerRetrier

logger = logging.getLogger("luigi-interface")


def retry_policy_dict(task: Task) -> dict[str, Any]:
    """The task's retry settings, as ``add_task`` takes them."""
    return {
        "retry_count": task.retry_count,
        "disable_hard_timeout": task.disable_hard_timeout,
        "disable_window": task.disable_window,
    }


class TaskLedger:
    """The worker's tasks by id, and ``(task, status, runnable)`` for each report it sent about them.

    ``batches`` maps the id of a combined batch task to the tasks it stands for: the report of the batch
    is recorded for each of them.
    """

    def __init__(self, scheduler: Any, retrier: SchedulerRetrier, worker_id: str) -> None:
        self._scheduler = scheduler
        self._retrier = retrier
        self._worker_id = worker_id
        self.tasks: dict[str, Task] = {}
        self.history: list[tuple[Task, str, bool]] = []
        self.batches: dict[str, list[Task]] = {}

    def send_add_task(self, task_id: str, status: str, runnable: bool, **fields: Any) -> None:
        """``add_task`` to the scheduler (retried while it is unreachable), recorded in ``history``."""
        task = self.tasks.get(task_id)
        members = self.batches.pop(task_id, None)
        if members is not None:
            self.history.extend((member, status, True) for member in members)
        elif task is not None:
            self.history.append((task, status, runnable))
        if task is not None:
            fields["owners"] = task._owner_list()
            if fields.get("params") is not None:
                fields["param_visibilities"] = task._get_param_visibilities()
        self._retrier.call(
            "add_task",
            self._scheduler.add_task,
            worker=self._worker_id,
            task_id=task_id,
            status=status,
            runnable=runnable,
            **fields,
        )
        logger.info("Informed scheduler that task   %s   has status   %s", task_id, status)


class FailureEmails:
    """Failure e-mails through ``luigi.notifications`` (looked up per call so tests can patch it)."""

    def __init__(self, enabled: bool, host: str) -> None:
        self.enabled = enabled
        self.host = host

    def send(self, subject: str, headline: str, task: Task, formatted_exception: str | None) -> None:
        """Mail the task's owners about it, naming the command that ran."""
        if not self.enabled:
            return
        command = " ".join(sys.argv)
        message = notifications.format_task_error(headline, task, command, formatted_exception)
        notifications.send_error_email(subject, message, task._owner_list())
