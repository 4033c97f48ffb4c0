"""Pruning (LUIGI_COMPAT f.5): silent workers leave, their running tasks fail, orphans are removed.

Only what is due is touched: worker silence and task deadlines come from a time-ordered heap, and
tasks whose stakeholders or runner may have changed since the last prune from ``state.to_recheck``.
"""

from __future__ import annotations

import logging

from luigi.scheduler.model.deadlines import REENABLE, REMOVE, RETRY
from luigi.scheduler.model.state import ACTIVE_RUN_STATUSES, SchedulerState
from luigi.scheduler.rules.transitions import StatusRules
from luigi.task_status import DISABLED, FAILED, PENDING, RUNNING

logger = logging.getLogger("luigi.scheduler")


def prune(state: SchedulerState, rules: StatusRules) -> None:
    """Apply every disconnect, failure, retry, re-enable and removal that is due now."""
    now = state.clock()
    _expire_silent_workers(state, now)
    _check_changed_tasks(state, rules, now)
    _apply_due_reminders(state, rules, now)


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


def _check_changed_tasks(state: SchedulerState, rules: StatusRules, now: float) -> None:
    """Fail tasks whose runner left; give tasks nobody wants any more a removal time."""
    if not state.to_recheck:
        return
    changed, state.to_recheck = state.to_recheck, set()
    assistants: set[str] | None = None
    for task_id in changed:
        task = state.tasks.get(task_id)
        if task is None:
            continue
        if task.status in ACTIVE_RUN_STATUSES:
            if assistants is None:
                assistants = state.assistant_ids()
            rules.fail_if_runner_lost(task, assistants)
        if not task.stakeholders and task.remove is None and task.status != RUNNING:
            logger.debug(
                "Task %r has no stakeholders anymore -> might remove task in %s seconds",
                task.id,
                state.config.remove_delay,
            )
            state.set_removal(task, now + state.config.remove_delay)


def _apply_due_reminders(state: SchedulerState, rules: StatusRules, now: float) -> None:
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
            logger.info("Removing task %r", task.id)
            state.remove_task(task)
    for when, kind, task_id, stamp in not_yet:
        state.deadlines.remind_task(when, kind, task_id, stamp)
