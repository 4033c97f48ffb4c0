"""``TaskProcess.terminate()`` ends the task's whole process tree, as Luigi's does (LUIGI_COMPAT j.5).

A task started with multiprocessing whose ``run()`` launches a busy child: after ``terminate()`` neither the
task's process nor that child is left running.
"""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from collections.abc import Iterator

import psutil
import pytest
from helpers.luigid import pid_alive, wait_until

import luigi
from luigi.scheduler import Scheduler
from luigi.worker import TaskProcess, TaskStatusReporter

DEADLINE = 30.0


class SpinsForever(luigi.Task):
    """Starts a child that never ends by itself and waits for it."""

    def run(self):
        subprocess.Popen([sys.executable, "-c", "while True: pass"]).wait()


@pytest.fixture
def started() -> Iterator[list[psutil.Process]]:
    """Processes the test started, directly or not; any still alive at teardown are killed and reaped."""
    processes: list[psutil.Process] = []
    yield processes
    for process in processes:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(processes, timeout=DEADLINE)


def test_terminate_kills_the_task_process_and_the_child_its_run_started(started):
    task = SpinsForever()
    results = multiprocessing.get_context("fork").Queue()
    process = TaskProcess(
        task, "w1", results, TaskStatusReporter(Scheduler(), task.task_id, "w1"), use_multiprocessing=True
    )
    process.start()
    started.append(psutil.Process(process.pid))
    children = wait_until(lambda: started[0].children(recursive=True), DEADLINE, "the task's child to start")
    started.extend(children)

    process.terminate()
    process.join(timeout=DEADLINE)

    assert process.exitcode is not None, "the task process is still running"
    wait_until(
        lambda: not any(pid_alive(child.pid) for child in children), DEADLINE, "the task's child to die"
    )
