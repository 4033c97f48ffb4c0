"""Scheduling rules as small pure functions: failure counting, resource fit, batch ids."""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from luigi.scheduler.records import TaskRecord

# -- retry and disable -------------------------------------------------------------------------------------


def record_failure(task: TaskRecord, now: float) -> None:
    """Remember one failure at ``now``."""
    if task.first_failure_time is None:
        task.first_failure_time = now
    task.failure_times.append(now)


def clear_failures(task: TaskRecord) -> None:
    """Forget every recorded failure (re-enabling)."""
    task.failure_times.clear()
    task.first_failure_time = None


def failures_in_window(task: TaskRecord, now: float) -> int:
    """Failures within the task's ``disable_window`` seconds (older ones are forgotten)."""
    cutoff = now - task.retry_policy.disable_window
    stale = bisect.bisect_left(task.failure_times, cutoff)
    if stale:
        del task.failure_times[:stale]
    return len(task.failure_times)


def has_excessive_failures(task: TaskRecord, now: float) -> bool:
    """True once ``retry_count`` failures fall in the window, or ``disable_hard_timeout`` has passed."""
    policy = task.retry_policy
    if task.first_failure_time is not None and now >= task.first_failure_time + policy.disable_hard_timeout:
        return True
    return failures_in_window(task, now) >= policy.retry_count


def disable_email(task: TaskRecord, disable_persist: float) -> tuple[str, str]:
    """Subject and body of the notice sent when the scheduler disables a task."""
    policy = task.retry_policy
    subject = f"Luigi Scheduler: DISABLED {task.id} due to excessive failures"
    body = (
        f"{task.id} failed {policy.retry_count} times in the last {policy.disable_window} seconds, "
        f"so it is being disabled for {disable_persist} seconds"
    )
    return subject, body


# -- resources ---------------------------------------------------------------------------------------------


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


# -- batches -----------------------------------------------------------------------------------------------


def batch_id_for(task_ids: Iterable[str]) -> str:
    """The id of a batch: md5 of the member ids joined by ``|`` (as Luigi computes it)."""
    return hashlib.md5("|".join(task_ids).encode("utf-8"), usedforsecurity=False).hexdigest()
