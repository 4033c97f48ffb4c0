"""The worker schedules a task graph and runs what the scheduler grants (COMPAT b.2, b.5, f.3).

These tests run in-process (one worker process, no timeout), so event callbacks and task state are visible
to the test directly.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable

import pytest
from helpers.luigid import wait_until

from luigi import configuration, interface, notifications
from luigi.event import Event
from luigi.execution_summary import LuigiStatusCode
from luigi.local_target import LocalTarget
from luigi.parameter import IntParameter, Parameter
from luigi.scheduler import Scheduler
from luigi.task import DynamicRequirements, ExternalTask, Task, WrapperTask
from luigi.task_status import DONE, FAILED, PENDING, UNKNOWN
from luigi.worker import TaskException, Worker


@pytest.fixture
def sent_emails(monkeypatch):
    sent = []
    monkeypatch.setattr(
        notifications, "send_error_email", lambda subject, message, *a, **k: sent.append(subject)
    )
    return sent


def file_task_classes(tmp_path):
    """A task writing ``<name>.done`` and appending its name to ``order.log`` when it runs."""

    class FileTask(Task):
        name = Parameter()

        def output(self):
            return LocalTarget(str(tmp_path / f"{self.name}.done"))

        def run(self):
            with open(tmp_path / "order.log", "a") as log:
                log.write(self.name + "\n")
            with self.output().open("w") as out:
                out.write("ok")

    return FileTask


def run_order(tmp_path):
    log = tmp_path / "order.log"
    return log.read_text().split() if log.exists() else []


def statuses(scheduler):
    return {task_id: task["status"] for task_id, task in scheduler.task_list("", "").items()}


# -- add: what the worker reports ----------------------------------------------------------------------


def test_add_reports_incomplete_task_pending_with_its_dependencies(tmp_path):
    FileTask = file_task_classes(tmp_path)

    class Root(WrapperTask):
        def requires(self):
            return [FileTask(name="a"), FileTask(name="b")]

    scheduler = Scheduler()
    worker = Worker(scheduler=scheduler)
    assert worker.add(Root()) is True
    assert statuses(scheduler) == {
        Root().task_id: PENDING,
        FileTask(name="a").task_id: PENDING,
        FileTask(name="b").task_id: PENDING,
    }
    assert [(task, status, runnable) for task, status, runnable in worker._add_task_history] == [
        (Root(), PENDING, True),
        (FileTask(name="a"), PENDING, True),
        (FileTask(name="b"), PENDING, True),
    ]


def test_add_reports_complete_task_done_and_does_not_walk_its_requirements(tmp_path):
    FileTask = file_task_classes(tmp_path)
    (tmp_path / "top.done").write_text("")

    class Top(FileTask):
        def requires(self):
            return FileTask(name="never-checked")

    worker = Worker(scheduler=Scheduler())
    worker.add(Top(name="top"))
    assert worker._add_task_history == [(Top(name="top"), DONE, False)]


def test_error_in_complete_reports_unknown_and_emails(tmp_path, sent_emails, events):
    seen, listen = events
    listen(Event.DEPENDENCY_MISSING)

    class Broken(Task):
        def complete(self):
            raise OSError("storage offline")

    worker = Worker(scheduler=Scheduler())
    assert worker.add(Broken()) is False
    assert worker._add_task_history == [(Broken(), UNKNOWN, False)]
    assert seen == [(Event.DEPENDENCY_MISSING, (Broken(),))]
    assert len(sent_emails) == 1
    assert sent_emails[0].startswith("Luigi: Broken() failed scheduling. Host: ")


def test_error_in_requires_reports_unknown_and_fires_broken_task(events, sent_emails):
    seen, listen = events
    listen(Event.BROKEN_TASK)

    class BadRequires(Task):
        def complete(self):
            return False

        def requires(self):
            raise ValueError("no such partition")

    worker = Worker(scheduler=Scheduler())
    assert worker.add(BadRequires()) is False
    assert worker._add_task_history == [(BadRequires(), UNKNOWN, False)]
    [(name, (task, exc))] = seen
    assert (name, task, str(exc)) == (Event.BROKEN_TASK, BadRequires(), "no such partition")
    assert sent_emails and "failed scheduling" in sent_emails[0]


def test_requires_returning_a_non_task_is_a_clear_error():
    class Odd(Task):
        def complete(self):
            return False

        def requires(self):
            return ["not a task"]

    from luigi.worker import TaskException

    with pytest.raises(TaskException, match="must return Task objects.*'not a task'"):
        Worker(scheduler=Scheduler()).add(Odd())


def test_adding_something_that_is_not_a_task_instance_is_a_clear_error():
    class Lonely(Task):
        pass

    from luigi.worker import TaskException

    with pytest.raises(TaskException, match="Can not schedule non-task"):
        Worker(scheduler=Scheduler()).add(Lonely)


def test_disabled_task_is_reported_disabled():
    class Off(Task):
        disabled = True

        def complete(self):
            return False

    worker = Worker(scheduler=Scheduler())
    worker.add(Off())
    assert worker._add_task_history == [(Off(), "DISABLED", True)]


def test_dependency_events_fire_during_add(tmp_path, events):
    seen, listen = events
    listen(Event.DEPENDENCY_DISCOVERED, Event.DEPENDENCY_PRESENT, Event.DEPENDENCY_MISSING)
    FileTask = file_task_classes(tmp_path)
    (tmp_path / "present.done").write_text("")

    class Missing(ExternalTask):
        def output(self):
            return LocalTarget(str(tmp_path / "absent"))

    class Root(WrapperTask):
        def requires(self):
            return [FileTask(name="present"), Missing()]

    Worker(scheduler=Scheduler()).add(Root())
    assert (Event.DEPENDENCY_DISCOVERED, (Root(), FileTask(name="present"))) in seen
    assert (Event.DEPENDENCY_DISCOVERED, (Root(), Missing())) in seen
    assert (Event.DEPENDENCY_PRESENT, (FileTask(name="present"),)) in seen
    assert (Event.DEPENDENCY_MISSING, (Missing(),)) in seen


def test_parallel_scheduling_reports_the_same_graph(tmp_path):
    FileTask = file_task_classes(tmp_path)

    class Root(WrapperTask):
        def requires(self):
            return [FileTask(name=str(i)) for i in range(20)]

    serial, parallel = Worker(scheduler=Scheduler()), Worker(scheduler=Scheduler())
    serial.add(Root())
    parallel.add(Root(), multiprocess=True, processes=4)
    assert sorted(map(repr, serial._scheduled_tasks.values())) == sorted(
        map(repr, parallel._scheduled_tasks.values())
    )
    assert len(parallel._add_task_history) == 21


class Checked(Task):
    """Complete; defined at module level so that its check goes to a pool process."""

    i = IntParameter()

    def complete(self):
        return True


class SixChecked(Task):
    def requires(self):
        return [Checked(i=i) for i in range(6)]

    def complete(self):
        return False


def raised_under_a_sigterm_handler_that_does_not_exit(add: Callable[[], None]) -> list[BaseException]:
    """Runs ``add`` in a thread while SIGTERM's handler returns without exiting; what it raised, if anything.

    Ray's init installs a SIGTERM handler in the process (one that exits through Python); a user's may not
    exit at all. Pool processes inherit it, so a pool stopped with SIGTERM waits for them for ever: the
    add must still return.
    """
    raised: list[BaseException] = []
    returned = threading.Event()

    def run() -> None:
        try:
            add()
        except BaseException as exc:  # handed to the test thread, which asserts on it
            raised.append(exc)
        returned.set()

    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        threading.Thread(target=run, daemon=True).start()
        assert returned.wait(60), "the parallel add did not return: its pool processes outlived their stop"
    finally:
        signal.signal(signal.SIGTERM, previous)
    return raised


def test_parallel_scheduling_stops_its_pool_under_a_sigterm_handler_that_does_not_exit():
    workers = [Worker(scheduler=Scheduler()) for _ in range(20)]  # each stop a chance to catch it

    def add() -> None:
        for worker in workers:
            worker.add(SixChecked(), multiprocess=True, processes=2)

    assert raised_under_a_sigterm_handler_that_does_not_exit(add) == []
    for worker in workers:
        assert [status for _, status, _ in worker._add_task_history] == [PENDING] + [DONE] * 6


class CheckedSlowly(Task):
    """Its check, in a pool process, says it started (touches ``started``) and then outlasts any walk."""

    started = Parameter()

    def complete(self):
        open(self.started, "w").close()
        threading.Event().wait(600)  # a check still out when the walk fails; the pool stop ends it
        return True


class RequiresANonTask(Task):
    """Fails the walk (requires() returns a non-task) once ``CheckedSlowly``'s check is in a pool process."""

    started = Parameter()

    def complete(self):
        return False

    def requires(self):
        wait_until(lambda: os.path.exists(self.started), what="the slow check to start in a pool process")
        return ["not a task"]


