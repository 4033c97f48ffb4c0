"""Walking the task graph into the scheduler: ``requires()``, ``complete()`` checks, one ``add_task`` each.

The walk is breadth-first from the roots it is given; each task not seen before is checked for completeness
(in threads with ``multiprocess``), judged by the table of COMPAT f.3, and reported with its dependencies,
which are walked in turn. Errors in user code make a task unschedulable and are reported; a task that
breaks the worker's contract raises ``TaskException``.

Every ``add_task`` of the worker, the walk's and the run loop's, goes through the ``TaskLedger`` here, so
the record ``luigi.execution_summary`` reads is complete.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from luigi import notifications
from luigi.event import Event
from luigi.rpc.errors import NoSchedulerError
from luigi.scheduler_api import SchedulerAPI
from luigi.task import Task
from luigi.task_status import DISABLED, DONE, PENDING, UNKNOWN
from luigi.worker.completion import CompletionChecker, CompletionCheckError
from luigi.worker.config import worker
from luigi.worker.task_process import TaskException, is_external

logger = logging.getLogger("luigi-interface")


def retry_policy_dict(task: Task) -> dict[str, Any]:
    """The task's retry settings, as ``add_task`` takes them (backoff ones only when the task sets them:
    a Luigi server knows only the first three)."""
    policy = {
        "retry_count": task.retry_count,
        "disable_hard_timeout": task.disable_hard_timeout,
        "disable_window": task.disable_window,
    }
    for name in ("retry_backoff", "retry_delay", "retry_max_delay", "retry_jitter"):
        value = getattr(task, name)
        if value is not None:
            policy[name] = value
    return policy


class TaskLedger:
    """The worker's tasks by id, and ``(task, status, runnable)`` for each report it sent about them.

    ``batches`` maps the id of a combined batch task to the tasks it stands for: the report of the batch
    is recorded for each of them.
    """

    def __init__(
        self, scheduler: SchedulerAPI, after_delivery: Callable[[Callable[[], None]], None] | None = None
    ) -> None:
        self._scheduler = scheduler
        # Our RPC client holds reports for its next request: "Informed scheduler" waits for the answer.
        self._after_delivery = after_delivery if after_delivery is not None else _call_now
        self.tasks: dict[str, Task] = {}
        self.history: list[tuple[Task, str, bool | None]] = []
        self.batches: dict[str, list[Task]] = {}

    def send_add_task(self, **fields: Any) -> None:
        """``add_task(**fields)`` to the scheduler (its client rides out an outage), recorded in ``history``.

        ``runnable`` is recorded as given (Luigi's default, True, when left out): after a run it is None.
        The "Informed scheduler" line is logged once the scheduler has the report.
        """
        task_id, status = fields["task_id"], fields["status"]
        task = self.tasks.get(task_id)
        members = self.batches.pop(task_id, None)
        if members is not None:
            self.history.extend((member, status, True) for member in members)
        elif task is not None:
            self.history.append((task, status, fields.get("runnable", True)))
        if task is not None:
            fields["owners"] = task._owner_list()
            if fields.get("params") is not None:
                fields["param_visibilities"] = task._get_param_visibilities()
        self._scheduler.add_task(**fields)
        self._after_delivery(lambda: logger.info(INFORMED, task_id, status))


INFORMED = "Informed scheduler that task   %s   has status   %s"


def _call_now(callback: Callable[[], None]) -> None:
    callback()


class FailureEmails:
    """Failure e-mails through ``luigi.notifications`` (looked up per call so tests can patch it)."""

    def __init__(self, enabled: bool, host: str) -> None:
        self.enabled = enabled
        self.host = host

    def send(self, subject: str, headline: str, task: Task, formatted_exception: str | None) -> None:
        """Mail the task's owners, naming the command that ran (not with ``send_failure_email`` off)."""
        if self.enabled:
            self.send_always(subject, headline, task, formatted_exception)

    def send_always(self, subject: str, headline: str, task: Task, formatted_exception: str | None) -> None:
        """Mail the task's owners even with ``send_failure_email`` off (Luigi: for framework errors)."""
        command = subprocess.list2cmdline(sys.argv)
        message = notifications.format_task_error(headline, task, command, formatted_exception)
        notifications.send_error_email(subject, message, task._owner_list())

    def send_framework_error(self, task: Task, formatted_exception: str) -> None:
        """The mail about an unexpected error of ours (or the scheduler's) while scheduling ``task``."""
        self.send_always(
            f"Luigi: Framework error while scheduling {task}. Host: {self.host}",
            "Luigi framework error",
            task,
            formatted_exception,
        )


class GraphWalk:
    """Reports tasks and everything they need to the scheduler, through the worker's ``TaskLedger``.

    ``succeeded`` turns False when some task could not be scheduled since the last ``add``. Each report
    goes through ``add_task`` (the worker's ``_add_task``, looked up per call).
    """

    def __init__(
        self,
        scheduler: SchedulerAPI,
        add_task: Callable[..., None],
        ledger: TaskLedger,
        emails: FailureEmails,
        config: worker,
        completion_cache: dict[str, bool] | None,
        worker_id: str,
        assistant: bool,
    ) -> None:
        self._scheduler = scheduler
        self._add_task = add_task
        self._ledger = ledger
        self._emails = emails
        self._config = config
        self._completion_cache = completion_cache
        self._worker_id = worker_id
        self._assistant = assistant
        self._batch_families_sent: set[str] = set()
        self._reported: set[str] = set()  # task ids add() has reported since the last forget_reported()
        self.succeeded = True

    def add(self, task: Task, parallel: bool, processes: int) -> bool:
        """Walk from ``task``, skipping what earlier calls reported; False if some scheduling failed."""
        self.succeeded = True
        validate_task(task)
        try:
            self.walk([task], self._reported, parallel=parallel, processes=processes)
            self._scheduler.flush()  # our client holds reports: a scheduler that is down fails add() (Luigi)
        except (KeyboardInterrupt, TaskException):
            raise
        except Exception as exc:  # a bug or a broken scheduler: say which task it hit, then re-raise
            self.succeeded = False
            formatted = traceback.format_exc()
            # A scheduler never there is no bug: its one-line message, printed once by the caller, says it
            # all (Luigi's line stays, without the traceback).
            trace = not isinstance(exc, NoSchedulerError)
            logger.error("Luigi unexpected framework error while scheduling %s", task, exc_info=trace)
            task.trigger_event(Event.BROKEN_TASK, task, exc)
            self._emails.send_framework_error(task, formatted)
            raise
        return self.succeeded

    def forget_reported(self) -> None:
        """A run ended: the next ``add`` reports every task it reaches again."""
        self._reported.clear()

    def walk(self, roots: Iterable[Task], seen: set[str], parallel: bool = False, processes: int = 0) -> None:
        """Breadth-first over ``requires()``, reporting each task not in ``seen`` once (adding it there)."""
        checker = CompletionChecker(self._completion_cache, parallel=parallel, processes=processes)
        try:
            for root in roots:
                if root.task_id not in seen:
                    seen.add(root.task_id)
                    checker.submit(root)
            while checker.outstanding:
                task, answer = checker.next_result()
                for dep in self._schedule_one(task, answer):
                    if dep.task_id not in seen:
                        seen.add(dep.task_id)
                        checker.submit(dep)
        finally:
            checker.close()

    def _schedule_one(self, task: Task, answer: bool | CompletionCheckError) -> list[Task]:
        """Report one task's status and dependencies to the scheduler; returns the dependencies to walk."""
        status, runnable, deps = self._judge(task, answer)
        if task.disabled:
            status = DISABLED
        for dep in deps or ():
            task.trigger_event(Event.DEPENDENCY_DISCOVERED, task, dep)
        self._ledger.tasks[task.task_id] = task
        self._add_task(
            worker=self._worker_id,
            task_id=task.task_id,
            status=status,
            runnable=runnable,
            deps=[dep.task_id for dep in deps] if deps is not None else None,
            priority=task.priority,
            resources=task.process_resources(),
            params=task.to_str_params(),
            family=task.task_family,
            module=task.task_module,
            batchable=task.batchable,
            retry_policy_dict=retry_policy_dict(task),
            accepts_messages=task.accepts_messages,
            assistant=self._assistant,
        )
        return deps or []

    def _judge(self, task: Task, answer: bool | CompletionCheckError) -> tuple[str, bool, list[Task] | None]:
        """(status, runnable, dependencies) by the table of COMPAT f.3, firing the matching events."""
        limit = self._config.task_limit
        if limit is not None and len(self._ledger.tasks) >= limit:
            logger.warning(
                "Will not run %s or any dependencies due to exceeded task-limit of %d", task, limit
            )
            return UNKNOWN, False, None
        if isinstance(answer, CompletionCheckError):
            self._report_scheduling_error(task, "complete()", answer.trace)
            task.trigger_event(Event.DEPENDENCY_MISSING, task)
            return UNKNOWN, False, None
        if answer:
            task.trigger_event(Event.DEPENDENCY_PRESENT, task)
            return DONE, False, None
        if is_external(task):
            task.trigger_event(Event.DEPENDENCY_MISSING, task)
            logger.warning(
                "Data for %s does not exist (yet?). The task is an external data dependency, so it cannot be "
                "run from this luigi process.",
                task,
            )
            return PENDING, self._config.retry_external_tasks, None
        deps = self._dependencies_of(task)
        return (PENDING, True, deps) if deps is not None else (UNKNOWN, False, None)

    def _dependencies_of(self, task: Task) -> list[Task] | None:
        """``task.deps()``, or None after reporting why it failed; a non-task dependency is an error."""
        try:
            deps = task.deps()
        except Exception as exc:  # user code: the task cannot be scheduled, and the user is told why
            self._report_scheduling_error(task, "deps()", traceback.format_exc())
            task.trigger_event(Event.BROKEN_TASK, task, exc)
            return None
        for dep in deps:
            if not isinstance(dep, Task):
                raise TaskException(
                    f"requires() of {task} must return Task objects, but it returned {dep!r} "
                    f"({type(dep).__name__})"
                )
            validate_task(dep)
        if task.batchable and task.task_family not in self._batch_families_sent:
            self._scheduler.add_task_batcher(
                worker=self._worker_id,
                task_family=task.task_family,
                batched_args=task.batch_param_names(),
                max_batch_size=task.max_batch_size,
            )
            self._batch_families_sent.add(task.task_family)
        return deps

    def _report_scheduling_error(self, task: Task, method: str, formatted: str) -> None:
        """Log, tell the scheduler (for its batched e-mails), then mail why ``task`` cannot be scheduled."""
        self.succeeded = False
        headline = f"Will not run {task} or any dependencies due to error in {method} method"
        logger.warning("%s:\n%s", headline, formatted)
        try:
            self._scheduler.announce_scheduling_failure(
                worker=self._worker_id,
                task_name=str(task),
                family=task.task_family,
                params=task.to_str_params(only_significant=True),
                expl=formatted,
                owners=task._owner_list(),
            )
        except Exception:  # the scheduler failed us: mail about it here, then add() reports it and re-raises
            self._emails.send_framework_error(task, traceback.format_exc())
            raise
        self._emails.send(
            f"Luigi: {task} failed scheduling. Host: {self._emails.host}", headline, task, formatted
        )


def validate_task(task: Any) -> None:
    """Raise ``TaskException`` for what ``add()`` cannot schedule: a non-task, or a task not initialised."""
    if not isinstance(task, Task):
        raise TaskException(f"Can not schedule non-task {task}")
    if not task.initialized():
        raise TaskException(
            f"Task of class {type(task).__name__} not initialized. "
            "Did you override __init__ and forget to call super(...).__init__?"
        )
