"""The scheduler's RPC methods beyond Luigi's surface: what it offers, cancelling a run, the run logs it
keeps, the schedules and backfills ``luigid`` runs. A mixin of ``Scheduler`` (``core``); Luigi clients
never call these.
"""

from __future__ import annotations

from typing import Any

from luigi.scheduler.backfills import BackfillDesk, range_progress
from luigi.scheduler.model.clock import Clock
from luigi.scheduler.model.state import ACTIVE_RUN_STATUSES, SchedulerState
from luigi.scheduler.schedules import ScheduleDesk
from luigi.scheduler.store.task_logs import Running, TaskLogStore
from luigi.task_status import RUNNING

# What a cancelled run's failure says (the worker that kills the run reports it as the explanation).
CANCELLED_EXPLANATION = "Cancelled from the visualiser"
# The worker message that asks the worker running a task to kill that run (``Worker.cancel_task``).
CANCEL_MESSAGE = "cancel_task"


class ExtensionMethods:
    """``scheduler_features``, ``cancel_task``, the task-log calls and the ``schedule_*`` calls."""

    _clock: Clock
    _state: SchedulerState
    _task_logs: TaskLogStore | None
    _schedules: ScheduleDesk
    _backfills: BackfillDesk

    # -- cancelling a run (ours: the visualiser's Cancel button) --------------------------------------------

    def cancel_task(self, task_id: str) -> dict[str, Any]:
        """Ask the worker running ``task_id`` to kill its run, which then FAILS with
        ``CANCELLED_EXPLANATION`` and is not retried until forgiven (``forgive_failures``).

        The request is durable and reaches the worker with its next ``ping``. ``cancel_requested`` in the
        answer says whether it was recorded; if not, ``problem`` says why (an unknown task, or one that is
        not RUNNING) and nothing changed.
        """
        task = self._state.tasks.get(task_id)
        if task is None:
            problem = f"no task {task_id!r} is known to the scheduler: check the task id"
            return {"task_id": task_id, "status": None, "cancel_requested": False, "problem": problem}
        if task.status != RUNNING or task.worker_running is None:
            problem = f"task {task_id!r} is {task.status}, not RUNNING: only a running task can be cancelled"
            return {"task_id": task_id, "status": task.status, "cancel_requested": False, "problem": problem}
        self._state.request_cancel(task, self._clock())
        self._state.queue_worker_message(
            task.worker_running, CANCEL_MESSAGE, task_id=task_id, reason=CANCELLED_EXPLANATION
        )
        return {"task_id": task_id, "status": task.status, "cancel_requested": True}

    # -- task run logs (ours: workers of this project ship them, a Luigi worker sends none) --------------

    def scheduler_features(self) -> dict[str, Any]:
        """What this scheduler offers beyond Luigi's RPC surface: ``task_logs`` (it keeps run logs) and
        ``leases`` (a ``ping`` may say which tasks it holds, and is told which were handed over)."""
        return {"task_logs": self._task_logs is not None, "leases": True}

    def append_task_log(
        self, task_id: str, worker: str, run: str, offset: int, chunk: str, ended: bool = False
    ) -> None:
        """Keep a chunk of a task run's output (dropped when this scheduler keeps no logs)."""
        if self._task_logs is not None:
            self._task_logs.append(task_id, worker, run, offset, chunk, ended, self._clock())

    def task_log(self, task_id: str, attempt: int | None = None, offset: int = 0) -> dict[str, Any]:
        """A chunk of a run's log from ``offset`` (the last attempt by default), ``nextOffset``, ``ended``,
        and every attempt's summary; ``kept`` is False when this scheduler keeps no logs."""
        if self._task_logs is None:
            return {"taskId": task_id, "kept": False, "attempts": [], "attempt": None, "chunk": "",
                    "nextOffset": 0, "ended": False, "cutShort": False}  # fmt: skip
        return {**self._task_logs.read(task_id, attempt, offset, self._running(task_id)), "kept": True}

    def _running(self, task_id: str) -> Running:
        """Who runs ``task_id`` now, and since when, or None."""
        task = self._state.tasks.get(task_id)
        if task is None or task.status not in ACTIVE_RUN_STATUSES or task.worker_running is None:
            return None
        return task.worker_running, task.time_running or 0.0

    # -- schedules luigid runs (ours, not Luigi's: luigi.schedules) ---------------------------------------

    def schedule_list(self) -> list[dict[str, Any]]:
        """Each schedule with its next due time, paused flag and last runs (none in-process)."""
        return self._schedules.schedule_list()

    def schedule_log(self, name: str, run: int) -> dict[str, Any]:
        """The output of one run of a schedule."""
        return self._schedules.schedule_log(name, run)

    def schedule_pause(self, name: str) -> dict[str, Any]:
        """Let a schedule's slots pass unrun until it is resumed."""
        return self._schedules.schedule_pause(name)

    def schedule_resume(self, name: str) -> dict[str, Any]:
        """Run a paused schedule's slots again, from its next one."""
        return self._schedules.schedule_resume(name)

    def schedule_trigger(self, name: str) -> dict[str, Any]:
        """Start a run of a schedule now."""
        return self._schedules.schedule_trigger(name)

    # -- backfills luigid runs (ours: luigi.schedules.backfill_service) ---------------------------------

    def backfill_start(
        self,
        module: str,
        family: str,
        start: str,
        stop: str,
        kind: str = "daily",
        params: dict[str, Any] | None = None,
        concurrency: int = 1,
    ) -> dict[str, Any]:
        """Start ``family`` of ``module`` over ``[start, stop)`` as a ``RangeDaily``/``RangeHourly`` run."""
        arguments = {"module": module, "family": family, "start": start, "stop": stop, "kind": kind}
        return self._backfills.backfill_start({**arguments, "params": params, "concurrency": concurrency})

    def backfill_list(self) -> list[dict[str, Any]]:
        """Every backfill, newest first, with how many of its days (hours) this scheduler sees done."""
        return self._backfills.backfill_list(lambda entries: range_progress(self._state.tasks, entries))

    def backfill_cancel(self, id: int) -> dict[str, Any]:  # noqa: A002  # the RPC argument's name
        """Stop a running backfill's child and mark it cancelled."""
        return self._backfills.backfill_cancel(id)

    def backfill_log(self, id: int) -> dict[str, Any]:  # noqa: A002  # the RPC argument's name
        """The output of a backfill's latest child."""
        return self._backfills.backfill_log(id)