class FailsWhileChecking(WrapperTask):
    started = Parameter()

    def requires(self):
        return [RequiresANonTask(started=self.started), CheckedSlowly(started=self.started)]


def test_a_parallel_add_failing_with_checks_in_flight_stops_its_pool_under_a_sigterm_handler_not_exiting(
    tmp_path,
):
    # The walk fails while a pool process is inside complete(): abandoning that check must not wait on it.
    def add() -> None:
        Worker(scheduler=Scheduler()).add(
            FailsWhileChecking(started=str(tmp_path / "started")), multiprocess=True, processes=2
        )

    raised = raised_under_a_sigterm_handler_that_does_not_exit(add)
    assert [type(exc) for exc in raised] == [TaskException]
    assert "must return Task objects" in str(raised[0])
    assert not [child for child in multiprocessing.active_children() if "PoolWorker" in child.name]


def test_completion_cache_asks_complete_once_per_task(tmp_path):
    calls = []

    class Shared(Task):
        def complete(self):
            calls.append(1)
            return True

    class Root(Task):
        n = IntParameter()

        def requires(self):
            return Shared()

        def complete(self):
            return False

    worker = Worker(scheduler=Scheduler(), cache_task_completion=True)
    worker.add(Root(n=1))
    assert worker.run() is True  # checking Root's dependency before its run uses the cache
    worker.add(Root(n=2))
    assert worker.run() is True
    assert len(calls) == 1


