"""Time-ordered reminders, so pruning touches only what is due instead of walking every task and worker."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator

# What a task reminder is for; the stamp it carries must still match the task's field when it fires.
RETRY = "retry"  # FAILED -> PENDING once ``task.retry`` has passed
REMOVE = "remove"  # delete the task once ``task.remove`` is reached
REENABLE = "reenable"  # a scheduler-disabled task returns once ``disable_persist`` has passed


class Deadlines:
    """Two heaps: worker-silence checks and task reminders. Entries are validated by the caller."""

    def __init__(self) -> None:
        self._workers: list[tuple[float, int, str, float]] = []
        self._tasks: list[tuple[float, int, str, str, float]] = []
        self._seq = itertools.count()

    def remind_worker(self, when: float, worker_id: str, started: float) -> None:
        """Check at ``when`` whether the worker that started at ``started`` has gone silent."""
        heapq.heappush(self._workers, (when, next(self._seq), worker_id, started))

    def remind_task(self, when: float, kind: str, task_id: str, stamp: float) -> None:
        """Check at ``when`` whether the task's ``kind`` deadline (whose value is ``stamp``) is due."""
        heapq.heappush(self._tasks, (when, next(self._seq), kind, task_id, stamp))

    def due_workers(self, now: float) -> Iterator[tuple[str, float]]:
        """Pop (worker id, started) of every worker reminder at or before ``now``."""
        while self._workers and self._workers[0][0] <= now:
            _, _, worker_id, started = heapq.heappop(self._workers)
            yield worker_id, started

    def due_tasks(self, now: float) -> Iterator[tuple[str, str, float]]:
        """Pop (kind, task id, stamp) of every task reminder at or before ``now``, earliest first.

        Reminders added while iterating are seen too, so re-file a not-yet-due one only after the loop.
        """
        while self._tasks and self._tasks[0][0] <= now:
            _, _, kind, task_id, stamp = heapq.heappop(self._tasks)
            yield kind, task_id, stamp

    def next_due(self) -> float | None:
        """The earliest reminder's time (a stale one included: it is dropped when it fires), or None."""
        heads = [heap[0][0] for heap in (self._workers, self._tasks) if heap]
        return min(heads) if heads else None

    def __len__(self) -> int:
        return len(self._workers) + len(self._tasks)
