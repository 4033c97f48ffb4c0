"""``get_work``: which task or batch a worker runs next, and starting it (LUIGI_COMPAT f.4).

The steps, in order: ``settle`` squares the scheduler's RUNNING tasks of the worker with the
``current_tasks`` it reports (a lost grant is sent again); ``choose`` picks the best ready task the
worker may run whose resources fit, extended into a batch when the worker batches its family, else
(ask-ahead, see ``luigi.scheduler.rules.ahead``) a task granted ahead of assumed-done ones; ``start``
marks the choice RUNNING (or BATCH_RUNNING) and builds the reply's task fields, with ``more_tasks``
when the worker asks for several.

The candidates come from the ready queues, so the cost is O(log n) per choice when the worker's best
ready task needs no resources (it always fits). Otherwise Luigi's reservation walk
(``resources.Reservation``) decides, at a cost bounded by the active workers' processes, the running
tasks and the resource signatures queued, not by the number of tasks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from luigi.scheduler.hooks import record_history
from luigi.scheduler.model.ready import ASSISTANTS
from luigi.scheduler.model.records import TaskRecord
from luigi.scheduler.model.state import SchedulerState, rank_key
from luigi.scheduler.rules import ahead, policy
from luigi.scheduler.rules.resources import Reservation
from luigi.scheduler.rules.transitions import StatusRules, reset_orphaned_batch_members
from luigi.task_history import TaskHistory
from luigi.task_status import PENDING, RUNNING


@dataclass
class Selection:
    """What ``get_work`` hands out: one task, or a batch led by ``task`` when ``members`` has several."""

    task: TaskRecord
    members: list[TaskRecord]
    batched_params: dict[str, list[Any]] | None = None
    assumes_done: list[str] = field(default_factory=list)  # granted ahead of these (``ahead``)


@dataclass
class Started:
    """The reply's task fields for what was started, and the single tasks started (for the metrics)."""

    reply: dict[str, Any]
    tasks: list[TaskRecord]


class GetWork:
    """Settles, chooses and starts work for one ``get_work`` call at a time."""

    def __init__(self, state: SchedulerState, rules: StatusRules, task_history: TaskHistory) -> None:
        self._state = state
        self._rules = rules
        self._task_history = task_history

    def settle(self, worker: str, current_tasks: list[str]) -> Selection | None:
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

    def choose(self, worker: str, assistant: bool, assumed: set[str]) -> Selection | None:
        """The best ready task (or batch) for the worker, else one granted ahead of ``assumed``."""
        selection = choose_work(self._state, worker, assistant)
        if selection is None and assumed:
            found = ahead.choose_ahead_of(self._state, worker, assistant, assumed)
            if found is not None:
                task, assumes_done = found
                selection = Selection(task, [task], assumes_done=assumes_done)
        return selection

    def start(
        self,
        selection: Selection,
        worker: str,
        host: str | None,
        assistant: bool,
        assumed: set[str],
        max_tasks: int,
    ) -> Started:
        """Start the selection; with ``max_tasks`` > 1 and a single task, up to that many in all (the
        others under ``more_tasks``), each possibly granted ahead of ``assumed`` and those before it."""
        if len(selection.members) > 1:
            return Started(self._start_batch(selection, worker), [])
        started = Started(self._start_one(selection, worker, host), [selection.task])
        if assumed:  # an ask ahead: this waits behind the worker's current run
            self._state.mark_granted_ahead(selection.task, worker)
        if max_tasks > 1:
            assumed.add(selection.task.id)
            started.reply["more_tasks"] = self._start_more(
                worker, host, assistant, assumed, max_tasks, started
            )
        return started

    def _start_more(
        self,
        worker: str,
        host: str | None,
        assistant: bool,
        assumed: set[str],
        max_tasks: int,
        started: Started,
    ) -> list[dict[str, Any]]:
        more: list[dict[str, Any]] = []
        count = ahead.more_tasks_allowed(self._state, assistant, max_tasks)
        while len(more) < count:
            selection = self.choose(worker, assistant, assumed)
            if selection is None or not ahead.rides_along(selection.task, len(selection.members) > 1):
                break
            more.append(self._start_one(selection, worker, host))
            self._state.mark_granted_ahead(selection.task, worker)
            started.tasks.append(selection.task)
            assumed.add(selection.task.id)
        return more

    def _start_one(self, selection: Selection, worker: str, host: str | None) -> dict[str, Any]:
        task = selection.task
        self._rules.set_status(task, RUNNING)
        self._state.start_run(task, worker, dict(task.resources))
        record_history(self._task_history, task, RUNNING, host)
        reply: dict[str, Any] = {
            "task_id": task.id,
            "task_family": task.family,
            "task_module": task.module,
            "task_params": dict(task.params),
        }
        if selection.assumes_done:
            reply["assumes_done"] = selection.assumes_done
        return reply

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


def choose_work(state: SchedulerState, worker_id: str, assistant: bool) -> Selection | None:
    """The best ready task this worker may run and whose resources fit, with its batch if any."""
    owner = ASSISTANTS if assistant else worker_id
    if assistant:
        state.enable_assistant_queue()
    head = state.ready.head(owner)
    if head is None:
        return None
    key, rkey = head
    if rkey:  # what it needs may be held for higher-ranked work: Luigi's walk decides
        best = Reservation(state, worker_id, assistant).first_grantable()
        if best is None:
            return None
    else:  # a task that needs nothing always fits: the walk would take it first
        best = state.tasks[key[2]]
    return _with_batch(state, best, worker_id, assistant)


def _with_batch(state: SchedulerState, best: TaskRecord, worker_id: str, assistant: bool) -> Selection:
    """Extend ``best`` into a batch when the worker registered a batcher for its family."""
    names, max_size = state.batchers.get(worker_id, {}).get(best.family, (None, 1))
    if not names or not best.batchable:
        return Selection(best, [best])
    try:
        batched = {name: [best.params[name]] for name in names}
    except KeyError:
        return Selection(best, [best])
    unbatched = {name: value for name, value in best.params.items() if name not in batched}
    members = [best]
    for task in _batch_candidates(state, best, worker_id, assistant):
        if len(members) >= max_size:
            break
        if (
            task.batchable
            and task.resources == best.resources
            and all(task.params.get(name) == value for name, value in unbatched.items())
        ):
            members.append(task)
            for name, values in batched.items():
                values.append(task.params.get(name))
    return Selection(best, members, batched)


def _batch_candidates(
    state: SchedulerState, best: TaskRecord, worker_id: str, assistant: bool
) -> list[TaskRecord]:
    """Ready tasks of the same family this worker may run, ranked after ``best``, in rank order."""
    best_key = rank_key(best)
    found = []
    for task_id in state.by_family.get(best.family, ()):
        task = state.tasks[task_id]
        if task.status != PENDING or task.unfinished_deps or rank_key(task) <= best_key:
            continue
        if worker_id in task.workers or (assistant and task.runnable):
            found.append(task)
    found.sort(key=rank_key)
    return found
