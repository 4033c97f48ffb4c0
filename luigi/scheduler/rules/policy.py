"""Scheduling rules as small pure functions: when failures disable a task, its notice, batch ids."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from luigi.scheduler.model.records import TaskRecord
from luigi.scheduler.settings import BACKOFF_EXPONENTIAL, BACKOFF_LINEAR

# Doublings an exponential backoff makes at most (past this a float would only overflow).
_MAX_DOUBLINGS = 60

# -- retry and disable -------------------------------------------------------------------------------------


def has_excessive_failures(task: TaskRecord, now: float) -> bool:
    """True once ``retry_count`` failures fall in the window, or ``disable_hard_timeout`` has passed."""
    policy = task.retry_policy
    if task.first_failure_time is not None and now >= task.first_failure_time + policy.disable_hard_timeout:
        return True
    return task.failures_in_window(now) >= policy.retry_count


def retry_number(task: TaskRecord) -> int:
    """Which retry the task's next one is: its failures still counted (1 after the first)."""
    return max(1, len(task.failure_times))


def retry_delay(task: TaskRecord, scheduler_delay: float) -> float:
    """Seconds a task that has just failed waits before its retry, by its backoff policy.

    ``fixed`` (Luigi's): the base every time; ``linear``: base times the retry number; ``exponential``:
    base doubled each retry. Capped by ``retry_max_delay`` (0: no cap), then spread by ``retry_jitter``
    (a fraction) either way, by a hash of the task and retry number: no random state, the same each time.
    """
    policy = task.retry_policy
    base = scheduler_delay if policy.retry_delay is None else float(policy.retry_delay)
    number = retry_number(task)
    if policy.retry_backoff == BACKOFF_LINEAR:
        delay = base * number
    elif policy.retry_backoff == BACKOFF_EXPONENTIAL:
        delay = base * 2.0 ** min(number - 1, _MAX_DOUBLINGS)
    else:
        delay = base
    if policy.retry_max_delay > 0:
        delay = min(delay, policy.retry_max_delay)
    if policy.retry_jitter > 0:
        delay *= 1.0 + policy.retry_jitter * _spread(task.id, number)
    return max(0.0, delay)


def _spread(task_id: str, number: int) -> float:
    """A number in [-1, 1) that looks random but depends only on the task and the retry number."""
    digest = hashlib.blake2b(f"{task_id}:{number}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**63 - 1.0


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
