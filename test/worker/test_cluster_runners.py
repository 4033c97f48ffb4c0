"""What every cluster executor promises (Dask, Ray), each test run against a real cluster of each.

The luigi worker walks the graph and talks to the scheduler; its tasks run on the cluster, and reports,
events, scheduler messages, dynamic dependencies, failures and timeouts behave as in a local run. What only
one executor does (Dask's fallback, a lost worker on each) is in ``test_dask_runner``/``test_ray_runner``.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Protocol

import pytest
from helpers.dask_tasks import (
    FailsOnDask,
    ListensOnDask,
    RecordsWhereItRan,
    SleepsPastItsTimeout,
    WaitsForItsStartEvent,
    YieldsADependency,
)
from helpers.luigid import pid_alive, wait_until
from helpers.scheduler import LockedScheduler

from luigi.event import Event
from luigi.scheduler import Scheduler
from luigi.task import Task
from luigi.task_status import DONE, RUNNING
from luigi.worker import Worker
from luigi.worker.cluster_runner import ClusterRunner, Submitted
from luigi.worker.remote_run import EVENT, REPORT, RemoteRun
from luigi.worker.task_process import TaskOutcome, TaskRunOptions

pytest_plugins = ["helpers.dask_cluster", "helpers.ray_cluster"]


class Cluster(Protocol):
    def configure(self, **worker_options: str) -> None: ...

    def worker_pids(self) -> set[int]: ...

    def workers_alive(self) -> bool: ...


@pytest.fixture(params=["dask", "ray"])
def cluster(request: pytest.FixtureRequest) -> Cluster:
    """A real cluster of each executor (``helpers.dask_cluster``, ``helpers.ray_cluster``)."""
    found: Cluster = request.getfixturevalue(f"{request.param}_cluster")
    return found


def test_status_messages_and_progress_from_the_cluster_reach_the_scheduler(
    cluster: Cluster, tmp_path: Path
) -> None:
    cluster.configure()
    scheduler = Scheduler()
    task = RecordsWhereItRan(str(tmp_path), 7, 0.5)
    with Worker(scheduler=scheduler) as worker:
        worker.add(task)
        assert worker.run() is True
    assert scheduler.get_task_status_message(task.task_id)["statusMessage"] == "working on 7"
    assert scheduler.get_task_progress_percentage(task.task_id)["progressPercentage"] == 50


def test_a_failure_on_the_cluster_fails_the_task_with_the_remote_traceback_and_fires_here(
    cluster: Cluster, tmp_path: Path, events
) -> None:
    seen, listen = events
    listen(Event.START, Event.FAILURE, Event.SUCCESS)
    cluster.configure()
    scheduler = Scheduler()
    task = FailsOnDask(str(tmp_path))
    with Worker(scheduler=scheduler) as worker:
        worker.add(task)
        assert worker.run() is False
    error = scheduler.fetch_error(task.task_id)["error"]
    assert "Traceback" in error and "ValueError: broken on purpose in pid" in error
    assert f"in pid {os.getpid()}" not in error
    assert [name for name, _ in seen] == [Event.START, Event.FAILURE]
    assert all(args[0] is task for _, args in seen)
    assert isinstance(seen[1][1][1], ValueError)


def test_events_of_a_task_run_on_the_cluster_fire_in_the_worker_process(
    cluster: Cluster, tmp_path: Path, events
) -> None:
    seen, listen = events
    listen(Event.START, Event.SUCCESS, Event.PROCESSING_TIME)
    cluster.configure()
    task = RecordsWhereItRan(str(tmp_path), 1, 0.0)
    with Worker(scheduler=Scheduler()) as worker:
        worker.add(task)
        assert worker.run() is True
    assert [name for name, _ in seen] == [Event.START, Event.PROCESSING_TIME, Event.SUCCESS]
    assert seen[0][1] == (task,)


@pytest.mark.parametrize("timed", [False, True], ids=["in-thread", "in-a-slot"])
def test_events_fire_in_the_worker_process_while_the_task_still_runs_on_the_cluster(
    cluster: Cluster, tmp_path: Path, timed: bool
) -> None:
    seen: list[str] = []

    def on_start(task: Task) -> None:
        seen.append(Event.START)
        (tmp_path / "start-seen").touch()  # the task on the cluster waits for this before it finishes

    def on_success(task: Task) -> None:
        seen.append(Event.SUCCESS)

    cluster.configure()
    task = WaitsForItsStartEvent(str(tmp_path), timed)
    try:
        Task.event_handler(Event.START)(on_start)
        Task.event_handler(Event.SUCCESS)(on_success)
        with Worker(scheduler=Scheduler()) as worker:
            worker.add(task)
            assert worker.run() is True
    finally:
        Task.remove_event_handler(Event.START, on_start)
        Task.remove_event_handler(Event.SUCCESS, on_success)
    assert task.complete()
    assert seen == [Event.START, Event.SUCCESS]


@pytest.mark.parametrize("timed", [False, True], ids=["in-thread", "in-a-slot"])
def test_scheduler_messages_reach_a_task_on_the_cluster_which_answers_them(
    cluster: Cluster, tmp_path: Path, timed: bool
) -> None:
    cluster.configure()
    scheduler = LockedScheduler(Scheduler(send_messages=True))
    task = ListensOnDask(str(tmp_path), timed)
    with Worker(scheduler=scheduler, ping_interval=0.05) as worker:
        worker.add(task)
        runner = threading.Thread(target=worker.run)
        runner.start()
        wait_until(lambda: scheduler.task_list(RUNNING, "").get(task.task_id), 60, "the task to run")
        sent = scheduler.send_scheduler_message(worker=worker._id, task=task.task_id, content="ping?")
        answer = wait_until(
            lambda: scheduler.get_scheduler_message_response(task.task_id, sent["message_id"])["response"],
            60,
            "the task's answer",
        )
        runner.join(timeout=60)
    assert not runner.is_alive()
    assert (tmp_path / f"heard-{timed}").read_text() == "ping?"
    heard_in = int(answer.rsplit(" ", 1)[1])
    assert answer.startswith("heard ping? in ") and heard_in != os.getpid()


def test_dynamic_dependencies_yielded_on_the_cluster_are_scheduled_and_run_there(
    cluster: Cluster, tmp_path: Path
) -> None:
    cluster.configure()
    scheduler = Scheduler()
    parent = YieldsADependency(str(tmp_path))
    with Worker(scheduler=scheduler) as worker:
        worker.add(parent)
        assert worker.run() is True
    record = json.loads(Path(parent.output().path).read_text())
    assert {record["dependency"]["pid"], record["parent"]["pid"]} <= cluster.worker_pids()
    dependency = RecordsWhereItRan(str(tmp_path), 99, 0.0)
    assert scheduler.task_list(DONE, "").keys() == {parent.task_id, dependency.task_id}


def test_a_task_past_its_timeout_fails_and_its_work_on_the_cluster_worker_is_killed(
    cluster: Cluster, tmp_path: Path, events
) -> None:
    seen, listen = events
    listen(Event.TIMEOUT)
    cluster.configure()
    scheduler = Scheduler()
    task = SleepsPastItsTimeout(str(tmp_path))
    with Worker(scheduler=scheduler) as worker:
        worker.add(task)
        assert worker.run() is False
    assert "timed out after 1.0 seconds" in scheduler.fetch_error(task.task_id)["error"]
    sleeper = int((tmp_path / "sleeper.pid").read_text())
    assert sleeper not in cluster.worker_pids()
    wait_until(lambda: not pid_alive(sleeper), 10, "the timed-out task's process to be killed")
    assert cluster.workers_alive()
    assert [name for name, _ in seen] == [Event.TIMEOUT]


class _Numbered(Task):
    """A task whose run's channel messages a test delivers by hand, in any order."""


