"""Upstream status: the most severe state among a PENDING task's unfinished dependencies (UI filters)."""

from __future__ import annotations

from luigi.scheduler.model.state import SchedulerState
from luigi.task_status import BATCH_RUNNING, DISABLED, DONE, FAILED, PENDING, RUNNING

UPSTREAM_RUNNING = "UPSTREAM_RUNNING"
UPSTREAM_MISSING_INPUT = "UPSTREAM_MISSING_INPUT"
UPSTREAM_FAILED = "UPSTREAM_FAILED"
UPSTREAM_DISABLED = "UPSTREAM_DISABLED"

UPSTREAM_SEVERITY_ORDER = ("", UPSTREAM_RUNNING, UPSTREAM_MISSING_INPUT, UPSTREAM_FAILED, UPSTREAM_DISABLED)
STATUS_TO_UPSTREAM_MAP = {
    FAILED: UPSTREAM_FAILED,
    RUNNING: UPSTREAM_RUNNING,
    BATCH_RUNNING: UPSTREAM_RUNNING,
    PENDING: UPSTREAM_MISSING_INPUT,
    DISABLED: UPSTREAM_DISABLED,
}
_SEVERITY = {status: rank for rank, status in enumerate(UPSTREAM_SEVERITY_ORDER)}


def upstream_status(state: SchedulerState, task_id: str, table: dict[str, str]) -> str:
    """The task's upstream status, memoised in ``table`` across calls of one query.

    A task's own FAILED/RUNNING/DISABLED state counts; a PENDING task with dependencies takes the most
    severe status of its dependencies; a PENDING task without any is missing its input; DONE is ''.
    """
    if task_id in table:
        return table[task_id]
    if task_id not in state.tasks:
        return ""
    stack = [task_id]
    while stack:
        current = stack[-1]
        task = state.tasks.get(current)
        if task is None or task.status == DONE:
            table.setdefault(current, "")
            stack.pop()
            continue
        if current in table and table[current] != _IN_PROGRESS:
            stack.pop()
            continue
        if task.status != PENDING or not task.deps:
            table[current] = STATUS_TO_UPSTREAM_MAP.get(task.status, "")
            stack.pop()
            continue
        if current not in table:  # first visit: resolve the dependencies first
            table[current] = _IN_PROGRESS
            stack.extend(dep for dep in task.deps if dep not in table)
            continue
        table[current] = max((_resolved(table, dep) for dep in task.deps), key=_SEVERITY.__getitem__)
        stack.pop()
    return table[task_id]


_IN_PROGRESS = "\0"  # a task on the current walk (a cycle reads it as '')


def _resolved(table: dict[str, str], task_id: str) -> str:
    value = table.get(task_id, "")
    return "" if value == _IN_PROGRESS else value


def disabled_upstream(state: SchedulerState) -> set[str]:
    """Ids of PENDING tasks whose upstream status is UPSTREAM_DISABLED.

    Walks dependents from each DISABLED task through PENDING tasks only, so it costs the size of the
    affected region, not of the graph.
    """
    found: set[str] = set()
    frontier = list(state.by_status[DISABLED])
    while frontier:
        task_id = frontier.pop()
        for dependent_id in state.dependents.get(task_id, ()):
            dependent = state.tasks[dependent_id]
            if dependent.status == PENDING and dependent_id not in found:
                found.add(dependent_id)
                frontier.append(dependent_id)
    return found
