"""Read-only views for clients and the visualiser: pending counts, task and worker lists, resources."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from luigi.scheduler.model.records import COUNTED_STATUSES, TaskRecord
from luigi.scheduler.model.state import SchedulerState
from luigi.scheduler.rules.resources import used_resources
from luigi.scheduler.views.search import NameIndex
from luigi.scheduler.views.serialize import serialize_task
from luigi.scheduler.views.upstream import disabled_upstream, upstream_status
from luigi.task_status import DISABLED, PENDING, RUNNING


class PendingCounter:
    """``count_pending`` from per-worker counters, minus tasks blocked by a DISABLED upstream.

    The blocked set is recomputed only when it may have changed (``state.disabled_version``) and only
    while some task is DISABLED, so the usual call is O(1) plus the running tasks.
    """

    def __init__(self, state: SchedulerState) -> None:
        self._state = state
        self._version = -1
        self._blocked: set[str] = set()

    def count(self, worker_id: str) -> dict[str, Any]:
        """The ``count_pending`` reply for ``worker_id`` (zeros for an unknown worker)."""
        state = self._state
        worker = state.workers.get(worker_id)
        totals = [0, 0, 0]
        if worker is not None:
            for status in COUNTED_STATUSES:
                counts = worker.pending_counts[status]
                totals[0] += counts[0]
                totals[1] += counts[1]
                totals[2] += counts[2]
            if state.by_status[DISABLED]:  # only a DISABLED task blocks others
                for task_id in self._blocked_tasks():
                    _subtract_blocked(totals, state.tasks[task_id], worker_id)
        return {
            "n_pending_tasks": totals[0],
            "n_unique_pending": totals[1],
            "n_pending_last_scheduled": totals[2],
            "worker_state": worker.state if worker is not None else "active",
            "running_tasks": _running_tasks_of(state, worker_id),
        }

    def _blocked_tasks(self) -> set[str]:
        """The tasks behind a DISABLED one (asked only while some task is DISABLED)."""
        state = self._state
        if self._version != state.disabled_version:
            self._blocked = disabled_upstream(state)
            self._version = state.disabled_version
        return self._blocked


def _subtract_blocked(totals: list[int], task: TaskRecord, worker_id: str) -> None:
    if worker_id not in task.workers:
        return
    totals[0] -= 1
    if len(task.workers) == 1:
        totals[1] -= 1
    if task.last_worker == worker_id:
        totals[2] -= 1


def _running_tasks_of(state: SchedulerState, worker_id: str) -> list[dict[str, Any]]:
    """The RUNNING tasks listing this worker, each with who runs it (helps troubleshooting)."""
    running = []
    for task in state.by_status[RUNNING].values():
        if worker_id in task.workers and task.worker_running is not None:
            runner = state.workers.get(task.worker_running)
            info = {"task_id": task.id, "worker": task.worker_running}
            if runner is not None:
                info.update(runner.info)
            running.append(info)
    return running


def task_list(
    state: SchedulerState,
    status: str,
    upstream: str,
    limit: bool,
    search: str | None,
    max_shown: int | None,
    names: NameIndex,
) -> dict[str, Any]:
    """Tasks by status / upstream status / search terms (every term in the display name, found through
    ``names``), or ``{"num_tasks": N}`` past the limit."""
    cap = max_shown or state.config.max_shown_tasks
    if not search:
        pre_count = len(state.by_status.get(status, {})) if status else len(state.tasks)
        if limit and pre_count > cap:
            return {"num_tasks": -1 if upstream else pre_count}
    terms = [term.lower() for term in search.split()] if search else []
    candidates: Iterable[TaskRecord]
    if terms:
        candidates = [task for task in names.matching(terms) if not status or task.status == status]
    else:
        candidates = list(state.by_status.get(status, {}).values() if status else state.tasks.values())
    table: dict[str, str] = {}
    send_messages = state.config.send_messages
    result = {}
    for task in candidates:
        if task.status != PENDING or not upstream or upstream == upstream_status(state, task.id, table):
            result[task.id] = serialize_task(task, send_messages, include_deps=False)
    if limit and len(result) > cap:
        return {"num_tasks": len(result)}
    return result


def task_search(state: SchedulerState, task_str: str) -> dict[str, dict[str, Any]]:
    """Tasks whose id contains ``task_str``, grouped by status."""
    result: dict[str, dict[str, Any]] = {}
    for task in state.tasks.values():
        if task_str in task.id:
            result.setdefault(task.status, {})[task.id] = serialize_task(
                task, state.config.send_messages, include_deps=False
            )
    return result


def worker_list(state: SchedulerState, include_running: bool) -> list[dict[str, Any]]:
    """Active workers, newest first, with their info and (optionally) what they run and wait for."""
    running: dict[str, dict[str, Any]] = {}
    if include_running:
        for task in state.by_status[RUNNING].values():
            if task.worker_running is not None:
                running.setdefault(task.worker_running, {})[task.id] = serialize_task(
                    task, state.config.send_messages, include_deps=False
                )
    workers = []
    for worker in state.workers.values():
        first_task = worker.info.get("first_task", "")
        first = state.tasks.get(first_task) if isinstance(first_task, str) else None
        entry: dict[str, Any] = {
            "name": worker.id,
            "last_active": worker.last_active,
            "started": worker.started,
            "state": worker.state,
            "first_task_display_name": first.pretty_id if first is not None else first_task,
            "num_unread_rpc_messages": len(worker.rpc_messages),
        }
        entry.update((k, v) for k, v in worker.info.items() if k not in entry)
        if include_running:
            tasks = running.get(worker.id, {})
            pending, uniques, _ = worker.pending_counts[PENDING]
            entry.update(num_running=len(tasks), num_pending=pending, num_uniques=uniques, running=tasks)
        workers.append(entry)
    workers.sort(key=lambda entry: entry["started"], reverse=True)
    return workers


def resource_list(state: SchedulerState) -> list[dict[str, Any]]:
    """Configured resources with their capacity, units in use and the RUNNING tasks that hold them."""
    running = list(state.by_status[RUNNING].values())
    used = used_resources(running)
    result = []
    for name, total in state.resources.items():
        consumers = {
            task.id: serialize_task(task, state.config.send_messages, include_deps=False)
            for task in running
            if name in task.resources
        }
        result.append(
            {
                "name": name,
                "num_total": total,
                "num_used": used.get(name, 0),
                "num_consumer": len(consumers),
                "running": consumers,
            }
        )
    return result


def fetch_error(state: SchedulerState, task_id: str) -> dict[str, Any]:
    """The task's failure explanation with what identifies it; ``error`` is '' for an unknown task."""
    task = state.tasks.get(task_id)
    if task is None:
        return {"taskId": task_id, "error": ""}
    return {
        "taskId": task_id,
        "error": task.expl,
        "displayName": task.pretty_id,
        "taskParams": dict(task.params),
        "taskModule": task.module,
        "taskFamily": task.family,
    }
