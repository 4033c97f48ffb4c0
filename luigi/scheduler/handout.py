"""Handing chosen tasks to a worker (``get_work`` steps 3 and 11), and our worker's extensions.

``reconcile`` squares the scheduler's RUNNING tasks of a worker with the ``current_tasks`` it reports;
``grant`` marks what ``luigi.scheduler.grant`` chose as RUNNING (or BATCH_RUNNING) and builds the reply's
task fields, with further single tasks when the worker asks for several (``max_tasks``) and no other
worker could run them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from luigi.scheduler import policy
from luigi.scheduler.grant import Selection, choose_next
from luigi.scheduler.hooks import record_history
from luigi.scheduler.records import TaskRecord
from luigi.scheduler.state import SchedulerState, rank_key
from luigi.scheduler.transitions import StatusRules, reset_orphaned_batch_members
from luigi.task_history import TaskHistory
from luigi.task_status import RUNNING

# The most tasks one get_work grants a worker that asks for several (``max_tasks``).
MAX_TASKS_PER_GET_WORK = 16


class Handout:
    """Applies grants to the state; ``started(task)`` is told of each task started (the metrics hook)."""

    def __init__(
        self,
        state: SchedulerState,
        rules: StatusRules,
        task_history: TaskHistory,
        started: Callable[[TaskRecord], None],
    ) -> None:
        self._state = state
        self._rules = rules
        self._task_history = task_history
        self._started = started

    def reconcile(self, worker: str, current_tasks: list[str]) -> Selection | None:
        """The best RUNNING task granted to ``worker`` that the worker does not say it is running (the
        grant never reached it: sent again); orphaned batch members go back to PENDING.

        One still waiting for a dependency was granted ahead of it, which then did not finish DONE: the
        worker never started it, so it goes back to PENDING instead.
        """
        current = set(current_tasks)
        lost = []
        for task in list(self._state.by_status[RUNNING].values()):
            if task.worker_running != worker or task.id in current:
                continue
            if task.unfinished_deps:
                self._rules.put_back(task)
            else:
                lost.append(task)
        reset_orphaned_batch_members(self._state, self._rules, worker)
        if not lost:
            return None
        task = min(lost, key=rank_key)
        return Selection(task, [task])

    def grant(
        self,
        selection: Selection,
        worker: str,
        host: str | None,
        assistant: bool,
        assumed: set[str],
        max_tasks: int,
    ) -> dict[str, Any]:
        """Start the selection; with ``max_tasks`` > 1 and a single task, up to that many in all (the
        others under ``more_tasks``), each possibly granted ahead of ``assumed`` and those before it."""
        if len(selection.members) > 1:
            return self._start_batch(selection, worker)
        granted = self._grant_one(selection, worker, host)
        if max_tasks > 1:
            assumed.add(selection.task.id)
            count = min(max_tasks, MAX_TASKS_PER_GET_WORK) - 1
            granted["more_tasks"] = self._grant_more(worker, host, assistant, assumed, count)
        return granted

    def _grant_one(self, selection: Selection, worker: str, host: str | None) -> dict[str, Any]:
        granted = self._start_task(selection.task, worker, host)
        if selection.assumes_done:
            granted["assumes_done"] = selection.assumes_done
        return granted

    def _grant_more(
        self, worker: str, host: str | None, assistant: bool, assumed: set[str], count: int
    ) -> list[dict[str, Any]]:
        """Further single tasks that no other worker could take instead (they list this worker alone and
        no assistant is connected): held by one worker, they would wait while another one idles."""
        more: list[dict[str, Any]] = []
        if assistant or self._state.assistant_ids():
            return more
        while len(more) < count:
            selection = choose_next(self._state, worker, assistant, assumed)
            if selection is None or len(selection.members) > 1:
                break  # a batch is left for a get_work of its own
            if len(selection.task.workers) > 1:
                break  # another worker could run it
            more.append(self._grant_one(selection, worker, host))
            assumed.add(selection.task.id)
        return more

    def _start_task(self, task: TaskRecord, worker: str, host: str | None) -> dict[str, Any]:
        self._started(task)
        self._rules.set_status(task, RUNNING)
        task.worker_running = worker
        task.resources_running = dict(task.resources)
        task.time_running = self._state.clock()
        self._state.dirty.add(task.id)
        record_history(self._task_history, task, RUNNING, host)
        return {
            "task_id": task.id,
            "task_family": task.family,
            "task_module": task.module,
            "task_params": dict(task.params),
        }

    def _start_batch(self, selection: Selection, worker: str) -> dict[str, Any]:
        members = selection.members
        batch_id = policy.batch_id_for(task.id for task in members)
        for task in members:
            self._rules.start_batch_member(task, batch_id, worker)
        params = dict(selection.task.params)
        params.update(selection.batched_params or {})
        return {
            "task_id": None,
            "task_family": selection.task.family,
            "task_module": selection.task.module,
            "task_params": params,
            "batch_id": batch_id,
            "batch_task_ids": [task.id for task in members],
        }