# -- building and running --------------------------------------------------------------------------------


def test_build_runs_dependencies_before_dependents(tmp_path):
    FileTask = file_task_classes(tmp_path)

    class Last(FileTask):
        def requires(self):
            return FileTask(name="first")

    assert interface.build([Last(name="last")], local_scheduler=True) is True
    assert run_order(tmp_path) == ["first", "last"]


def test_priorities_change_run_order_with_one_worker(tmp_path):
    FileTask = file_task_classes(tmp_path)

    class Prioritised(FileTask):
        level = IntParameter()

        @property
        def priority(self):
            return self.level

    class Root(WrapperTask):
        def requires(self):
            return [Prioritised(name=f"p{level}", level=level) for level in (1, 7, 3, 5)]

    assert interface.build([Root()], local_scheduler=True, workers=1) is True
    assert run_order(tmp_path) == ["p7", "p5", "p3", "p1"]


def test_events_fire_when_tasks_run(tmp_path, events):
    seen, listen = events
    listen(Event.START, Event.SUCCESS, Event.FAILURE, Event.PROCESSING_TIME)
    FileTask = file_task_classes(tmp_path)

    class Fails(Task):
        def complete(self):
            return False

        def run(self):
            raise RuntimeError("boom")

    assert interface.build([FileTask(name="ok"), Fails()], local_scheduler=True) is False
    names = [(name, args[0]) for name, args in seen]
    assert (Event.START, FileTask(name="ok")) in names
    assert (Event.SUCCESS, FileTask(name="ok")) in names
    assert (Event.START, Fails()) in names
    [failure] = [args for name, args in seen if name == Event.FAILURE]
    assert failure[0] == Fails() and str(failure[1]) == "boom"
    [(task, seconds)] = [args for name, args in seen if name == Event.PROCESSING_TIME]
    assert task == FileTask(name="ok") and seconds >= 0


