"""Shared helpers for the scheduler tests: a scheduler on a manual clock, and small report shortcuts."""

from __future__ import annotations

import json
from typing import Any

from luigi.interface import _WorkerSchedulerFactory
from luigi.scheduler import ManualClock, Scheduler, SchedulerConfig
from luigi.worker.keep_alive import SerializedScheduler

WORKER = "myworker"
START = 1_000_000.0


def make_scheduler(clock: ManualClock | None = None, **options: Any) -> tuple[Scheduler, ManualClock]:
    """A scheduler with Luigi's defaults (not read from any file) plus ``options``, on a manual clock."""
    clock = clock or ManualClock(START)
    return Scheduler(SchedulerConfig(**options), clock=clock), clock


def status_of(sch: Scheduler, task_id: str) -> str | None:
    """The task's status as the task list reports it (None when the scheduler does not know it)."""
    for status, tasks in sch.task_search(task_id).items():
        if task_id in tasks:
            return status
    return None


def add_runnable(sch: Scheduler, worker: str, *task_ids: str) -> None:
    """``worker`` reports each of ``task_ids`` PENDING and runnable."""
    for task_id in task_ids:
        sch.add_task(worker=worker, task_id=task_id, status="PENDING", runnable=True)


def lose_silent_workers(sch: Scheduler, clock: ManualClock, worker_alive: str | None = None) -> None:
    """Let the disconnect delay pass (``worker_alive`` keeps pinging) and prune: the others are lost."""
    clock.advance(sch.config.worker_disconnect_delay + 1)
    if worker_alive:
        sch.ping(worker=worker_alive)
    sch.prune()


def granted(sch: Scheduler, worker: str = WORKER, **kwargs: Any) -> str | None:
    """The task id ``get_work`` hands ``worker`` (None when nothing)."""
    return sch.get_work(worker=worker, **kwargs)["task_id"]


def run_to_done(sch: Scheduler, worker: str = WORKER, limit: int = 1000) -> list[str]:
    """Grant and finish tasks until none is left; returns the ids in grant order."""
    order = []
    for _ in range(limit):
        task_id = granted(sch, worker)
        if task_id is None:
            return order
        order.append(task_id)
        sch.add_task(worker=worker, task_id=task_id, status="DONE")
    raise AssertionError("tasks kept coming")


class RecordingHistory:
    """A TaskHistory that remembers every call as (event, task id, extra)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []

    def task_scheduled(self, task: Any) -> None:
        self.events.append(("scheduled", task.id, None))

    def task_started(self, task: Any, worker_host: str | None) -> None:
        self.events.append(("started", task.id, worker_host))

    def task_finished(self, task: Any, successful: bool) -> None:
        self.events.append(("finished", task.id, successful))


def populated_scheduler():
    """A scheduler on a manual clock with a worker, a running task, a failed one and resources."""
    scheduler, clock = make_scheduler(resources={"cpu": 4})
    scheduler.add_worker(worker="w", info={"host": "h"})
    scheduler.add_task(worker="w", task_id="A", family="A", deps=["B"], priority=3)
    scheduler.add_task(worker="w", task_id="B", family="B", resources={"cpu": 1})
    scheduler.add_task(worker="w", task_id="C", family="C", status="FAILED", expl="broken")
    scheduler.get_work(worker="w", host="h")
    return scheduler


def snapshot(scheduler) -> str:
    """Everything a client can see of the state, as one comparable string."""
    views = [
        scheduler.task_list(),
        scheduler.worker_list(),
        scheduler.graph(),
        scheduler.resource_list(),
        scheduler.is_paused(),
        scheduler.count_pending(worker="w"),
    ]
    return json.dumps(views, sort_keys=True)


# The scheduler shared by the test thread and the worker's threads, one call at a time: the same
# lock-around-each-call view the worker puts over an in-process scheduler.
LockedScheduler = SerializedScheduler


class HeldSchedulerFactory(_WorkerSchedulerFactory):
    """Hands ``luigi.build(..., local_scheduler=True)`` the scheduler the test holds."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    def create_local_scheduler(self) -> Scheduler:
        return self.scheduler