class _DeliversOutOfOrder(ClusterRunner):
    """A cluster whose channel delivers a run's messages in the order a test says; some only once the run's
    outcome is asked for (after its end was seen), as a transport without ordering may."""

    def __init__(self, scheduler: Any, early: list[dict[str, Any]], late: list[dict[str, Any]]) -> None:
        super().__init__(scheduler, TaskRunOptions(worker_id="w"), lambda task_id: None)
        self._early, self._late = early, late
        self.run_key = ""

    def _submit(self, payload: Any, options: Any, run_key: str, timeout: Any, deadline: Any) -> Any:
        self.run_key = run_key
        return object()

    def deliver_run(self, handle: Any) -> None:
        for message in self._early:
            self._wakeups.put(("report", {**message, "run": self.run_key}))
        self._wakeups.put(("done", handle))

    def _result(self, submitted: Submitted) -> RemoteRun:
        for message in self._late:
            self._wakeups.put(("report", {**message, "run": self.run_key}))
        outcome = TaskOutcome(submitted.task.task_id, DONE, "")
        return RemoteRun(outcome, sent=len({message["seq"] for message in self._early + self._late}))


def test_a_runs_reports_and_events_apply_in_the_order_it_sent_them_whatever_order_they_arrive_in() -> None:
    task = _Numbered()
    said: list[tuple[str, str]] = []

    class Recorder:
        def set_task_status_message(self, task_id: str, message: str) -> None:
            said.append(("status", message))

    def number(seq: int, **message: Any) -> dict[str, Any]:
        return {"task_id": task.task_id, "seq": seq, **message}

    def event(seq: int, name: str) -> dict[str, Any]:
        return number(seq, kind=EVENT, event=name, args=[None], task_at=[0])

    def status(seq: int, text: str) -> dict[str, Any]:
        return number(seq, kind=REPORT, report="update_status_message", args=[text])

    early = [status(3, "last"), event(1, "custom.second")]
    late = [event(4, "custom.fifth"), event(0, "custom.first"), status(2, "third")]
    runner = _DeliversOutOfOrder(Recorder(), early, late)
    handlers = {name: (lambda *args, _name=name: said.append(("event", _name))) for name in EVENT_NAMES}
    for name, handler in handlers.items():
        _Numbered.event_handler(name)(handler)
    try:
        runner.start(task, None)
        runner.deliver_run(runner._running[task.task_id].handle)
        outcomes = runner.collect()
    finally:
        for name, handler in handlers.items():
            _Numbered.remove_event_handler(name, handler)
    assert [outcome.status for outcome in outcomes] == [DONE]
    assert said == [
        ("event", "custom.first"),
        ("event", "custom.second"),
        ("status", "third"),
        ("status", "last"),
        ("event", "custom.fifth"),
    ]


EVENT_NAMES = ("custom.first", "custom.second", "custom.fifth")
