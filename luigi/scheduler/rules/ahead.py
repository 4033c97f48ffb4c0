"""Ask-ahead: our serial worker's two extensions of ``get_work`` (no Luigi worker sends them).

With ``assume_done``, when nothing is ready, a task waiting only for some of this worker's RUNNING
tasks is chosen ahead of them: the worker runs it once they are DONE, or never (it is then put back
to PENDING). With ``max_tasks`` > 1, further single tasks ride along in ``more_tasks``. Both spare a
worker that runs short tasks one round trip per task.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice

from luigi.scheduler.model.records import TaskRecord
from luigi.scheduler.model.state import SchedulerState, rank_key
from luigi.scheduler.rules.resources import Reservation
from luigi.task_status import PENDING, RUNNING

AHEAD_SCAN = 256  # dependents of an assumed task looked at, at most, for a task to choose ahead of it

# The most tasks one get_work grants a worker that asks for several (``max_tasks``).
MAX_TASKS_PER_GET_WORK = 16


def choose_ahead_of(
    state: SchedulerState, worker_id: str, assistant: bool, assume_done: Iterable[str]
) -> tuple[TaskRecord, list[str]] | None:
    """The best task that waits only for some of ``assume_done`` (this worker's RUNNING tasks), and the
    ones among those it waits for.

    Only tasks the worker may run, whose resources fit, and that would not be batched, are chosen, from
    at most ``AHEAD_SCAN`` dependents of each assumed task (so a fan-out of thousands costs no more).
    """
    assumed = {
        task_id
        for task_id in assume_done
        if (task := state.tasks.get(task_id)) is not None
        and task.status == RUNNING
        and task.worker_running == worker_id
    }
    found: dict[str, TaskRecord] = {}
    for task_id in assumed:
        for dependent_id in islice(state.dependents.get(task_id, ()), AHEAD_SCAN):
            task = state.tasks.get(dependent_id)
            if task is None or task.status != PENDING or task.unfinished_deps > len(assumed):
                continue  # (the counter first: a fan-in of thousands is skipped in O(1))
            if task.unfinished_deps != len(task.deps & assumed):
                continue  # it waits for something else too
            if not (task.runnable if assistant else worker_id in task.workers):
                continue
            if not _would_batch(state, task, worker_id):
                found[task.id] = task
    best = _first_that_fits(state, worker_id, assistant, sorted(found.values(), key=rank_key))
    if best is None:
        return None
    return best, sorted(best.deps & assumed)


def _first_that_fits(
    state: SchedulerState, worker_id: str, assistant: bool, ranked: list[TaskRecord]
) -> TaskRecord | None:
    """The first of ``ranked`` that fits what is in use and what higher-ranked work reserves, as a
    ready task would (``Reservation``)."""
    reservation: Reservation | None = None
    for task in ranked:
        if not task.resource_key:
            return task
        reservation = reservation or Reservation(state, worker_id, assistant)
        if reservation.admits(rank_key(task), task.resource_key):
            return task
    return None


def more_tasks_allowed(state: SchedulerState, assistant: bool, max_tasks: int) -> int:
    """How many tasks beyond the first one ``get_work`` may grant in ``more_tasks``.

    None unless no other worker could take them instead (no assistant is connected): held by one worker,
    they would wait while another one idles.
    """
    if max_tasks <= 1 or assistant or state.assistant_ids():
        return 0
    return min(max_tasks, MAX_TASKS_PER_GET_WORK) - 1


def rides_along(task: TaskRecord, batched: bool) -> bool:
    """Whether a further choice may join ``more_tasks``: a single task listing this worker alone (a batch
    is left for a get_work of its own; a task another worker could run is left to it)."""
    return not batched and len(task.workers) <= 1


def _would_batch(state: SchedulerState, task: TaskRecord, worker_id: str) -> bool:
    return bool(task.batchable and state.batchers.get(worker_id, {}).get(task.family))