def test_failed_task_reports_on_failure_explanation_as_json(tmp_path):
    class Fails(Task):
        def complete(self):
            return False

        def run(self):
            raise RuntimeError("disk full")

    scheduler = Scheduler()
    worker = Worker(scheduler=scheduler)
    worker.add(Fails())
    assert worker.run() is False
    assert statuses(scheduler)[Fails().task_id] == FAILED
    error = scheduler.fetch_error(Fails().task_id)["error"]
    assert "Runtime error:" in error and "disk full" in error


def test_failure_email_has_luigis_subject_and_can_be_turned_off(sent_emails):
    class Fails(Task):
        def complete(self):
            return False

        def run(self):
            raise RuntimeError("nope")

    interface.build([Fails()], local_scheduler=True)
    assert len(sent_emails) == 1
    assert sent_emails[0].startswith("Luigi: Fails() FAILED. Host: ")

    sent_emails.clear()
    configuration.get_config().set("worker", "send_failure_email", "false")
    interface.build([Fails()], local_scheduler=True)
    assert sent_emails == []


def test_external_task_missing_leaves_dependents_pending(tmp_path):
    FileTask = file_task_classes(tmp_path)

    class Input(ExternalTask):
        def output(self):
            return LocalTarget(str(tmp_path / "input.csv"))

    class Report(FileTask):
        def requires(self):
            return Input()

    result = interface.build([Report(name="report")], local_scheduler=True, detailed_summary=True)
    assert result.status == LuigiStatusCode.MISSING_EXT
    assert (Input(), PENDING, False) in result.worker._add_task_history
    assert run_order(tmp_path) == []


def test_dynamic_dependencies_are_run_then_the_generator_resumes_with_their_outputs(tmp_path):
    FileTask = file_task_classes(tmp_path)
    received = []

    class Fanout(FileTask):
        def run(self):
            with open(tmp_path / "order.log", "a") as log:
                log.write("fan\n")  # run() starts over each time its new requirements are done
            first = yield FileTask(name="dyn1")
            rest = yield DynamicRequirements([FileTask(name="dyn2"), FileTask(name="dyn3")])
            received.append((first.path, [target.path for target in rest]))
            with self.output().open("w") as out:
                out.write("done")

    assert interface.build([Fanout(name="fan")], local_scheduler=True) is True
    assert run_order(tmp_path)[:2] == ["fan", "dyn1"]
    assert sorted(run_order(tmp_path)[2:]) == ["dyn2", "dyn3", "fan", "fan"]
    assert run_order(tmp_path)[-1] == "fan"
    assert received == [
        (str(tmp_path / "dyn1.done"), [str(tmp_path / "dyn2.done"), str(tmp_path / "dyn3.done")])
    ]


def test_task_limit_stops_scheduling_beyond_the_limit(tmp_path):
    FileTask = file_task_classes(tmp_path)

    class Root(WrapperTask):
        def requires(self):
            return [FileTask(name=str(i)) for i in range(4)]

    configuration.get_config().set("worker", "task_limit", "3")
    result = interface.build([Root()], local_scheduler=True, detailed_summary=True)
    history = result.worker._add_task_history
    assert [status for _, status, _ in history[:3]] == [PENDING, PENDING, PENDING]
    assert [(task, status) for task, status, _ in history[3:5]] == [
        (FileTask(name="2"), UNKNOWN),
        (FileTask(name="3"), UNKNOWN),
    ]
    assert sorted(run_order(tmp_path)) == ["0", "1"]
    assert result.status == LuigiStatusCode.SCHEDULING_FAILED


