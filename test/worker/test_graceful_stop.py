"""SIGTERM (and a first SIGINT) stop a worker gracefully (issue 16, point 2).

The worker stops asking for work and lets its running tasks finish within ``[worker] shutdown_grace``;
past it, or at a second signal, they are killed with their process trees and reported FAILED with the
reason "worker stopped", so the scheduler need not wait for the disconnect delay to know.
"""

from __future__ import annotations

import signal
import time

import pytest
from helpers.luigid import running_luigid, wait_until
from helpers.worker_process import read_pids, start_worker, task_statuses, wait_all_gone, write_module

WAITER = """
    import os, time
    import luigi

    class Waits(luigi.Task):
        name = luigi.Parameter()

        def output(self):
            return luigi.LocalTarget(self.name + ".done")

        def run(self):
            with open(self.name + ".started", "w") as out:
                out.write(str(os.getpid()))
            while not os.path.exists(self.name + ".go"):
                time.sleep(0.02)
            with self.output().open("w") as out:
                out.write("ok")

    class Three(luigi.WrapperTask):
        def requires(self):
            return [Waits(name=name) for name in ("first", "second", "third")]
"""


def _status(luigid, family_prefix):
    statuses = task_statuses(luigid.probe())
    return {task_id: task for task_id, task in statuses.items() if task_id.startswith(family_prefix)}


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_lets_the_running_task_finish_and_asks_for_nothing_more(tmp_path, workers, signum):
    write_module(tmp_path, "waiter", WAITER)
    with running_luigid(tmp_path) as luigid:
        worker = start_worker(tmp_path, "waiter", ["Three"], luigid.url, workers=workers)
        names = ("first", "second", "third")
        try:
            wait_until(lambda: sum((tmp_path / f"{name}.started").exists() for name in names) == workers)
            worker.send_signal(signum)
            wait_until(lambda: "taking no new work" in (tmp_path / "worker.log").read_text())
            for name in names:
                (tmp_path / f"{name}.go").write_text("")
            assert worker.wait(timeout=30) == 0
            done = [name for name in names if (tmp_path / f"{name}.done").exists()]
            assert len(done) == workers  # the running ones finished; no other was asked for
            statuses = sorted(task["status"] for task in _status(luigid, "Waits_").values())
            assert statuses == ["DONE"] * workers + ["PENDING"] * (3 - workers)
        finally:
            if worker.poll() is None:
                worker.kill()


@pytest.mark.parametrize("workers", [1, 2])
def test_past_the_grace_the_task_is_killed_and_reported_failed_as_worker_stopped(tmp_path, workers):
    write_module(tmp_path, "waiter", WAITER)
    with running_luigid(tmp_path) as luigid:
        config = "[worker]\nshutdown_grace = 1\n"
        worker = start_worker(tmp_path, "waiter", ["Waits", "--name", "slow"], luigid.url, workers, config)
        try:
            wait_until(lambda: (tmp_path / "slow.started").exists())
            runner = read_pids(tmp_path / "slow.started")
            signalled = time.monotonic()
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=30)
            assert time.monotonic() - signalled < 15
            [(task_id, task)] = _status(luigid, "Waits_slow").items()
            assert task["status"] == "FAILED"
            error = luigid.probe().call("fetch_error", {"task_id": task_id}, verb="GET")
            assert "worker stopped" in str(error.json()["response"]["error"])
            if workers > 1:
                wait_all_gone(runner)
        finally:
            if worker.poll() is None:
                worker.kill()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_second_signal_stops_at_once(tmp_path, workers):
    write_module(tmp_path, "waiter", WAITER)
    with running_luigid(tmp_path) as luigid:
        config = "[worker]\nshutdown_grace = 600\n"
        worker = start_worker(tmp_path, "waiter", ["Waits", "--name", "stuck"], luigid.url, workers, config)
        try:
            wait_until(lambda: (tmp_path / "stuck.started").exists())
            worker.send_signal(signal.SIGTERM)
            wait_until(lambda: "taking no new work" in (tmp_path / "worker.log").read_text())
            signalled = time.monotonic()
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=30)
            assert time.monotonic() - signalled < 10
            [task] = _status(luigid, "Waits_stuck").values()
            assert task["status"] == "FAILED"
            assert not (tmp_path / "stuck.done").exists()
        finally:
            if worker.poll() is None:
                worker.kill()
