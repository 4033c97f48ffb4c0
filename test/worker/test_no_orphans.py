"""A task's processes never outlive their worker (issue 16, point 1).

Each task run is tagged in the environment of every program it starts, and a slot dies with its worker
(parent-death signal and a watch on the worker's pid). So a ``kill -9`` of the worker, a timeout, or the
end of the worker's run leaves nothing behind, not even a ``setsid`` grandchild re-parented to init.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from helpers.luigid import wait_until
from helpers.worker_process import alive, read_pids, start_worker, wait_all_gone, write_module

from luigi.scheduler import Scheduler
from luigi.task import Task
from luigi.task_status import FAILED
from luigi.worker import Worker

SPAWNER = """
    import os, subprocess, sys, time
    import luigi

    class Spawner(luigi.Task):
        name = luigi.Parameter()

        def output(self):
            return luigi.LocalTarget(self.name + ".done")

        def run(self):
            plain = subprocess.Popen(["sleep", "300"])
            # setsid in a shell that exits at once: a new session, re-parented to init (or a subreaper)
            escape = "setsid sleep 301 >/dev/null 2>&1 & echo $! > " + self.name + ".escaped"
            subprocess.run(["sh", "-c", escape])
            with open(self.name + ".pids", "w") as out:
                out.write(f"{os.getpid()}\\n{plain.pid}\\n{open(self.name + '.escaped').read().strip()}\\n")
            time.sleep(300)
"""


def _escaped_pid(tmp_path, name):
    return read_pids(tmp_path / f"{name}.escaped")


def test_kill_9_of_a_worker_kills_its_slots_and_every_process_their_tasks_started(tmp_path):
    write_module(tmp_path, "spawner", SPAWNER)
    worker = start_worker(tmp_path, "spawner", ["Spawner", "--name", "a"], workers=2)
    try:
        pids = wait_until(lambda: len(read_pids(tmp_path / "a.pids")) == 3 and read_pids(tmp_path / "a.pids"))
        slot, plain, escaped = pids
        assert slot != worker.pid
        wait_until(lambda: os.getsid(escaped) == escaped, what="the grandchild to start its own session")
        assert os.getsid(escaped) != os.getsid(slot)  # it really left the slot's session
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
        wait_all_gone([slot, plain, escaped])
    finally:
        if worker.poll() is None:
            worker.kill()


def test_kill_9_of_a_slot_kills_what_its_task_started_and_fails_the_task(tmp_path):
    write_module(tmp_path, "spawner", SPAWNER)
    worker = start_worker(tmp_path, "spawner", ["Spawner", "--name", "b"], workers=2)
    try:
        pids = wait_until(lambda: len(read_pids(tmp_path / "b.pids")) == 3 and read_pids(tmp_path / "b.pids"))
        os.kill(pids[0], signal.SIGKILL)
        wait_all_gone(pids)
        worker.wait(timeout=30)  # the task failed; the worker noticed and finished
        log = (tmp_path / "worker.log").read_text()
        assert "died unexpectedly with exit code -9 (killed by SIGKILL)" in log
    finally:
        if worker.poll() is None:
            worker.kill()


def test_sigterm_to_a_slot_takes_its_tasks_tree_with_it(tmp_path):
    write_module(tmp_path, "spawner", SPAWNER)
    worker = start_worker(tmp_path, "spawner", ["Spawner", "--name", "c"], workers=2)
    try:
        pids = wait_until(lambda: len(read_pids(tmp_path / "c.pids")) == 3 and read_pids(tmp_path / "c.pids"))
        os.kill(pids[0], signal.SIGTERM)
        wait_all_gone(pids)
        worker.wait(timeout=30)
        assert "* 1 failed:" in (tmp_path / "worker.log").read_text()
    finally:
        if worker.poll() is None:
            worker.kill()


def test_a_timeout_kills_a_grandchild_that_changed_session_and_was_re_parented(tmp_path):
    pid_file = tmp_path / "escaped.pid"

    class Escapes(Task):
        worker_timeout = 1

        def complete(self):
            return False

        def run(self):
            escape = f"setsid sleep 302 >/dev/null 2>&1 & echo $! > {pid_file}"
            subprocess.run(["sh", "-c", escape], check=True)
            time.sleep(60)

    scheduler = Scheduler()
    with Worker(scheduler=scheduler) as worker:
        worker.add(Escapes())
        assert worker.run() is False
    assert scheduler.task_list("", "")[Escapes().task_id]["status"] == FAILED
    escaped = read_pids(pid_file)
    assert escaped and os.getsid(escaped[0]) == escaped[0]
    wait_all_gone(escaped)


def test_programs_an_in_process_task_left_running_end_with_the_worker(tmp_path):
    pid_file = tmp_path / "left.pid"

    class LeavesADaemon(Task):
        def complete(self):
            return pid_file.exists()

        def run(self):
            escape = f"setsid sleep 303 >/dev/null 2>&1 & echo $! > {pid_file}"
            subprocess.run(["sh", "-c", escape], check=True)

    with Worker(scheduler=Scheduler()) as worker:
        worker.add(LeavesADaemon())
        assert worker.run() is True
    left = read_pids(pid_file)
    assert left
    wait_all_gone(left)


def test_a_program_that_drops_the_tag_is_left_alone(tmp_path):
    pid_file = tmp_path / "kept.pid"

    class StartsAService(Task):
        def complete(self):
            return pid_file.exists()

        def run(self):
            env = {k: v for k, v in os.environ.items() if k != "LUIGI_TASK_RUN"}
            command = f"setsid sleep 304 >/dev/null 2>&1 & echo $! > {pid_file}"
            subprocess.run(["sh", "-c", command], check=True, env=env)

    with Worker(scheduler=Scheduler()) as worker:
        worker.add(StartsAService())
        assert worker.run() is True
    kept = read_pids(pid_file)
    try:
        assert kept and alive(kept[0])
    finally:
        for pid in kept:
            os.kill(pid, signal.SIGKILL)


SIGTERM_DURING_THE_KILL = """
    import os, signal, subprocess, sys, time
    from luigi.worker import process_tree
    from luigi.worker.slots import child

    class SecondSigterm:
        # A second SIGTERM lands while the first one's handler is importing psutil.
        def find_spec(self, name, path=None, target=None):
            if name == "psutil._common":
                os.kill(os.getpid(), signal.SIGTERM)
            return None

    assert "psutil" not in sys.modules
    tag = "test-second-sigterm:1"
    os.environ[process_tree.TAG_VARIABLE] = tag
    started = subprocess.Popen(["setsid", "sleep", "305"])
    print(started.pid, flush=True)
    child._RunningJob.tag = tag
    sys.meta_path.insert(0, SecondSigterm())
    signal.signal(signal.SIGTERM, child._on_sigterm)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(60)
"""


def test_a_second_sigterm_while_the_slot_kills_its_tree_does_not_stop_the_kill(tmp_path):
    write_module(tmp_path, "interrupted", SIGTERM_DURING_THE_KILL)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    slot = subprocess.Popen(
        [sys.executable, "-m", "interrupted"],
        stdout=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
        start_new_session=True,  # it kills its own process group, as a slot does
    )
    started = int(slot.stdout.readline())
    try:
        assert slot.wait(timeout=30) == -signal.SIGKILL  # its own group kill, not a traceback
    finally:
        if slot.poll() is None:
            slot.kill()
        slot.stdout.close()
        wait_all_gone([started])
