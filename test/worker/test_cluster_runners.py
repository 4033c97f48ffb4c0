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
from typing import Protocol

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
