"""A run's log ends when its worker says so, or once the task no longer runs under that worker: a run
whose worker was lost or killed is not followed for ever (``cutShort`` says its end never came)."""

from __future__ import annotations

from pathlib import Path

from helpers.scheduler import START, add_runnable, granted, lose_silent_workers

from luigi.scheduler import ManualClock, Scheduler, SchedulerConfig
from luigi.scheduler.store.task_logs import TaskLogStore

TASK = "Chatty__99914b932b"


def scheduler_keeping_logs(tmp_path: Path) -> tuple[Scheduler, ManualClock]:
    clock = ManualClock(START)
    logs = TaskLogStore(str(tmp_path / "logs"), keep_days=0)
    return Scheduler(SchedulerConfig(), clock=clock, task_logs=logs), clock


def started_with_output(sch: Scheduler, clock: ManualClock, worker: str = "w1", run: str = "run-1") -> None:
    add_runnable(sch, worker, TASK)
    assert granted(sch, worker) == TASK
    clock.advance(1)
    sch.append_task_log(TASK, worker, run, 0, "working...\n", False)


def test_a_run_its_worker_still_runs_is_followed(tmp_path: Path) -> None:
    sch, clock = scheduler_keeping_logs(tmp_path)
    started_with_output(sch, clock)
    log = sch.task_log(TASK)
    assert log["chunk"] == "working...\n" and not log["ended"] and not log["cutShort"]
    assert not log["attempts"][0]["ended"]


def test_a_run_whose_worker_was_lost_has_ended_without_its_last_output(tmp_path: Path) -> None:
    sch, clock = scheduler_keeping_logs(tmp_path)
    started_with_output(sch, clock)
    lose_silent_workers(sch, clock)
    log = sch.task_log(TASK)
    assert log["chunk"] == "working...\n" and log["ended"] and log["cutShort"]
    assert log["attempts"][0]["ended"] and log["attempts"][0]["cutShort"]


def test_a_run_its_worker_ended_is_not_cut_short(tmp_path: Path) -> None:
    sch, clock = scheduler_keeping_logs(tmp_path)
    started_with_output(sch, clock)
    tail = {"run": "run-1", "offset": len("working...\n"), "chunk": "done\n"}
    sch.add_task(worker="w1", task_id=TASK, status="DONE", task_log=tail)
    log = sch.task_log(TASK)
    assert log["chunk"] == "working...\ndone\n" and log["ended"] and not log["cutShort"]


def test_a_killed_run_has_ended_once_its_worker_starts_the_task_again(tmp_path: Path) -> None:
    sch, clock = scheduler_keeping_logs(tmp_path)
    started_with_output(sch, clock)
    sch.add_task(worker="w1", task_id=TASK, status="FAILED", expl="its process was killed")
    clock.advance(sch.config.retry_delay + 1)
    sch.ping(worker="w1")
    sch.prune()  # the retry is due
    assert granted(sch, "w1") == TASK  # the next run, which has written nothing yet
    log = sch.task_log(TASK)
    assert log["attempt"] == 1 and log["ended"] and log["cutShort"]


def test_a_run_taken_for_ended_that_writes_on_under_its_worker_is_followed_again(tmp_path: Path) -> None:
    sch, clock = scheduler_keeping_logs(tmp_path)
    started_with_output(sch, clock)
    sch.add_task(worker="w1", task_id=TASK, status="FAILED", expl="its process was killed")
    assert sch.task_log(TASK)["cutShort"]
    clock.advance(1)
    sch.append_task_log(TASK, "w1", "run-1", len("working...\n"), "still here\n", False)  # same run, later
    add_runnable(sch, "w1", TASK)
    assert granted(sch, "w1") == TASK
    clock.advance(1)
    sch.append_task_log(TASK, "w1", "run-1", len("working...\nstill here\n"), "more\n", False)
    log = sch.task_log(TASK)
    assert log["chunk"] == "working...\nstill here\nmore\n" and not log["ended"]
