"""A worker with no processes (``--workers 0``, ``luigi.build(..., workers=0)``; COMPAT j.5).

It schedules its tasks but never asks for work: it polls ``count_pending`` and, with ``keep_alive``,
stays alive while its tasks are pending, so another worker runs them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers.luigid import running_luigid, wait_until

import luigi
from luigi.rpc import RemoteScheduler
from luigi.task import Task, task_id_str

LUIGI = Path(sys.executable).parent / "luigi"
RUN_TIMEOUT = 60.0
JOB = task_id_str("Job", {})

PIPELINE = """
import os

import luigi


class Job(luigi.Task):
    def output(self):
        return luigi.LocalTarget(os.path.join(os.environ["J5_DIR"], "job.done"))

    def run(self):
        with self.output().open("w") as out:
            out.write(str(os.getpid()))
"""


def start_luigi(tmp_path: Path, name: str, url: str, *args: str, config: str = "") -> subprocess.Popen:
    """``luigi --module pipeline Job`` against ``url``, its output in ``<name>.log``."""
    (tmp_path / "no_processes_pipeline.py").write_text(PIPELINE)
    (tmp_path / f"{name}.cfg").write_text(textwrap.dedent(config))
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "J5_DIR": str(tmp_path), "PYTHONPATH": path}
    env["LUIGI_CONFIG_PATH"] = str(tmp_path / f"{name}.cfg")
    argv = [str(LUIGI), "--module", "no_processes_pipeline", "Job", "--scheduler-url", url, *args]
    with open(tmp_path / f"{name}.log", "wb") as log:
        return subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)


def finish(process: subprocess.Popen, log: Path) -> int:
    try:
        return process.wait(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise AssertionError(f"the worker ran past {RUN_TIMEOUT}s:\n{log.read_text()}") from None


def test_a_worker_without_processes_runs_nothing_and_stays_alive_while_its_tasks_are_pending(tmp_path):
    with running_luigid(tmp_path) as luigid:
        watcher_log = tmp_path / "watcher.log"
        watcher = start_luigi(
            tmp_path,
            "watcher",
            luigid.url,
            "--workers",
            "0",
            "--log-level",
            "DEBUG",
            config="[worker]\nkeep_alive = true\nwait_interval = 0.05\nwait_jitter = 0\n",
        )
        try:
            client = RemoteScheduler(luigid.url)
            wait_until(lambda: JOB in client.task_list(status="PENDING"), what="Job to be scheduled")
            wait_until(
                lambda: watcher_log.read_text().count("Checking if tasks are still pending") >= 3,
                what="the watcher to poll count_pending",
            )
            assert watcher.poll() is None  # kept alive: its task is pending
            assert JOB in client.task_list(status="PENDING")  # and it was never granted
            runner = start_luigi(tmp_path, "runner", luigid.url)
            assert finish(runner, tmp_path / "runner.log") == 0
            assert (tmp_path / "job.done").read_text() == str(runner.pid)
            assert finish(watcher, watcher_log) == 0  # nothing pending any more
        finally:
            if watcher.poll() is None:
                watcher.kill()
                watcher.wait()
    assert "running   Job()" not in watcher_log.read_text()


def test_build_with_no_workers_schedules_and_runs_nothing(tmp_path):
    class Job(Task):
        def output(self):
            return luigi.LocalTarget(str(tmp_path / "job.done"))

        def run(self):
            raise AssertionError("a worker without processes runs nothing")

    result = luigi.build([Job()], local_scheduler=True, workers=0, detailed_summary=True, log_level="WARNING")
    assert result.scheduling_succeeded
    assert result.summary_text.split("===== Luigi Execution Summary =====")[1].strip("\n") == (
        "Scheduled 1 tasks of which:\n"
        "* 1 were left pending, among these:\n"
        "    * 1 was not granted run permission by the scheduler:\n"
        "        - 1 Job()\n"
        "\n"
        "Did not run any tasks\n"
        "This progress looks :| because there were tasks that were not granted run permission by the "
        "scheduler"
    )
