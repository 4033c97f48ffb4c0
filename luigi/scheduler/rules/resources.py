"""What fits: units held by running tasks against capacities, and what higher-ranked work reserves.

Before a task that needs resources is chosen, higher-ranked tasks reserve theirs as Luigi's greedy
reservation does (``Reservation``), so a low-priority task does not take a resource a higher-priority
task is about to need. A resource that is not configured has capacity 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from operator import itemgetter
from typing import Any

from luigi.scheduler.model.ready import ASSISTANTS, Owner, RankKey
from luigi.scheduler.model.records import ResourceKey, TaskRecord
from luigi.scheduler.model.state import SchedulerState, rank_key
from luigi.task_status import RUNNING


def fits(needed: Iterable[tuple[str, Any]], used: Mapping[str, Any], capacities: Mapping[str, Any]) -> bool:
    """Whether ``needed`` (name, amount) pairs fit next to what is ``used``; a resource that is not
    configured has capacity 1."""
    for name, amount in needed:  # a loop, not all(...): this runs several times per get_work
        if amount + used.get(name, 0) > capacities.get(name, 1):
            return False
    return True


def add_amounts(total: dict[str, Any], amounts: Iterable[tuple[str, Any]]) -> None:
    """Add (name, amount) pairs into ``total`` in place."""
    for name, amount in amounts:
        total[name] = total.get(name, 0) + amount


def used_resources(running: Iterable[TaskRecord]) -> dict[str, Any]:
    """Units held by RUNNING tasks (their ``resources_running``, which a task may lower while it runs)."""
    used: dict[str, Any] = {}
    for task in running:
        held = task.resources_running if task.resources_running is not None else task.resources
        add_amounts(used, held.items())
    return used


def check_resource_amounts(what: str, resources: Any) -> dict[str, Any]:
    """A copy of a resources mapping, or ValueError naming ``what`` when it is not {name: number}."""
    if not isinstance(resources, Mapping):
        raise ValueError(f"{what} must be a mapping of resource name to amount, got {resources!r}")
    for name, amount in resources.items():
        if not isinstance(name, str) or isinstance(amount, bool) or not isinstance(amount, (int, float)):
            raise ValueError(f"{what} must map resource names to numbers, got {name!r}: {amount!r}")
    return dict(resources)


class Reservation:
    """Luigi's greedy reservation (LUIGI_COMPAT j.2), walked for one ``get_work`` call.

    Each worker that asked for work within ``worker_disconnect_delay`` has a budget of its ``workers``
    processes. Walking RUNNING and ready tasks by rank, a running task spends a unit of its runner's
    budget and adds what it holds to the *reserved* tally; a ready task that fits capacity above the
    tally is the caller's choice if the caller may run it and it fits what is in use, else the first
    of its workers with budget spends a unit on it and its needs join the tally. So a waiting task
    holds its resources against every lower-ranked one, the caller's own included.

    The walk reads the ready queues of the caller and of the workers with budget left, passing over a
    signature that no longer fits the tally (the tally only grows) and a worker whose budget is spent:
    every task it looks at spends a unit or ends a group, so its cost is bounded by the processes,
    running tasks and signatures, not by the tasks queued.
    """

    def __init__(self, state: SchedulerState, worker_id: str, assistant: bool) -> None:
        self.state = state
        self.worker_id = worker_id
        self.assistant = assistant
        self.caller: Owner = ASSISTANTS if assistant else worker_id
        self.budget = _active_processes(state)
        running = state.by_status[RUNNING].values()
        self.used = used_resources(running)
        self.tally: dict[str, Any] = {}
        self._running = [(rank_key(task), task) for task in running if task.worker_running in self.budget]
        self._running.sort(key=itemgetter(0), reverse=True)  # the best last, taken from the end
        others = [w for w, processes in self.budget.items() if w != worker_id and processes > 0]
        self._walk = state.ready.walk([self.caller, *others])
        self._seen: set[str] = set()
        self.found: TaskRecord | None = None

    def first_grantable(self) -> TaskRecord | None:
        """The caller's best ready task that fits what is in use and what the walk above it reserves."""
        self._walk_above(None)
        return self.found

    def admits(self, key: RankKey, rkey: ResourceKey) -> bool:
        """Whether a task of the caller's ranked ``key`` and needing ``rkey`` would be its choice (for a
        task granted ahead). Keys asked about must not decrease."""
        self._walk_above(key)
        capacities = self.state.resources
        return self.found is None and fits(rkey, self.tally, capacities) and fits(rkey, self.used, capacities)

    def _walk_above(self, until: RankKey | None) -> None:
        """Walk the tasks ranked before ``until`` (None: all) until the caller's choice is found."""
        running, walk = self._running, self._walk
        while self.found is None:
            ready_key = walk.next_key()
            if running and (ready_key is None or running[-1][0] < ready_key):
                if until is not None and running[-1][0] >= until:
                    return
                self._pass_running(running.pop()[1])
            elif ready_key is None or (until is not None and ready_key >= until):
                return
            else:
                self._pass_ready(*walk.pop())

    def _pass_running(self, task: TaskRecord) -> None:
        runner = task.worker_running
        assert runner is not None  # only tasks of active runners are walked
        self._spend(runner)
        held = task.resources_running if task.resources_running is not None else task.resources
        add_amounts(self.tally, held.items())

    def _pass_ready(self, key: RankKey, owner: Owner, rkey: ResourceKey, group: int) -> None:
        task = self.state.tasks[key[2]]
        if task.id in self._seen:
            return  # met before in another owner's queue
        self._seen.add(task.id)
        capacities = self.state.resources
        if not fits(rkey, self.tally, capacities):
            self._walk.drop_group(group)
            return
        may_run = (self.assistant and task.runnable) or self.worker_id in task.workers
        if may_run and fits(rkey, self.used, capacities):
            self.found = task
            return
        candidates = [*task.workers, self.worker_id] if self.assistant else task.workers
        spender = next((w for w in candidates if self.budget.get(w, 0) > 0), None)
        if spender is not None:
            self._spend(spender)
            add_amounts(self.tally, rkey)
        if owner == self.caller and self.budget.get(self.worker_id, 0) <= 0:
            if not fits(rkey, self.used, capacities):
                self._walk.drop_group(group)  # the caller can neither run nor reserve these

    def _spend(self, worker_id: str) -> None:
        self.budget[worker_id] -= 1
        if self.budget[worker_id] <= 0 and worker_id != self.worker_id:
            self._walk.drop_owner(worker_id)


def _active_processes(state: SchedulerState) -> dict[str, int]:
    """Declared processes of each worker that asked for work within ``worker_disconnect_delay``."""
    recent = state.clock() - state.config.worker_disconnect_delay
    return {
        worker.id: _declared_processes(worker.info)
        for worker in state.workers.values()
        if worker.last_get_work is not None and worker.last_get_work > recent
    }


def _declared_processes(info: dict[str, Any]) -> int:
    try:
        return int(info.get("workers", 1))
    except (TypeError, ValueError):
        return 1
