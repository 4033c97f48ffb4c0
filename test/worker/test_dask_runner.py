"""The Dask executor: a worker that walks the graph and talks to the scheduler, its tasks run on a cluster."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from pathlib import Path

import pytest
from helpers.dask_cluster import TASK_MODULE, DaskCluster, scheduler_can_import
from helpers.dask_tasks import (
    FailsOnDask,
    FansOutOnDask,
    ListensOnDask,
    RecordsWhereItRan,
    RunsUntilCancelled,
    SleepsPastItsTimeout,
    WaitsForItsStartEvent,
    YieldsADependency,
)
from helpers.luigid import pid_alive, wait_until
from helpers.scheduler import LockedScheduler

import luigi
from luigi.event import Event
from luigi.scheduler import Scheduler
from luigi.scheduler.extensions import CANCELLED_EXPLANATION
from luigi.task import Task
from luigi.task_status import DONE, FAILED, RUNNING
from luigi.worker import Worker
from luigi.worker.dask_runner import DaskRunner, DaskUnavailableError

pytest_plugins = ["helpers.dask_cluster"]


def recorded_pids(root: Path) -> list[int]:
    return [json.loads(path.read_text())["pid"] for path in sorted(root.glob("pid-*.json"))]


def test_a_dask_worker_runs_its_tasks_spread_over_the_cluster_and_none_in_its_own_process(
    dask_cluster: DaskCluster, tmp_path: Path
) -> None:
    dask_cluster.configure()
    with Worker(scheduler=Scheduler(), worker_processes=4) as worker:
        assert isinstance(worker._runner, DaskRunner)
        worker.add(FansOutOnDask(str(tmp_path), 24))
        assert worker.run() is True
    pids = recorded_pids(tmp_path)
    assert len(pids) == 24
    assert set(pids) == dask_cluster.worker_pids()
    assert os.getpid() not in pids


def test_tasks_go_by_reference_so_a_dask_scheduler_without_their_module_runs_the_pipeline(
    dask_cluster: DaskCluster, tmp_path: Path
) -> None:
    assert not scheduler_can_import(TASK_MODULE, dask_cluster.scratch)  # as in a real deployment
    dask_cluster.configure()
    pipeline = FansOutOnDask(str(tmp_path), 8, 0.0)
    with Worker(scheduler=Scheduler(), worker_processes=2) as worker:
        worker.add(pipeline)
        assert worker.run() is True
    assert pipeline.complete()
    assert set(recorded_pids(tmp_path)) <= dask_cluster.worker_pids()


def test_a_task_not_importable_by_name_goes_by_dask_serialization_with_a_warning_and_runs(
    dask_cluster: DaskCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class DefinedInATest(luigi.Task):  # pickled by value: the Dask scheduler needs only luigi for it
        root = luigi.Parameter()

        def output(self) -> luigi.LocalTarget:
            return luigi.LocalTarget(os.path.join(self.root, "pid-local.json"))

        def run(self) -> None:
            with self.output().open("w") as out:
                json.dump({"pid": os.getpid()}, out)

    dask_cluster.configure()
    with caplog.at_level(logging.WARNING, logger="luigi-interface"), Worker(scheduler=Scheduler()) as worker:
        worker.add(DefinedInATest(str(tmp_path)))
        assert worker.run() is True
    assert set(recorded_pids(tmp_path)) <= dask_cluster.worker_pids()
    assert "DefinedInATest goes to the Dask workers by Dask's own serialization" in caplog.text
    assert "defined inside a function?" in caplog.text


def test_status_messages_and_progress_from_the_cluster_reach_the_scheduler(
    dask_cluster: DaskCluster, tmp_path: Path
) -> None:
    dask_cluster.configure()
    scheduler = Scheduler()
    task = RecordsWhereItRan(str(tmp_path), 7, 0.5)
    with Worker(scheduler=scheduler) as worker:
        worker.add(task)
        assert worker.run() is True
    assert scheduler.get_task_status_message(task.task_id)["statusMessage"] == "working on 7"
    assert scheduler.get_task_progress_percentage(task.task_id)["progressPercentage"] == 50


def test_a_failure_on_the_cluster_fails_the_task_with_the_remote_traceback_and_fires_here(
    dask_cluster: DaskCluster, tmp_path: Path, events
) -> None:
    seen, listen = events
    listen(Event.START, Event.FAILURE, Event.SUCCESS)
    dask_cluster.configure()
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
    dask_cluster: DaskCluster, tmp_path: Path, events
) -> None:
    seen, listen = events
    listen(Event.START, Event.SUCCESS, Event.PROCESSING_TIME)
    dask_cluster.configure()
    task = RecordsWhereItRan(str(tmp_path), 1, 0.0)
    with Worker(scheduler=Scheduler()) as worker:
        worker.add(task)
        assert worker.run() is True
    assert [name for name, _ in seen] == [Event.START, Event.PROCESSING_TIME, Event.SUCCESS]
    assert seen[0][1] == (task,)


@pytest.mark.parametrize("timed", [False, True], ids=["in-thread", "in-a-slot"])
def test_events_fire_in_the_worker_process_while_the_task_still_runs_on_the_cluster(
    dask_cluster: DaskCluster, tmp_path: Path, timed: bool
) -> None:
    seen: list[str] = []

    def on_start(task: Task) -> None:
        seen.append(Event.START)
        (tmp_path / "start-seen").touch()  # the task on the cluster waits for this before it finishes

    def on_success(task: Task) -> None:
        seen.append(Event.SUCCESS)

    dask_cluster.configure()
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
    dask_cluster: DaskCluster, tmp_path: Path, timed: bool
) -> None:
    dask_cluster.configure()
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
    dask_cluster: DaskCluster, tmp_path: Path
) -> None:
    dask_cluster.configure()
    scheduler = Scheduler()
    parent = YieldsADependency(str(tmp_path))
    with Worker(scheduler=scheduler) as worker:
        worker.add(parent)
        assert worker.run() is True
    record = json.loads(Path(parent.output().path).read_text())
    assert {record["dependency"]["pid"], record["parent"]["pid"]} <= dask_cluster.worker_pids()
    dependency = RecordsWhereItRan(str(tmp_path), 99, 0.0)
    assert scheduler.task_list(DONE, "").keys() == {parent.task_id, dependency.task_id}


def test_a_task_past_its_timeout_fails_and_its_work_on_the_dask_worker_is_killed(
    dask_cluster: DaskCluster, tmp_path: Path, events
) -> None:
    seen, listen = events
    listen(Event.TIMEOUT)
    dask_cluster.configure()
    scheduler = Scheduler()
    task = SleepsPastItsTimeout(str(tmp_path))
    with Worker(scheduler=scheduler) as worker:
        worker.add(task)
        assert worker.run() is False
    assert "timed out after 1.0 seconds" in scheduler.fetch_error(task.task_id)["error"]
    sleeper = int((tmp_path / "sleeper.pid").read_text())
    assert sleeper not in dask_cluster.worker_pids()
    wait_until(lambda: not pid_alive(sleeper), 10, "the timed-out task's process to be killed")
    assert all(process.poll() is None for process in dask_cluster.workers.values())
    assert [name for name, _ in seen] == [Event.TIMEOUT]


@pytest.mark.parametrize("timed", [True, False], ids=["in-a-slot", "in-a-dask-thread"])
def test_a_task_cancelled_on_the_cluster_fails_at_once_and_a_run_in_a_slot_is_killed_with_its_child(
    dask_cluster: DaskCluster, tmp_path: Path, timed: bool
) -> None:
    dask_cluster.configure()
    scheduler = LockedScheduler(Scheduler(retry_delay=0))
    task = RunsUntilCancelled(str(tmp_path), timed)
    pids_file = tmp_path / f"pids-{timed}"

    def cancel_once_started() -> None:
        wait_until(lambda: pids_file.exists() and len(pids_file.read_text().split()) == 2, 60, "the run")
        assert scheduler.cancel_task(task.task_id)["cancel_requested"] is True

    try:
        with Worker(scheduler=scheduler, ping_interval=0.1, wait_interval=0.1) as worker:
            worker.add(task)
            canceller = threading.Thread(target=cancel_once_started)
            canceller.start()
            assert worker.run() is False
            canceller.join()
        assert scheduler.task_list(FAILED, "").keys() == {task.task_id}
        assert json.loads(scheduler.fetch_error(task.task_id)["error"]) == CANCELLED_EXPLANATION
        run_pid, child = (int(pid) for pid in pids_file.read_text().split())
        if timed:  # the slot forked on the Dask worker, and the program the task started
            assert run_pid not in dask_cluster.worker_pids()
            wait_until(
                lambda: not pid_alive(run_pid) and not pid_alive(child), 5, "the slot and its child to die"
            )
        else:  # a Dask worker's thread: it cannot be killed, and runs on until the task lets go
            assert run_pid in dask_cluster.worker_pids()
    finally:
        (tmp_path / "stop").touch()
    assert all(process.poll() is None for process in dask_cluster.workers.values())


def test_a_dask_worker_killed_mid_run_fails_its_tasks_which_are_retried_and_the_pipeline_completes(
    own_dask_cluster: DaskCluster, tmp_path: Path
) -> None:
    own_dask_cluster.configure()
    doomed = own_dask_cluster.workers["dask-worker-2"].pid
    survivor = own_dask_cluster.workers["dask-worker-1"].pid
    scheduler = Scheduler(retry_delay=0.1, prune_on_get_work=True)
    worker = Worker(
        scheduler=scheduler, worker_processes=4, keep_alive=True, wait_interval=0.05, wait_jitter=0
    )
    pipeline = FansOutOnDask(str(tmp_path), 12, 1.0)
    worker.add(pipeline)
    runner = threading.Thread(target=worker.run)
    runner.start()
    wait_until(lambda: list(tmp_path.glob(f"started-*-{doomed}")), 60, "a task to start on the doomed worker")
    own_dask_cluster.kill_worker("dask-worker-2")
    runner.join(timeout=120)
    if runner.is_alive():
        worker.handle_interrupt(signal.SIGUSR1, None)
        pytest.fail("the worker did not finish within 120 seconds")
    worker.stop()
    assert pipeline.complete()
    assert set(recorded_pids(tmp_path)) <= {doomed, survivor}
    statuses = [status for _, status, _ in worker._add_task_history]
    assert FAILED in statuses  # the runs lost with the worker, retried
    assert all(task.complete() for task in pipeline.requires())
    assert not pid_alive(doomed)


def test_the_dask_executor_without_a_scheduler_address_names_the_setting_to_set() -> None:
    with pytest.raises(DaskUnavailableError, match=r"\[dask\] scheduler_address"):
        Worker(scheduler=Scheduler(), executor="dask")
