"""Scheduling rules as small pure functions: when failures disable a task, its notice, batch ids."""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable

from luigi.scheduler.model.records import TaskRecord

# -- retry and disable -------------------------------------------------------------------------------------


def failures_in_window(task: TaskRecord, now: float) -> int:
    """Failures within the task's ``disable_window`` seconds before ``now``."""
    cutoff = now - task.retry_policy.disable_window
    return len(task.failure_times) - bisect.bisect_left(task.failure_times, cutoff)


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


# -- batches -----------------------------------------------------------------------------------------------


def batch_id_for(task_ids: Iterable[str]) -> str:
    """The id of a batch: md5 of the member ids joined by ``|`` (as Luigi computes it)."""
    return hashlib.md5("|".join(task_ids).encode("utf-8"), usedforsecurity=False).hexdigest()
