"""The Ray executor: a worker that walks the graph and talks to the scheduler, its tasks run on Ray."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path

import pytest
from helpers.dask_tasks import (
    FansOutOnDask,
    RunsUntilCancelled,
    recorded_pids,
)
from helpers.luigid import free_port, pid_alive, wait_until
from helpers.ray_cluster import RayCluster
from helpers.scheduler import LockedScheduler

import luigi
from luigi.scheduler import Scheduler
from luigi.scheduler.extensions import CANCELLED_EXPLANATION
from luigi.task_status import FAILED
from luigi.worker import Worker

pytest_plugins = ["helpers.ray_cluster"]


def test_a_ray_worker_runs_its_tasks_spread_over_ray_workers_and_none_in_its_own_process(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    from luigi.worker.ray_runner import RayRunner

    ray_cluster.configure()
    with Worker(scheduler=Scheduler(), worker_processes=2) as worker:
        assert isinstance(worker._runner, RayRunner)
        worker.add(FansOutOnDask(str(tmp_path), 12, 0.3))
        assert worker.run() is True
    pids = set(recorded_pids(tmp_path))
    assert len(recorded_pids(tmp_path)) == 12
    assert len(pids) >= 2 and os.getpid() not in pids
    assert pids <= ray_cluster.worker_pids()


@pytest.mark.parametrize("timed", [True, False], ids=["in-a-slot", "in-a-ray-worker"])
def test_a_task_cancelled_on_ray_fails_at_once_and_its_run_is_killed(
    ray_cluster: RayCluster, tmp_path: Path, timed: bool
) -> None:
    ray_cluster.configure()
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
        assert json.loads(scheduler.fetch_error(task.task_id)["error"]) == CANCELLED_EXPLANATION
        run_pid = int(pids_file.read_text().split()[0])
        wait_until(lambda: not pid_alive(run_pid), 15, "the cancelled run's process to die")
    finally:
        (tmp_path / "stop").touch()


def test_the_channel_forgets_a_run_cancelled_in_its_slot_once_the_run_ends(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    # The cancel reason of a slot run stayed on the channel actor for the life of the worker: one per
    # cancelled run. A second run keeps the worker going (as a long-lived one does) after the cancel.
    import ray

    ray_cluster.configure()
    scheduler = LockedScheduler(Scheduler(retry_delay=0))
    slot_root, other_root = tmp_path / "slot", tmp_path / "other"
    slot_root.mkdir()
    other_root.mkdir()
    cancelled, other = RunsUntilCancelled(str(slot_root), True), RunsUntilCancelled(str(other_root), False)
    failures: list[BaseException] = []

    def started(root: Path, timed: bool) -> int:
        pids = root / f"pids-{timed}"
        wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 2, 60, f"the run in {root}")
        return int(pids.read_text().split()[0])

    def cancel_then_count_the_channels_runs(worker: Worker) -> None:
        try:
            slot_pid = started(slot_root, True)
            started(other_root, False)
            assert scheduler.cancel_task(cancelled.task_id)["cancel_requested"] is True
            wait_until(lambda: not pid_alive(slot_pid), 30, "the slot, told why it is cancelled, to die")
            channel = worker._runner._channel
            wait_until(lambda: ray.get(channel.runs_held.remote()) == 0, 30, "the channel to hold no run")
        except BaseException as exc:  # handed to the test's thread, which asserts on it
            failures.append(exc)
        finally:
            (other_root / "stop").touch()

    try:
        with Worker(scheduler=scheduler, worker_processes=2, ping_interval=0.1, wait_interval=0.1) as worker:
            worker.add(cancelled)
            worker.add(other)
            canceller = threading.Thread(target=cancel_then_count_the_channels_runs, args=(worker,))
            canceller.start()
            assert worker.run() is False
            canceller.join()
        assert failures == []
    finally:
        (slot_root / "stop").touch()
        (other_root / "stop").touch()


def test_a_ray_worker_killed_mid_task_fails_that_task_which_is_retried_and_the_pipeline_completes(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    ray_cluster.configure()
    scheduler = Scheduler(retry_delay=0.1, prune_on_get_work=True)
    worker = Worker(
        scheduler=scheduler, worker_processes=2, keep_alive=True, wait_interval=0.05, wait_jitter=0
    )
    pipeline = FansOutOnDask(str(tmp_path), 6, 1.0)
    worker.add(pipeline)
    runner = threading.Thread(target=worker.run)
    runner.start()
    started = wait_until(lambda: list(tmp_path.glob("started-*")), 60, "a task to start on Ray")
    doomed = int(started[0].name.rsplit("-", 1)[1])
    os.kill(doomed, signal.SIGKILL)
    runner.join(timeout=120)
    if runner.is_alive():
        worker.handle_interrupt(signal.SIGUSR1, None)
        pytest.fail("the worker did not finish within 120 seconds")
    worker.stop()
    assert pipeline.complete()
    failures = [(task_id, status) for task_id, status, _ in worker._add_task_history if status == FAILED]
    assert failures  # the run lost with its Ray worker, retried
    assert doomed not in recorded_pids(tmp_path) and not pid_alive(doomed)


def test_the_ray_executor_without_an_address_names_the_setting_to_set(ray_cluster: RayCluster) -> None:
    from luigi.worker.ray_runner import RayUnavailableError

    with pytest.raises(RayUnavailableError, match=r"set \[ray\] address"):
        Worker(scheduler=Scheduler(), executor="ray")


def test_a_ray_address_where_nothing_answers_fails_at_once_naming_the_setting(
    ray_cluster: RayCluster,
) -> None:
    from luigi.worker.ray_runner import RayUnavailableError

    luigi.configuration.get_config().set("ray", "address", f"127.0.0.1:{free_port()}")
    with pytest.raises(
        RayUnavailableError, match=r"Cannot reach the Ray cluster at 127.0.0.1:\d+ \(\[ray\] address\)"
    ):
        Worker(scheduler=Scheduler(), executor="ray")


def test_the_ray_executor_without_ray_installed_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from luigi.worker.ray_runner import RayUnavailableError

    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    with pytest.raises(RayUnavailableError, match=r"pip install 'luigi\[ray\]'"):
        Worker(scheduler=Scheduler(), executor="ray")
