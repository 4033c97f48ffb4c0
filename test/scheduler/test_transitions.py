"""Status rules of the scheduler (LUIGI_COMPAT f.3): what each report does to a task's status."""

from __future__ import annotations

import pytest
from helpers.scheduler import WORKER, RecordingHistory, granted, make_scheduler, status_of

from luigi.scheduler import ManualClock, Scheduler, SchedulerConfig

OTHER = "other-worker"


def running_task(sch: Scheduler, task_id: str = "A", worker: str = WORKER) -> None:
    sch.add_task(worker=worker, task_id=task_id)
    assert granted(sch, worker) == task_id


@pytest.mark.parametrize(
    ("reported", "expected"),
    [
        ("PENDING", "PENDING"),
        ("DONE", "DONE"),
        ("FAILED", "FAILED"),
        ("DISABLED", "DISABLED"),
        ("UNKNOWN", "UNKNOWN"),
        ("SUSPENDED", "PENDING"),
    ],
)
def test_a_new_task_takes_the_reported_status(reported, expected):
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A", status=reported)
    assert status_of(sch, "A") == expected


@pytest.mark.parametrize(
    ("reporter", "reported", "new_deps", "expected"),
    [
        (OTHER, "PENDING", None, "RUNNING"),
        (OTHER, "DONE", None, "RUNNING"),
        (OTHER, "FAILED", None, "RUNNING"),
        (WORKER, "DONE", None, "DONE"),
        (WORKER, "FAILED", None, "FAILED"),
        (WORKER, "PENDING", ["B"], "PENDING"),
        (OTHER, "PENDING", ["B"], "PENDING"),
        (WORKER, "DISABLED", None, "RUNNING"),
    ],
)
def test_only_the_runner_or_new_deps_change_a_running_task(reporter, reported, new_deps, expected):
    sch, _ = make_scheduler()
    running_task(sch)
    sch.add_task(worker=reporter, task_id="A", status=reported, new_deps=new_deps)
    assert status_of(sch, "A") == expected


def test_an_explicitly_disabled_task_stays_disabled_until_done():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A", status="DISABLED")
    assert sch.task_list("DISABLED")["A"]["re_enable_able"] is False
    sch.add_task(worker=WORKER, task_id="A", status="DONE")
    assert status_of(sch, "A") == "DONE"


def test_a_scheduler_disabled_task_ignores_pending_and_failed_reports():
    sch, _ = make_scheduler(retry_count=1)
    sch.add_task(worker=WORKER, task_id="A", status="FAILED")
    assert status_of(sch, "A") == "DISABLED"
    for status in ("PENDING", "FAILED", "RUNNING"):
        sch.add_task(worker=WORKER, task_id="A", status=status)
        assert status_of(sch, "A") == "DISABLED"


def test_done_re_enables_a_scheduler_disabled_task():
    sch, _ = make_scheduler(retry_count=1)
    sch.add_task(worker=WORKER, task_id="A", status="FAILED")
    sch.add_task(worker=WORKER, task_id="A", status="DONE")
    assert status_of(sch, "A") == "DONE"


def test_a_pending_report_right_after_done_is_ignored():
    sch, clock = make_scheduler(stable_done_cooldown_secs=10)
    sch.add_task(worker=WORKER, task_id="A", status="DONE")
    clock.advance(5)
    sch.add_task(worker=OTHER, task_id="A", status="PENDING")
    assert status_of(sch, "A") == "DONE"
    assert granted(sch, OTHER) is None


def test_a_pending_report_after_the_cooldown_reschedules_the_task():
    sch, clock = make_scheduler(stable_done_cooldown_secs=10)
    sch.add_task(worker=WORKER, task_id="A", status="DONE")
    clock.advance(11)
    sch.add_task(worker=OTHER, task_id="A", status="PENDING")
    assert status_of(sch, "A") == "PENDING"
    assert granted(sch, OTHER) == "A"


def test_a_disabled_worker_cannot_create_or_update_tasks():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A", status="FAILED")
    sch.disable_worker(worker=WORKER)
    sch.add_task(worker=WORKER, task_id="B")
    sch.add_task(worker=WORKER, task_id="A", status="PENDING")
    assert status_of(sch, "B") is None
    assert status_of(sch, "A") == "FAILED"


