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
    FansOutOnDask,
    RunsUntilCancelled,
    recorded_pids,
)
from helpers.luigid import pid_alive, wait_until
from helpers.scheduler import LockedScheduler

import luigi
from luigi.scheduler import Scheduler
from luigi.scheduler.extensions import CANCELLED_EXPLANATION
from luigi.task_status import FAILED
from luigi.worker import Worker
from luigi.worker.dask_runner import DaskRunner, DaskUnavailableError

pytest_plugins = ["helpers.dask_cluster"]


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