def test_unfulfilled_dependency_at_run_time_fails_and_reschedules_once(tmp_path):
    class Vanishing(Task):
        """Claims completeness at add time, but not when the dependent runs."""

        checks = []

        def complete(self):
            Vanishing.checks.append(1)
            return len(Vanishing.checks) == 1

    class Needy(Task):
        def requires(self):
            return Vanishing()

        def complete(self):
            return False

        def run(self):
            raise AssertionError("must not run with a missing dependency")

    scheduler = Scheduler()
    worker = Worker(scheduler=scheduler)
    worker.add(Needy())
    assert worker.run() is False
    error = scheduler.fetch_error(Needy().task_id)["error"]
    assert "Unfulfilled dependency at run time: " + Vanishing().task_id in error
    # Re-added once (max_reschedules=1): the dependency ran, but still was not complete the second time.
    assert [status for task, status, _ in worker._add_task_history if task == Needy()] == [
        PENDING,
        FAILED,
        PENDING,
        FAILED,
    ]
    assert [status for task, status, _ in worker._add_task_history if task == Vanishing()] == [DONE, PENDING]
    assert worker.unfulfilled_counts[Vanishing().task_id] == 2


def test_check_complete_on_run_fails_a_task_that_did_not_produce_its_output():
    class Forgetful(Task):
        def complete(self):
            return False

        def run(self):
            pass

    scheduler = Scheduler()
    worker = Worker(scheduler=scheduler, check_complete_on_run=True)
    worker.add(Forgetful())
    assert worker.run() is False
    assert "complete() is still returning false" in scheduler.fetch_error(Forgetful().task_id)["error"]


def test_sigusr1_stops_taking_new_work_after_the_running_task(tmp_path):
    FileTask = file_task_classes(tmp_path)

    class Signaller(FileTask):
        priority = 10

        def run(self):
            os.kill(os.getpid(), signal.SIGUSR1)
            super().run()

    scheduler = Scheduler()
    with Worker(scheduler=scheduler) as worker:
        worker.add(Signaller(name="first"))
        worker.add(FileTask(name="second"))
        assert worker.run() is True
    assert run_order(tmp_path) == ["first"]
    assert statuses(scheduler)[FileTask(name="second").task_id] == PENDING


def test_failed_task_is_retried_after_retry_delay_when_worker_keeps_alive(tmp_path):
    class FailsOnce(Task):
        def output(self):
            return LocalTarget(str(tmp_path / "out"))

        def run(self):
            attempts = tmp_path / "attempts"
            attempts.write_text(attempts.read_text() + "x" if attempts.exists() else "x")
            if len(attempts.read_text()) == 1:
                raise RuntimeError("first attempt fails")
            self.output().open("w").close()

    scheduler = Scheduler(retry_delay=0.2, prune_on_get_work=True)
    worker = Worker(scheduler=scheduler, keep_alive=True, wait_interval=0.05, wait_jitter=0.0)
    worker.add(FailsOnce())
    outcome = []
    runner = threading.Thread(target=lambda: outcome.append(worker.run()))
    started = time.monotonic()
    runner.start()
    runner.join(timeout=30)
    if runner.is_alive():
        worker.handle_interrupt(signal.SIGUSR1, None)  # let the thread end rather than outlive the test
        pytest.fail("the worker did not finish within 30 seconds")
    assert (tmp_path / "attempts").read_text() == "xx"
    assert FailsOnce().complete()
    assert statuses(scheduler)[FailsOnce().task_id] == DONE
    assert time.monotonic() - started >= 0.2
    assert [status for _, status, _ in worker._add_task_history] == [PENDING, FAILED, DONE]


def test_keep_alive_worker_gives_up_after_max_idle_duration(tmp_path):
    import datetime

    class Input(ExternalTask):
        def output(self):
            return LocalTarget(str(tmp_path / "never-arrives"))

    class Needs(Task):
        def requires(self):
            return Input()

        def complete(self):
            return False

    worker = Worker(
        scheduler=Scheduler(),
        keep_alive=True,
        wait_interval=0.02,
        wait_jitter=0.0,
        max_keep_alive_idle_duration=datetime.timedelta(seconds=0.3),
    )
    worker.add(Needs())
    finished = []
    runner = threading.Thread(target=lambda: finished.append(worker.run()))
    started = time.monotonic()
    runner.start()
    runner.join(timeout=30)
    if runner.is_alive():
        worker.handle_interrupt(signal.SIGUSR1, None)
        pytest.fail("the worker kept waiting past max_keep_alive_idle_duration")
    assert time.monotonic() - started >= 0.3
    assert finished == [True]
