"""What fits: units held by running tasks against capacities, and what higher-ranked work reserves.

Before a task that needs resources is chosen, higher-ranked ready tasks that other active workers with
free slots could take reserve their resources first (Luigi's greedy reservation, approximated by each
competing group's best task), so a low-priority task does not take a resource a higher-priority task
is about to need. A resource that is not configured has capacity 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from luigi.scheduler.model.ready import RankKey
from luigi.scheduler.model.records import ResourceKey, TaskRecord
from luigi.scheduler.model.state import SchedulerState
from luigi.task_status import RUNNING


def capacity(capacities: Mapping[str, Any], name: str) -> Any:
    """A resource's capacity; one that is not configured has capacity 1."""
    return capacities.get(name, 1)


def fits(needed: Iterable[tuple[str, Any]], used: Mapping[str, Any], capacities: Mapping[str, Any]) -> bool:
    """Whether ``needed`` (name, amount) pairs fit next to what is ``used``."""
    return all(amount + used.get(name, 0) <= capacity(capacities, name) for name, amount in needed)


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


class ResourceView:
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
            self._used = used_resources(self.state.by_status[RUNNING].values())
        return self._used

    def grantable(self, key: RankKey, rkey: ResourceKey) -> bool:
        """Whether a task needing ``rkey`` fits now, after higher-ranked tasks of others reserve theirs."""
        capacities = self.state.resources
        if not fits(rkey, self.used, capacities):
            return False
        reserved = self._reserved_above(key, rkey)
        if not reserved:
            return True
        total = dict(self.used)
        add_amounts(total, reserved.items())
        return fits(rkey, total, capacities)

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
                if not fits(other, self.used, self.state.resources):
                    continue  # it cannot start either, so it reserves nothing
                slots[owner] -= 1
                counted.add(head[2])
                add_amounts(reserved, other)
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
