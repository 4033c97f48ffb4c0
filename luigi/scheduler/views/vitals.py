"""The scheduler's vital figures for a metrics page: tasks per status, live workers, the history backlog,
late schedule runs.

Read only when a collector reports (a ``/metrics`` scrape), each in time independent of the number of
tasks, so serving them costs the scheduler nothing between scrapes.
"""

from __future__ import annotations

from luigi.scheduler.model.state import STATUSES, SchedulerState
from luigi.scheduler.schedules import NoSchedules, ScheduleDesk
from luigi.task_history import HistoryStatus, TaskHistory


class SchedulerVitals:
    """Read-only figures of one scheduler, computed when asked."""

    def __init__(
        self, state: SchedulerState, history: TaskHistory, schedules: ScheduleDesk | None = None
    ) -> None:
        self._state = state
        self._history = history
        self._schedules: ScheduleDesk = schedules if schedules is not None else NoSchedules()

    def tasks_by_status(self) -> dict[str, int]:
        """How many tasks the scheduler holds in each status (every status, zeros included)."""
        by_status = self._state.by_status
        return {status: len(by_status[status]) for status in STATUSES}

    def workers_alive(self) -> int:
        """Workers heard from within ``worker_disconnect_delay`` seconds (the ones that keep their tasks)."""
        cutoff = self._state.clock() - self._state.config.worker_disconnect_delay
        return sum(1 for worker in self._state.workers.values() if worker.last_active >= cutoff)

    def history(self) -> HistoryStatus:
        """How task history recording is going: events waiting to be written, written and lost."""
        return self._history.status()

    def schedules_late(self) -> dict[str, int]:
        """How many runs of each schedule luigid runs were late, ever (every schedule, zeros included)."""
        return self._schedules.schedule_late_totals()
