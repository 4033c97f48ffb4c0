"""Cancelling a running task (issue 38 §2): ``cancel_task`` POSTed to luigid, as the visualiser's Cancel
button does, kills the run and every process it started within seconds; the task FAILS with the
explanation and is not run again until forgiven; the ``luigi`` run exits as for any failed task."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from helpers.luigid import running_luigid, wait_until
from helpers.scheduler import LockedScheduler
from helpers.worker_process import alive, read_pids, start_worker, task_statuses, write_module

from luigi.parameter import FloatParameter, Parameter
from luigi.scheduler import Scheduler
from luigi.scheduler.extensions import CANCELLED_EXPLANATION
from luigi.task import Task
from luigi.worker import Worker

CANCEL_WITHIN = 5.0  # seconds from the click to the end of the run's processes
TASK_FAILED_EXIT = 5  # the [retcode] task_failed the runs below set

LONG_TASK = """
    import os, subprocess, time
    import luigi

    class Long(luigi.Task):
        name = luigi.Parameter()

        def output(self):
            return luigi.LocalTarget(self.name + ".done")

        def run(self):
            with open(self.name + ".runs", "a") as runs:
                runs.write("run\\n")
            child = subprocess.Popen(["sleep", "300"])
            with open(self.name + ".pids", "w") as out:
                out.write(f"{os.getpid()}\\n{child.pid}\\n")
            child.wait()
            while True:  # a killed child does not end the run: only the cancel does
                time.sleep(0.05)
"""

# A retry 1 s after a failure, and a worker that waits 4 s for more work: an ordinary failure would run
# again in this worker; a cancelled one must not.
LUIGID_CONFIG = """
    [scheduler]
    retry_delay = 1
"""
WORKER_CONFIG = f"""
    [retcode]
    task_failed = {TASK_FAILED_EXIT}
    [worker]
    keep_alive = true
    max_keep_alive_idle_duration = 4 seconds
"""


def running_task_id(probe) -> str:
    running = [task_id for task_id, task in task_statuses(probe).items() if task["status"] == "RUNNING"]
    return running[0] if running else ""


@pytest.mark.parametrize("workers", [1, 2], ids=["in-process", "in-slots"])
def test_cancel_from_the_visualiser_kills_the_run_and_its_child_and_fails_the_task_for_good(
    tmp_path: Path, workers: int
):
    write_module(tmp_path, "long_task", LONG_TASK)
    with running_luigid(tmp_path, config=LUIGID_CONFIG) as luigid:
        probe = luigid.probe()
        worker = start_worker(
            tmp_path, "long_task", ["Long", "--name", "x"], luigid.url, workers, WORKER_CONFIG
        )
        try:
            task_pid, child_pid = wait_until(
                lambda: len(read_pids(tmp_path / "x.pids")) == 2 and read_pids(tmp_path / "x.pids"),
                what="the task to start its child",
            )
            assert (task_pid == worker.pid) == (workers == 1)  # in the worker itself, or in a slot
            task_id = wait_until(lambda: running_task_id(probe), what="luigid to show the task RUNNING")

            clicked = time.monotonic()
            answer = probe.call("cancel_task", {"task_id": task_id}).json()["response"]
            assert answer == {"task_id": task_id, "status": "RUNNING", "cancel_requested": True}
            run_processes = [child_pid] if workers == 1 else [task_pid, child_pid]
            wait_until(
                lambda: not any(alive(pid) for pid in run_processes),
                timeout=CANCEL_WITHIN,
                what="the cancelled run's processes to end",
            )
            assert time.monotonic() - clicked < CANCEL_WITHIN

            assert worker.wait(timeout=30) == TASK_FAILED_EXIT
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        task = task_statuses(probe)[task_id]
        assert task["status"] == "FAILED"
        error = probe.call("fetch_error", {"task_id": task_id}, verb="GET").json()["response"]["error"]
        assert json.loads(error) == CANCELLED_EXPLANATION
        assert (tmp_path / "x.runs").read_text() == "run\n"  # not run again, though retry_delay passed
        log = (tmp_path / "worker.log").read_text()
        assert "Cancelling the run of" in log
        assert "* 1 failed:" in log


def test_cancel_task_must_be_posted(tmp_path: Path):
    with running_luigid(tmp_path) as luigid:
        reply = luigid.probe().call("cancel_task", {"task_id": "Any()"}, verb="GET")
    assert reply.status == 405
    assert reply.json()["error"] == "cancel_task changes scheduler state: send it with POST, not GET"


class Sleeper(Task):
    """Writes ``started`` then sleeps a minute: in one call (``nap`` 60) or in short naps (0.05)."""

    started = Parameter()
    nap = FloatParameter()

    def complete(self) -> bool:
        return False

    def run(self) -> None:
        Path(self.started).write_text("yes")
        give_up = time.monotonic() + 60
        while time.monotonic() < give_up:
            time.sleep(self.nap)


@pytest.mark.parametrize(
    ("in_main_thread", "nap"),
    [(True, 60.0), (False, 0.05)],
    ids=["main-thread-in-one-long-sleep", "other-thread-in-short-naps"],
)
def test_the_in_process_scheduler_cancels_a_task_run_by_a_worker_in_this_process(
    tmp_path: Path, in_main_thread: bool, nap: float
):
    """``--local-scheduler`` has no visualiser, but API users call ``cancel_task`` on the Scheduler. In the
    main thread even a task blocked in one long call is interrupted at once."""
    task = Sleeper(started=str(tmp_path / "started"), nap=nap)
    scheduler = LockedScheduler(Scheduler(retry_delay=0))  # the test's thread calls it too
    results: list[bool] = []

    def cancel_once_running() -> bool:
        return (tmp_path / "started").exists() and scheduler.cancel_task(task.task_id)["cancel_requested"]

    def run_worker() -> None:
        with Worker(scheduler=scheduler, ping_interval=0.1) as worker:
            worker.add(task)
            results.append(worker.run())

    began = time.monotonic()
    canceller = _in_thread(lambda: wait_until(cancel_once_running, what="the task to run"))
    if in_main_thread:
        run_worker()
    else:
        runner = _in_thread(run_worker)
        runner.join(timeout=60)
    canceller.join()
    assert results == [False]
    assert time.monotonic() - began < 30  # not the minute the task would sleep
    assert scheduler.task_list("", "")[task.task_id]["status"] == "FAILED"
    assert json.loads(scheduler.fetch_error(task.task_id)["error"]) == CANCELLED_EXPLANATION


def _in_thread(target) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread
