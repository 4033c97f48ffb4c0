"""Pruning (LUIGI_COMPAT f.5): silent workers leave, their running tasks fail, orphans are removed.

Only what is due is touched: worker silence and task deadlines come from a time-ordered heap, and
tasks whose stakeholders or runner may have changed since the last prune from ``state.to_recheck``.

While an assistant is connected, a task past its removal time is kept back if an assistant may still
need it (Luigi's "necessary" tasks: one not DONE, DISABLED or UNKNOWN, or disabled by the scheduler, and
the direct dependencies of such a task). Kept tasks wait in ``state.kept_back``, looked at again at each
prune and removed once nothing needs them or no assistant is left, so only they cost a look per prune.
"""

from __future__ import annotations

import logging

from luigi.scheduler.model.deadlines import REENABLE, REMOVE, RETRY
from luigi.scheduler.model.records import TaskRecord
from luigi.scheduler.model.state import ACTIVE_RUN_STATUSES, SchedulerState
from luigi.scheduler.rules.transitions import StatusRules
from luigi.task_status import DISABLED, DONE, FAILED, PENDING, RUNNING, UNKNOWN

logger = logging.getLogger("luigi.scheduler")

# Statuses in which a task (not disabled by the scheduler) asks nothing more of an assistant.
SETTLED_STATUSES = frozenset({DONE, DISABLED, UNKNOWN})


def prune(state: SchedulerState, rules: StatusRules) -> None:
    """Apply every disconnect, failure, retry, re-enable and removal that is due now."""
    now = state.clock()
    _expire_silent_workers(state, now)
    assistants = state.assistant_ids()
    _check_changed_tasks(state, rules, now, assistants)
    _release_kept_back(state, now, assistants)
    _apply_due_reminders(state, rules, now, assistants)


def _expire_silent_workers(state: SchedulerState, now: float) -> None:
    delay = state.config.worker_disconnect_delay
    not_yet: list[tuple[float, str, float]] = []
    for worker_id, started in state.deadlines.due_workers(now):
        worker = state.workers.get(worker_id)
        if worker is None or worker.started != started:
            continue
        silent_until = worker.last_active + delay
        if silent_until < now:
            logger.info("Worker %s timed out (no contact for >=%ss)", worker_id, delay)
            state.remove_worker(worker_id)
        else:
            not_yet.append((silent_until, worker_id, started))
    for when, worker_id, started in not_yet:
        state.deadlines.remind_worker(when, worker_id, started)


def _check_changed_tasks(state: SchedulerState, rules: StatusRules, now: float, assistants: set[str]) -> None:
    """Fail tasks whose runner left; give tasks nobody wants any more a removal time."""
    if not state.to_recheck:
        return
    changed, state.to_recheck = state.to_recheck, set()
    for task_id in changed:
        task = state.tasks.get(task_id)
        if task is None:
            continue
        if task.status in ACTIVE_RUN_STATUSES:
            rules.fail_if_runner_lost(task, assistants)
        if not task.stakeholders and task.remove is None and task.status != RUNNING:
            logger.debug(
                "Task %r has no stakeholders anymore -> might remove task in %s seconds",
                task.id,
                state.config.remove_delay,
            )
            state.set_removal(task, now + state.config.remove_delay)


def _release_kept_back(state: SchedulerState, now: float, assistants: set[str]) -> None:
    """Remove the tasks kept back at earlier prunes that no assistant needs any more."""
    if not state.kept_back:
        return
    for task_id in list(state.kept_back):
        task = state.tasks.get(task_id)
        if task is None or task.remove is None or task.remove > now:
            state.kept_back.discard(task_id)  # wanted again (a later removal time has its own reminder)
        elif not (assistants and _needed_by_assistants(state, task)):
            _remove(state, task)


def _needed_by_assistants(state: SchedulerState, task: TaskRecord) -> bool:
    """Whether the task is unsettled or a direct dependency of an unsettled task (Luigi's "necessary")."""
    if _unsettled(task):
        return True
    tasks = state.tasks
    return any(_unsettled(tasks[dependent]) for dependent in state.dependents.get(task.id, ()))


def _unsettled(task: TaskRecord) -> bool:
    return task.status not in SETTLED_STATUSES or task.scheduler_disable_time is not None


def _remove(state: SchedulerState, task: TaskRecord) -> None:
    logger.info("Removing task %r", task.id)
    state.remove_task(task)


def _apply_due_reminders(state: SchedulerState, rules: StatusRules, now: float, assistants: set[str]) -> None:
    config = state.config
    not_yet: list[tuple[float, str, str, float]] = []
    for kind, task_id, stamp in state.deadlines.due_tasks(now):
        task = state.tasks.get(task_id)
        if task is None:
            continue
        if kind == REENABLE and task.status == DISABLED and task.scheduler_disable_time == stamp:
            if now - stamp > config.disable_persist:
                rules.re_enable(task)
            else:
                not_yet.append((stamp + config.disable_persist, kind, task_id, stamp))
        elif kind == RETRY and task.status == FAILED and task.retry == stamp and config.retry_delay >= 0:
            if stamp < now:
                rules.set_status(task, PENDING)
            else:
                not_yet.append((stamp, kind, task_id, stamp))
        elif kind == REMOVE and task.remove == stamp:
            if assistants and _needed_by_assistants(state, task):
                logger.debug("Keeping task %r past its removal time: an assistant may need it", task.id)
                state.kept_back.add(task.id)
            else:
                _remove(state, task)
    for when, kind, task_id, stamp in not_yet:
        state.deadlines.remind_task(when, kind, task_id, stamp)
