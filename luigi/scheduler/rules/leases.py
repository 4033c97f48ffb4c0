"""Leases that mean what they say: a grant made ahead is not a started run.

Grants made ahead (``more_tasks``, or any grant of an ask with ``assume_done``) wait in the worker's queue
until the run before them ends. Such a grant is marked until then; when its worker is lost, a marked grant
was never started and goes back to PENDING instead of FAILED. The marks live in memory only: after a
restart of luigid every RUNNING task counts as started (Luigi's behaviour).

Stale results need no memory: only the worker a RUNNING task is granted to may change its status
(``intake``), so a worker that was cut off and comes back cannot overwrite the new owner's run.
"""

from __future__ import annotations

from luigi.scheduler.model.records import TaskRecord
from luigi.scheduler.model.state import SchedulerState


def mark_granted_ahead(state: SchedulerState, task: TaskRecord, worker_id: str) -> None:
    """``task`` was granted to ``worker_id`` to start after the runs before it end."""
    task.granted_ahead = True
    state.worker(worker_id).ahead.append(task.id)


def run_ended(state: SchedulerState, task: TaskRecord, worker_id: str) -> None:
    """The worker reported how ``task`` ended: the next grant in its queue has started now."""
    task.granted_ahead = False
    worker = state.workers.get(worker_id)
    if worker is None or not worker.ahead:
        return
    if task.id in worker.ahead:
        worker.ahead.remove(task.id)
    while worker.ahead:
        queued = state.tasks.get(worker.ahead.pop(0))
        if queued is not None and queued.granted_ahead and queued.worker_running == worker_id:
            queued.granted_ahead = False
            return
