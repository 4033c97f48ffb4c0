"""Running tasks in task slots: forked child processes, several at once, each task within its timeout."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from luigi.scheduler_api import SchedulerAPI
from luigi.task import Task
from luigi.task_status import FAILED
from luigi.worker.messages import Message
from luigi.worker.slots.pool import SlotPool, could_not_start
from luigi.worker.task_process import (
    TaskOutcome,
    TaskRunOptions,
    TaskStatusReporter,
    make_task_process,
    run_options,
)

logger = logging.getLogger("luigi-interface")


class SlotRunner:
    """A ``TaskRunner`` over the worker's ``SlotPool``.

    A slot is forked knowing ``tasks`` (the worker's scheduled tasks, read at each fork); a task's reports
    come back through the pool and are sent to ``scheduler`` from the worker's process. ``opened(task_id)``
    is called once the pool has the task, so it can take scheduler messages. ``worker_processes()`` is how
    many slots may run at once (the scheduler may change it).
    """

    def __init__(
        self,
        scheduler: SchedulerAPI,
        options: TaskRunOptions,
        tasks: Mapping[str, Task],
        opened: Callable[[str], None],
        worker_tag: str | None = None,
        worker_processes: Callable[[], int] = lambda: 1,
    ) -> None:
        self._scheduler = scheduler
        self._options = options
        self._opened = opened
        self.pool = SlotPool(tasks, options.completion_cache, worker_processes, worker_tag)
        self._unstarted: list[TaskOutcome] = []  # FAILED outcomes of tasks no slot could take
        # Runs an operator cancelled, and why: killed by ``collect`` in the worker loop, which owns the pool.
        self._cancelled: dict[str, str] = {}
        self._cancelled_lock = threading.Lock()

    def capacity(self, worker_processes: int) -> int:
        """Tasks running in slots, one a slot, and after short tasks as many again waiting for a slot to
        free (``SlotPool.room``)."""
        return self.pool.room(worker_processes)

    def start(self, task: Task, timeout: float | None, trace_parent: str | None = None) -> None:
        """Hand ``task`` to a slot (forking one if needed) or have it wait for one; a refused fork fails the
        task, not the worker."""
        task_id = task.task_id
        reporter = TaskStatusReporter(self._scheduler, task_id, self._options.worker_id)
        # the worker-side view of the run (the slot builds its own from its options, trace_parent too)
        options = run_options(self._options, trace_parent)
        process = make_task_process(task, reporter, options, timeout, None)
        try:
            self.pool.start(process)
        except OSError as exc:  # e.g. fork() refused for lack of memory: this task fails, the worker goes on
            self._unstarted.append(could_not_start(task, exc))
        else:
            self._opened(task_id)

    def deliver(self, task_id: str, message: Message) -> bool:
        """Write a scheduler message to the slot running the task (held while it waits for one); False if
        the pool does not hold it."""
        delivered = self.pool.deliver(task_id, message)
        if delivered is None:
            return False
        if not delivered:
            logger.warning("Could not pass scheduler message %s to task %s", message["message_id"], task_id)
        return True

    def wait(self, longest: float) -> None:
        """Block until a slot reports or exits, a deadline passes, or ``longest`` seconds."""
        if self._unstarted or self._cancelled or not self.pool:
            return
        logger.debug("%d tasks running in slots, waiting for one to finish", len(self.pool))
        self.pool.wait(longest, time.time())

    def collect(self) -> list[TaskOutcome]:
        """Outcomes of tasks that could not start, then of jobs that ended, died or ran out of time."""
        outcomes, self._unstarted = self._unstarted, []
        outcomes.extend(self.pool.collect(time.time()))
        outcomes.extend(self._kill_cancelled())
        return outcomes

    def cancel_run(self, task_id: str, reason: str) -> bool:
        """Have the run of ``task_id`` killed with its slot and process tree at the loop's next ``collect``
        (within its wait), FAILED with ``reason``; False if no slot runs it."""
        if not self.pool.holds(task_id):
            return False
        with self._cancelled_lock:
            self._cancelled[task_id] = reason
        return True

    def _kill_cancelled(self) -> list[TaskOutcome]:
        """Kill the cancelled runs still going (one that ended first keeps its own outcome)."""
        with self._cancelled_lock:
            cancelled, self._cancelled = self._cancelled, {}
        outcomes = []
        for task_id, reason in cancelled.items():
            if self.pool.kill_job(task_id):
                logger.info("Killed the run of %s: %s", task_id, reason)
                outcomes.append(TaskOutcome(task_id, FAILED, reason))
        return outcomes

    def shut_down(self) -> None:
        """Retire idle slots and kill busy ones with everything their tasks started."""
        self.pool.shut_down()
