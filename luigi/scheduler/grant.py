"""Choosing the next task for a worker (``get_work`` steps 4-10): rank order, resources, batching.

The candidates come from the ready queues, so the cost is O(log n) per grant plus the resource
signatures looked at above the chosen task. A signature that does not fit what is running is
skipped as a whole and never blocks a lower task that fits. Before granting a task that needs
resources, higher-ranked ready tasks that other active workers with free slots could take reserve
their resources first (Luigi's greedy reservation, approximated by each competing group's best task),
so a low-priority task does not take a resource a higher-priority task is about to need.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from luigi.scheduler import policy
from luigi.scheduler.ready import ASSISTANTS, RankKey
from luigi.scheduler.records import ResourceKey, TaskRecord
from luigi.scheduler.state import SchedulerState, rank_key
from luigi.task_status import PENDING, RUNNING

AHEAD_SCAN = 256  # dependents of an assumed task looked at, at most, for a task to grant ahead of it


@dataclass
class Selection:
    """What ``get_work`` hands out: one task, or a batch led by ``task`` when ``members`` has several."""

    task: TaskRecord
    members: list[TaskRecord]
    batched_params: dict[str, list[Any]] | None = None
    assumes_done: list[str] = field(default_factory=list)  # granted ahead of these (``choose_ahead_of``)


def choose_work(state: SchedulerState, worker_id: str, assistant: bool) -> Selection | None:
    """The best ready task this worker may run and whose resources fit, with its batch if any."""
    owner = ASSISTANTS if assistant else worker_id
    if assistant:
        state.enable_assistant_queue()
    view = _ResourceView(state, worker_id)
    best: TaskRecord | None = None
    with state.ready.scan(owner) as heads:
        for key, rkey in heads:
            if not rkey or view.grantable(key, rkey):
                best = state.tasks[key[2]]
                break
    if best is None:
        return None
    return _with_batch(state, best, worker_id, assistant)


def choose_next(
    state: SchedulerState, worker_id: str, assistant: bool, assumed: set[str]
) -> Selection | None:
    """``choose_work``, else (with ``assumed``) ``choose_ahead_of`` them."""
    selection = choose_work(state, worker_id, assistant)
    if selection is None and assumed:
        selection = choose_ahead_of(state, worker_id, assistant, assumed)
    return selection


def choose_ahead_of(
    state: SchedulerState, worker_id: str, assistant: bool, assume_done: Iterable[str]
) -> Selection | None:
    """The best task that waits only for some of ``assume_done``, this worker's RUNNING tasks, granted
    ahead of them: the worker runs it once they are DONE, or never (it is then put back to PENDING).

    A serial worker asks this while it runs a short task, so that a chain's next link costs no round
    trip. Only tasks it may run, whose resources fit, and that would not be batched, are chosen, from at
    most ``AHEAD_SCAN`` dependents of each assumed task (so a fan-out of thousands costs no more).
    """
    assumed = {
        task_id
        for task_id in assume_done
        if (task := state.tasks.get(task_id)) is not None
        and task.status == RUNNING
        and task.worker_running == worker_id
    }
    view = _ResourceView(state, worker_id)
    best: TaskRecord | None = None
    for task_id in assumed:
        for dependent_id in islice(state.dependents.get(task_id, ()), AHEAD_SCAN):
            task = state.tasks.get(dependent_id)
            if task is None or task.status != PENDING or task.unfinished_deps > len(assumed):
                continue  # (the counter first: a fan-in of thousands is skipped in O(1))
            if task.unfinished_deps != len(task.deps & assumed):
                continue  # it waits for something else too
            if not (task.runnable if assistant else worker_id in task.workers):
                continue
            if best is not None and rank_key(task) >= rank_key(best):
                continue
            if _would_batch(state, task, worker_id):
                continue
            if task.resource_key and not view.grantable(rank_key(task), task.resource_key):
                continue
            best = task
    if best is None:
        return None
    return Selection(best, [best], assumes_done=sorted(best.deps & assumed))


def _would_batch(state: SchedulerState, task: TaskRecord, worker_id: str) -> bool:
    return bool(task.batchable and state.batchers.get(worker_id, {}).get(task.family))


class _ResourceView:
    """Resource usage and competing workers' free slots, computed once per ``get_work`` when needed."""

    def __init__(self, state: SchedulerState, worker_id: str) -> None:
        self.state = state
        self.worker_id = worker_id
        self._used: dict[str, Any] | None = None
        self._slots: dict[str, int] | None = None

    @property
    def used(self) -> dict[str, Any]:
        """Units held by RUNNING tasks, computed on first use."""
        if self._used is None:
            self._used = policy.used_resources(self.state.by_status[RUNNING].values())
        return self._used

    def grantable(self, key: RankKey, rkey: ResourceKey) -> bool:
        """Whether a task needing ``rkey`` fits now, after higher-ranked tasks of others reserve theirs."""
        capacities = self.state.resources
        if not policy.fits(rkey, self.used, capacities):
            return False
        reserved = self._reserved_above(key, rkey)
        if not reserved:
            return True
        total = dict(self.used)
        policy.add_amounts(total, reserved.items())
        return policy.fits(rkey, total, capacities)

    def _reserved_above(self, key: RankKey, rkey: ResourceKey) -> dict[str, Any]:
        slots = dict(self._free_slots())
        reserved: dict[str, Any] = {}
        counted: set[str] = set()
        for name, _ in rkey:
            for owner, other in self.state.ready.groups_needing(name):
                if owner is None or owner == self.worker_id or slots.get(owner, 0) <= 0:
                    continue  # assistants (owner None) reserve nothing: no task lists them
                head = self.state.ready.peek(owner, other)
                if head is None or head >= key or head[2] in counted:
                    continue
                if not policy.fits(other, self.used, self.state.resources):
                    continue  # it cannot start either, so it reserves nothing
                slots[owner] -= 1
                counted.add(head[2])
                policy.add_amounts(reserved, other)
        return reserved

    def _free_slots(self) -> dict[str, int]:
        """Idle processes of the other workers that asked for work recently."""
        if self._slots is None:
            state = self.state
            recent = state.clock() - state.config.worker_disconnect_delay
            self._slots = {
                worker.id: _declared_processes(worker.info)
                for worker in state.workers.values()
                if worker.id != self.worker_id
                and worker.last_get_work is not None
                and worker.last_get_work > recent
                and worker.enabled
            }
            for task in state.by_status[RUNNING].values():
                if task.worker_running in self._slots:
                    self._slots[task.worker_running] -= 1
        return self._slots


def _declared_processes(info: dict[str, Any]) -> int:
    try:
        return int(info.get("workers", 1))
    except (TypeError, ValueError):
        return 1


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