def test_a_disabled_worker_may_still_finish_its_running_task():
    sch, _ = make_scheduler()
    running_task(sch)
    sch.disable_worker(worker=WORKER)
    sch.add_task(worker=WORKER, task_id="A", status="DONE")
    assert status_of(sch, "A") == "DONE"


def test_an_unknown_status_is_refused_with_its_name():
    sch, _ = make_scheduler()
    with pytest.raises(ValueError, match="unknown status 'BROKEN'"):
        sch.add_task(worker=WORKER, task_id="A", status="BROKEN")


def test_mark_as_done_applies_to_running_failed_and_disabled_tasks_only():
    sch, _ = make_scheduler()
    running_task(sch, "R")
    sch.add_task(worker=WORKER, task_id="F", status="FAILED")
    sch.add_task(worker=WORKER, task_id="D", status="DISABLED")
    sch.add_task(worker=WORKER, task_id="P")
    assert sch.mark_as_done(task_id="R") == {"task_id": "R", "status": "DONE"}
    assert sch.mark_as_done(task_id="F") == {"task_id": "F", "status": "DONE"}
    assert sch.mark_as_done(task_id="D") == {"task_id": "D", "status": "DONE"}
    assert sch.mark_as_done(task_id="P") == {"task_id": "P", "status": "PENDING"}
    assert sch.mark_as_done(task_id="nope") == {"task_id": "nope", "status": None}


def test_forgive_failures_turns_failed_into_pending_only():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="F", status="FAILED")
    sch.add_task(worker=WORKER, task_id="D", status="DONE")
    assert sch.forgive_failures(task_id="F") == {"task_id": "F", "status": "PENDING"}
    assert sch.forgive_failures(task_id="D") == {"task_id": "D", "status": "DONE"}
    assert sch.forgive_failures(task_id="nope") == {"task_id": "nope", "status": None}


def test_history_hears_of_pending_running_and_finished_transitions():
    history = RecordingHistory()
    sch = Scheduler(SchedulerConfig(), clock=ManualClock(0), task_history=history)
    sch.add_task(worker=WORKER, task_id="A")
    sch.get_work(worker=WORKER, host="box1")
    sch.add_task(worker=WORKER, task_id="A", status="DONE")
    sch.add_task(worker=WORKER, task_id="B", status="FAILED")
    assert history.events == [
        ("scheduled", "A", None),
        ("started", "A", "box1"),
        ("finished", "A", True),
        ("finished", "B", False),
    ]


def test_a_failing_history_does_not_stop_scheduling(caplog):
    class BrokenHistory(RecordingHistory):
        def task_scheduled(self, task):
            raise RuntimeError("database is down")

    sch = Scheduler(SchedulerConfig(), clock=ManualClock(0), task_history=BrokenHistory())
    sch.add_task(worker=WORKER, task_id="A")
    assert granted(sch) == "A"
    assert "Error saving Task history" in caplog.text


def test_has_task_history_reports_the_option():
    assert make_scheduler()[0].has_task_history() is False
    sch = Scheduler(SchedulerConfig(record_task_history=True), task_history=RecordingHistory())
    assert sch.has_task_history() is True


def test_the_default_clock_follows_a_patched_luigi_scheduler_time(monkeypatch):
    import luigi.scheduler

    class FrozenTime:
        @staticmethod
        def time():
            return 1234.5

    monkeypatch.setattr(luigi.scheduler, "time", FrozenTime)
    sch = Scheduler(SchedulerConfig())
    sch.add_task(worker=WORKER, task_id="A")
    assert sch.task_list()["A"]["start_time"] == 1234.5


def test_the_default_clock_follows_a_patched_time_time(monkeypatch):
    import time

    monkeypatch.setattr(time, "time", lambda: 42.0)
    sch = Scheduler(SchedulerConfig())
    sch.add_task(worker=WORKER, task_id="A")
    assert sch.task_list()["A"]["last_updated"] == 42.0
