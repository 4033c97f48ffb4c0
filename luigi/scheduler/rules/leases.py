"""Leases that mean what they say: a grant made ahead is not a started run, and a lost run can come back.

Grants made ahead (``more_tasks``, or any grant of an ask with ``assume_done``) wait in the worker's queue
until the run before them ends. Such a grant is marked until then (``SchedulerState.mark_granted_ahead``,
cleared by ``start_next_ahead`` when the run before it ends); when its worker is lost, a marked grant
was never started and goes back to PENDING instead of FAILED. The marks are kept in the state (the task's
``granted_ahead``; each worker's queue is rebuilt from them), so a restart of luigid or a standby's
takeover keeps them.

When prune fails a lost worker's run (or puts its grant back), the task remembers who lost it
(``TaskRecord.lost_lease``, persisted) until anyone starts the task or reports another status for it. A
worker of ours sends the tasks it holds with each ``ping`` (``held``); ``check_held`` answers which of them
are no longer its own (``handed_over``): the worker then stops those runs and reports nothing of them.
A held task that was lost by this very worker, and that nobody has started since, is given back to it
(the lease is renewed): RUNNING under it again, without the failure the loss added.

Stale results need no memory: only the worker a RUNNING task is granted to may change its status
(``intake``), so a worker that was cut off and comes back cannot overwrite the new owner's run.

Like every rule, this one decides and the state writes (``set_lost_lease``, ``forget_failure``, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from luigi.scheduler.model.records import TaskRecord
from luigi.scheduler.model.state import ACTIVE_RUN_STATUSES, SchedulerState
from luigi.task_status import FAILED, PENDING, RUNNING

# The statuses a lost run leaves its task in, from which the lease may be renewed.
RENEWABLE_STATUSES = (FAILED, PENDING)


def record_loss(
    state: SchedulerState, task: TaskRecord, worker_id: str, ahead: bool, failed_at: float | None
) -> None:
    """``worker_id`` was lost while it held ``task``: it may renew the lease until someone starts the task.

    ``ahead``: the grant was marked as made ahead (put back to PENDING); ``failed_at``: the time of the
    failure the loss recorded (None: it recorded none).
    """
    state.set_lost_lease(task, {"worker": worker_id, "ahead": ahead, "failed_at": failed_at})


def forget_loss(state: SchedulerState, task: TaskRecord) -> None:
    """Someone reported a status for the task: a lost run's lease is over."""
    if task.lost_lease is not None:
        state.set_lost_lease(task, None)


def check_held(state: SchedulerState, worker_id: str, held: list[str]) -> tuple[list[str], list[TaskRecord]]:
    """Which of the tasks ``worker_id`` says it holds are no longer its own, and which it got back.

    Returns ``(handed_over, renewed)``: the ids it must let go, in the order sent, and the tasks whose
    lease was renewed (the caller starts them: ``renew``). A held task stays the worker's while it is
    running under it.
    """
    handed_over: list[str] = []
    renewed: list[TaskRecord] = []
    for task_id in dict.fromkeys(held):
        task = state.tasks.get(task_id)
        if task is None:
            handed_over.append(task_id)
        elif task.status in ACTIVE_RUN_STATUSES and task.worker_running == worker_id:
            continue
        elif renewable(task, worker_id):
            renewed.append(task)
        else:
            handed_over.append(task_id)
    return handed_over, renewed


def new_owners(state: SchedulerState, task_ids: list[str]) -> dict[str, str]:
    """The worker each of these tasks runs under now, for those running (the returning worker's summary)."""
    owners = {}
    for task_id in task_ids:
        task = state.tasks.get(task_id)
        if task is not None and task.status in ACTIVE_RUN_STATUSES and task.worker_running:
            owners[task_id] = task.worker_running
    return owners


def renewable(task: TaskRecord, worker_id: str) -> bool:
    """Whether ``worker_id`` lost its run of ``task`` and nobody has started or settled it since."""
    lost = task.lost_lease
    return (
        lost is not None
        and lost.get("worker") == worker_id
        and task.status in RENEWABLE_STATUSES
        and task.worker_running is None
    )


def renew(
    state: SchedulerState, set_status: Callable[[TaskRecord, str], None], task: TaskRecord, worker_id: str
) -> None:
    """Give ``task`` back to ``worker_id``, which still runs (or holds) the run it was thought to have lost.

    ``set_status`` is ``StatusRules.set_status``. The task is RUNNING under the worker again, kept by it,
    without the failure the loss recorded; a grant made ahead is marked as such again.
    """
    lost = task.lost_lease or {}
    forget_loss_failure(state, task, lost)
    set_status(task, RUNNING)
    state.start_run(task, worker_id, dict(task.resources))
    state.add_stakeholder(task, worker_id)
    if task.remove is not None:
        state.set_removal(task, None)
    if lost.get("ahead"):
        state.mark_granted_ahead(task, worker_id)


def forget_loss_failure(state: SchedulerState, task: TaskRecord, lost: dict[str, Any]) -> None:
    """Take back the failure the loss recorded: the run did not fail, its worker was only out of touch."""
    failed_at = lost.get("failed_at")
    if failed_at is not None:
        state.forget_failure(task, failed_at)
