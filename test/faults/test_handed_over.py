"""A worker cut off past the disconnect delay is told, when it comes back, what was handed over.

Issue 16, point 4, through real processes: a real luigid, real worker processes, SIGSTOP/SIGCONT of a
worker past ``worker_disconnect_delay``. Each run of the task appends its pid to ``runs.txt`` and waits
until the test creates ``release-<pid>``; the output names the pid of the run that wrote it.
"""

from __future__ import annotations

import os
import signal

import pytest
from helpers.luigid import HttpProbe, running_luigid, wait_until
from helpers.worker_process import alive, read_pids, start_worker, task_statuses, write_module

from luigi.worker.leases import REASON

pytestmark = pytest.mark.faults

SLOW = """
    import os
    import time
    import luigi

    class Slow(luigi.Task):
        def output(self):
            return luigi.LocalTarget("slow.done")

        def run(self):
            pid = os.getpid()
            with open("runs.txt", "a") as runs:
                runs.write(f"{pid}\\n")
            deadline = time.monotonic() + 90
            while not os.path.exists(f"release-{pid}") and time.monotonic() < deadline:
                time.sleep(0.05)
            with self.output().open("w") as out:
                out.write(str(pid))
"""
LUIGID = "[scheduler]\nworker_disconnect_delay = 3\nretry_delay = 1\n"
WORKER = "[worker]\nping_interval = 0.5\n{extra}[retcode]\nalready_running = 30\n"


def slow_task(probe: HttpProbe) -> dict:
    return next(iter(task_statuses(probe).values()), {})


def runner_pid(probe: HttpProbe) -> str | None:
    """The pid in the id of the worker luigid says runs the task (None: nobody)."""
    running = slow_task(probe).get("worker_running") or ""
    return running.rsplit("pid=", 1)[-1].rstrip(")") if "pid=" in running else None


@pytest.mark.parametrize("in_slot", [True, False], ids=["in a slot", "in its own process"])
def test_a_returning_worker_stops_a_run_handed_over_and_reports_nothing_of_it(tmp_path, in_slot):
    """In a slot, A's run is killed; in A's own process it cannot be, so it ends but is not reported."""
    write_module(tmp_path, "slow", SLOW)
    extra = f"force_multiprocessing = {str(in_slot).lower()}\n"
    with running_luigid(tmp_path, config=LUIGID) as luigid:
        probe = luigid.probe()
        a = start_worker(tmp_path, "slow", ["Slow"], luigid.url, config=WORKER.format(extra=extra),
                         log_name="a.log")  # fmt: skip
        b = None
        try:
            wait_until(lambda: len(read_pids(tmp_path / "runs.txt")) == 1, what="A's run to start")
            [a_run] = read_pids(tmp_path / "runs.txt")
            os.kill(a.pid, signal.SIGSTOP)
            wait_until(lambda: slow_task(probe).get("status") in ("FAILED", "PENDING"), what="A lost")
            b = start_worker(tmp_path, "slow", ["Slow"], luigid.url, config=WORKER.format(extra=""),
                             log_name="b.log")  # fmt: skip
            wait_until(lambda: len(read_pids(tmp_path / "runs.txt")) == 2, what="B's run to start")
            b_run = read_pids(tmp_path / "runs.txt")[1]
            assert runner_pid(probe) == str(b.pid)

            os.kill(a.pid, signal.SIGCONT)
            wait_until(lambda: REASON in (tmp_path / "a.log").read_text(), what="A to be told")
            if not in_slot:  # it cannot be killed: it ends, and its DONE is not reported
                (tmp_path / f"release-{a_run}").touch()
            assert a.wait(timeout=60) == 30  # [retcode] already_running: run by another worker
            a_log = (tmp_path / "a.log").read_text()
            assert a_log.count(REASON) == 1
            assert "were being run by another worker" in a_log
            assert not alive(a_run)
            assert slow_task(probe)["status"] == "RUNNING" and runner_pid(probe) == str(b.pid)

            (tmp_path / f"release-{b_run}").touch()
            assert b.wait(timeout=60) == 0
            assert slow_task(probe)["status"] == "DONE"
            assert (tmp_path / "slow.done").read_text() == str(b_run)
            assert read_pids(tmp_path / "runs.txt") == [a_run, b_run]
        finally:
            for worker in (a, b):
                if worker is not None and worker.poll() is None:
                    os.kill(worker.pid, signal.SIGCONT)
                    worker.kill()
                    worker.wait()


def test_a_returning_worker_whose_task_nobody_took_gets_it_back_and_its_result_lands(tmp_path):
    write_module(tmp_path, "slow", SLOW)
    with running_luigid(tmp_path, config=LUIGID) as luigid:
        probe = luigid.probe()
        a = start_worker(tmp_path, "slow", ["Slow"], luigid.url, config=WORKER.format(extra=""))
        try:
            wait_until(lambda: len(read_pids(tmp_path / "runs.txt")) == 1, what="A's run to start")
            [a_run] = read_pids(tmp_path / "runs.txt")
            os.kill(a.pid, signal.SIGSTOP)
            wait_until(lambda: slow_task(probe).get("status") in ("FAILED", "PENDING"), what="A lost")
            os.kill(a.pid, signal.SIGCONT)
            wait_until(lambda: slow_task(probe).get("status") == "RUNNING", what="A's lease renewed")
            assert runner_pid(probe) == str(a.pid)

            (tmp_path / f"release-{a_run}").touch()
            assert a.wait(timeout=60) == 0
            assert slow_task(probe)["status"] == "DONE"
            assert read_pids(tmp_path / "runs.txt") == [a_run]  # it ran once
            assert REASON not in (tmp_path / "worker.log").read_text()
        finally:
            if a.poll() is None:
                os.kill(a.pid, signal.SIGCONT)
                a.kill()
                a.wait()
