"""Running a task in the worker's own process, one at a time, asking ahead for the next while it runs.

The cheapest way to run a task: no process boundary, so its reports go straight to the scheduler client and
its scheduler messages into a queue the task reads. Between two tasks a serial worker would idle through a
round trip to the scheduler; the ``AheadAsker`` (``luigi.worker.lookahead``) overlaps that round trip with
short tasks. Only this runner asks ahead: a task granted ahead may still run in a slot, so it is told of
those starts and of every outcome too.
"""

from __future__ import annotations

import logging
import queue
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from luigi.scheduler_api import SchedulerAPI
from luigi.task import Task
from luigi.task_status import DONE
from luigi.worker.lookahead import AheadAsker
from luigi.worker.messages import Message
from luigi.worker.task_process import (
    SchedulerMessage,
    TaskOutcome,
    TaskProcess,
    TaskRunOptions,
    TaskStatusReporter,
)

logger = logging.getLogger("luigi-interface")


class InProcessRunner:
    """A ``TaskRunner`` that runs each task to the end inside ``start``.

    ``opened(task_id)`` is called once the task can take scheduler messages, just before it runs;
    ``get_work_kwargs()`` are the worker's ``get_work`` arguments for an ask ahead, and ``taking_work()``
    whether it still takes new work (a worker phasing out asks for nothing more). Without ``ahead`` (the
    scheduler cannot be asked ahead, or ``[worker] lookahead`` is off) every task is asked for in turn.
    """

    def __init__(
        self,
        scheduler: SchedulerAPI,
        options: TaskRunOptions,
        ahead: AheadAsker | None,
        get_work_kwargs: Callable[[], dict[str, Any]],
        taking_work: Callable[[], bool],
        opened: Callable[[str], None],
    ) -> None:
        self._scheduler = scheduler
        self._options = options
        self._ahead = ahead
        self._get_work_kwargs = get_work_kwargs
        self._taking_work = taking_work
        self._opened = opened
        self._outcomes: deque[TaskOutcome] = deque()
        self._inboxes: dict[str, queue.Queue[SchedulerMessage]] = {}  # of tasks that take messages

    def start(self, task: Task, timeout: float | None) -> None:
        """Ask ahead if worth it, then run ``task`` here and keep its outcome for ``collect``."""
        task_id = task.task_id
        inbox: queue.Queue[SchedulerMessage] | None = None
        if task.accepts_messages:
            inbox = self._inboxes[task_id] = queue.Queue()
        reporter = TaskStatusReporter(self._scheduler, task_id, self._options.worker_id, inbox)
        process = TaskProcess(task, reporter, self._options, timeout=timeout)
        ahead = self._ahead
        if ahead is None:
            self._opened(task_id)
            self._outcomes.append(process.run())
            return
        # (a worker phasing out runs what it was granted, and asks for nothing more)
        ahead.before_start(task_id, self._taking_work(), self._get_work_kwargs)
        self._opened(task_id)
        started = time.monotonic()
        self._outcomes.append(process.run())
        ahead.ran(time.monotonic() - started)

    def starts_elsewhere(self, task_id: str) -> None:
        """Another runner starts ``task_id``: no ask ahead goes before it, so held reports go now."""
        if self._ahead is not None:
            self._ahead.before_start(task_id, False, self._get_work_kwargs)

    def deliver(self, task_id: str, message: Message) -> bool:
        """Queue a scheduler message for the task, which reads it while it runs; False if not run here."""
        inbox = self._inboxes.get(task_id)
        if inbox is None:
            return False
        inbox.put(SchedulerMessage(self._scheduler, **message))
        return True

    def wait(self, longest: float) -> None:
        """Nothing to wait for: a task started here has ended by the time ``start`` returns."""

    def has_outcomes(self) -> bool:
        """Whether a run here ended and its outcome has not been collected."""
        return bool(self._outcomes)

    def collect(self) -> list[TaskOutcome]:
        """The outcomes of the tasks run here since the last call."""
        if not self._outcomes:
            return []
        outcomes = list(self._outcomes)
        self._outcomes.clear()
        for outcome in outcomes:
            self._inboxes.pop(outcome.task_id, None)
        return outcomes

    def saw_outcome(self, outcome: TaskOutcome) -> None:
        """A run ended, here or elsewhere: grants assuming its task are run only if it finished DONE."""
        if self._ahead is not None:
            self._ahead.finished(outcome.task_id, outcome.status == DONE)

    def take_granted_ahead(self) -> dict[str, Any] | None:
        """The next grant an ask ahead brought, if any."""
        return self._ahead.take() if self._ahead is not None else None

    def granted_ahead(self) -> list[str]:
        """Tasks granted ahead that have not started yet."""
        return self._ahead.queued() if self._ahead is not None else []

    def shut_down(self) -> None:
        """Nothing runs here between calls; undelivered messages are dropped with their tasks."""
        self._inboxes.clear()
