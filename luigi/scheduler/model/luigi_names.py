"""Luigi's names for the scheduler's internals, as thin views over the model (LUIGI_COMPAT j.2).

Users' tests reach into Luigi's scheduler: ``sch._state.get_task(id).status``, ``task.time_running = 0``,
``sch._state._metrics_collector``. ``LuigiStateNames`` gives ``SchedulerState`` those methods, and
``TaskView`` is Luigi's scheduler ``Task`` over one ``TaskRecord``: it reads the record, and the few writes
tests make go through the state's write path, so the indexes and ``mark_changed`` stay exact. A view holds
nothing of its own, so one is made at each use (a record keeps none: a million tasks pay nothing) and
views of one record are equal; the metrics collector is told about a view too, so a test comparing
``get_task(id)`` with a collector's argument (``assert_called_once_with``) sees an equal object.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

from luigi.metrics import MetricsCollector
from luigi.scheduler.model.records import TaskRecord, WorkerRecord
from luigi.task_status import PENDING, RUNNING

if TYPE_CHECKING:
    from luigi.scheduler.model.state import SchedulerState

# The attributes of a task a test may assign; any other assignment is refused with the way to do it.
WRITABLE_TASK_ATTRIBUTES = frozenset({"time_running", "updated"})


class FailuresView:
    """Luigi's ``task.failures``: the failures counted toward disabling the task."""

    __slots__ = ("_record", "_state")

    def __init__(self, record: TaskRecord, state: SchedulerState) -> None:
        self._record = record
        self._state = state

    def num_failures(self) -> int:
        """Failures within the task's ``disable_window`` (as the disable rule counts them)."""
        return self._record.failures_in_window(self._state.clock())

    def add_failure(self) -> None:
        """Record one failure now."""
        self._state.record_failure(self._record, self._state.clock())

    def clear(self) -> None:
        """Forget every failure."""
        self._state.clear_failures(self._record)

    @property
    def first_failure_time(self) -> float | None:
        """When the first failure still remembered happened (None without one)."""
        return self._record.first_failure_time


class TaskView:
    """Luigi's scheduler ``Task`` over one record. The names Luigi and the record share (``id``, ``status``,
    ``priority``, ``family``, ``params``, ``deps``, ``resources``, ``stakeholders``, ``workers`` in the order
    added, ``worker_running``, ``retry_policy``, ...) read through to the record; the rest are below."""

    __slots__ = ("_record", "_state")
    _record: TaskRecord
    _state: SchedulerState

    def __init__(self, record: TaskRecord, state: SchedulerState) -> None:
        object.__setattr__(self, "_record", record)
        object.__setattr__(self, "_state", state)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names not defined here: the record's public fields.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._record, name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TaskView) and other._record is self._record

    def __hash__(self) -> int:
        return hash(self._record.id)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in WRITABLE_TASK_ATTRIBUTES:
            raise AttributeError(
                f"Cannot set {name!r} on scheduler task {self._record.id!r}: only "
                f"{', '.join(sorted(WRITABLE_TASK_ATTRIBUTES))} may be assigned; change the rest through "
                "the Scheduler's methods (add_task, re_enable_task, ...)"
            )
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return f"Task({self._record.id!r}, status={self._record.status})"

    @property
    def record(self) -> TaskRecord:
        """The record this view shows."""
        return self._record

    @property
    def time(self) -> float:
        """When the scheduler first heard of the task."""
        return self._record.created

    @property
    def failures(self) -> FailuresView:
        """Luigi's ``Failures``: ``num_failures()``, ``add_failure()``, ``clear()``."""
        return FailuresView(self._record, self._state)

    @property
    def time_running(self) -> float | None:
        """When its latest run started (None before any)."""
        return self._record.time_running

    @time_running.setter
    def time_running(self, value: float | None) -> None:
        self._state.set_fields(self._record, time_running=value)

    @property
    def updated(self) -> float:
        """When its status last changed (or it was created)."""
        return self._record.updated

    @updated.setter
    def updated(self, value: float) -> None:
        self._state.set_fields(self._record, updated=value)


class LuigiStateNames:
    """Luigi's ``SimpleTaskState`` methods that users' tests call, mixed into ``SchedulerState``."""

    __slots__ = ()

    if TYPE_CHECKING:  # what the mixin uses of SchedulerState
        tasks: dict[str, TaskRecord]
        workers: dict[str, WorkerRecord]
        by_status: dict[str, dict[str, TaskRecord]]
        metrics: MetricsCollector

        def use_collector(self, collector: MetricsCollector) -> None: ...
        def adopt_task(self, task: TaskRecord) -> None: ...
        def tasks_with_status(self, *statuses: str) -> Iterator[TaskRecord]: ...
        def worker(self, worker_id: str) -> WorkerRecord: ...

    @property
    def _metrics_collector(self) -> MetricsCollector:
        """The collector told of task transitions (Luigi's name; its ``MetricsHandler`` reads it)."""
        return self.metrics

    @_metrics_collector.setter
    def _metrics_collector(self, collector: MetricsCollector) -> None:
        self.use_collector(collector)

    def task_view(self, task: TaskRecord) -> TaskView:
        """Luigi's face of ``task`` (a new view, equal to every other view of it)."""
        return TaskView(task, cast("SchedulerState", self))

    def get_task(
        self,
        task_id: str,
        default: Any = None,
        setdefault: TaskRecord | None = None,
    ) -> Any:
        """The task ``task_id``; if unknown, ``setdefault`` (a new record) is added and returned, or else
        ``default``."""
        task = self.tasks.get(task_id)
        if task is None:
            if setdefault is None:
                return default
            if not isinstance(setdefault, TaskRecord) or setdefault.id != task_id:
                raise ValueError(
                    f"get_task({task_id!r}, setdefault=...) needs a TaskRecord whose id is {task_id!r}, "
                    f"got {setdefault!r:.80}"
                )
            self.adopt_task(setdefault)
            task = setdefault
        return self.task_view(task)

    def get_active_tasks(self) -> Iterator[TaskView]:
        """Every task the scheduler knows (a snapshot)."""
        return (self.task_view(task) for task in list(self.tasks.values()))

    def get_active_tasks_by_status(self, *statuses: str) -> Iterator[TaskView]:
        """The tasks in any of ``statuses`` (a snapshot)."""
        return (self.task_view(task) for task in self.tasks_with_status(*statuses))

    def num_pending_tasks(self) -> int:
        """How many tasks are PENDING or RUNNING."""
        return len(self.by_status[PENDING]) + len(self.by_status[RUNNING])

    def get_worker(self, worker_id: str) -> WorkerRecord:
        """The worker's record, created when unknown."""
        return self.worker(worker_id)

    def get_active_workers(
        self, last_active_lt: float | None = None, last_get_work_gt: float | None = None
    ) -> Iterator[WorkerRecord]:
        """The workers not yet dropped for silence; optionally only those last active before
        ``last_active_lt`` or that last asked for work after ``last_get_work_gt``."""
        for worker in list(self.workers.values()):
            if last_active_lt is not None and worker.last_active >= last_active_lt:
                continue
            if last_get_work_gt is not None and (
                worker.last_get_work is None or worker.last_get_work <= last_get_work_gt
            ):
                continue
            yield worker
