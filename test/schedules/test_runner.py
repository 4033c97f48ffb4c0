"""One child process of a run, for real: its output kept (bounded), its exit status, its stopping."""

from __future__ import annotations

import asyncio
import signal
import sys
import time

from helpers.luigid import pid_alive, wait_until

from luigi.schedules.runner import BoundedLog, ChildRun
from luigi.schedules.service import exit_meaning


def run_child(argv, tmp_path, env=None, cwd=None):
    async def go():
        child = await ChildRun.start(argv, cwd, env or {}, tmp_path / "run.log")
        return await child.wait(), child.log.size

    return asyncio.run(go())


def test_stdout_and_stderr_go_to_the_log_and_the_exit_status_is_returned(tmp_path):
    code, size = run_child(
        [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
        tmp_path,
    )
    text = (tmp_path / "run.log").read_text()
    assert code == 3
    assert sorted(text.split()) == ["err", "out"]
    assert size == len(text)


def test_the_environment_and_directory_are_the_runs(tmp_path):
    code, _ = run_child(
        [sys.executable, "-c", "import os; print(os.environ['WHO'], os.getcwd())"],
        tmp_path,
        env={"WHO": "sched"},
        cwd=str(tmp_path),
    )
    assert code == 0
    assert (tmp_path / "run.log").read_text().split() == ["sched", str(tmp_path)]


def test_a_long_output_keeps_its_start_and_end_and_says_what_was_cut(tmp_path):
    log = BoundedLog(tmp_path / "big.log", max_bytes=100, tail_bytes=30)
    for n in range(50):
        log.write(f"line{n:03}\n".encode())
    log.close()
    text = (tmp_path / "big.log").read_text()
    assert text.startswith("line000\nline001\n")
    assert text.endswith("line049\n")
    assert "bytes of output cut here" in text
    assert log.size == len(text.encode()) < 200


GRANDPARENT = """
import subprocess, sys, time
sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print("up", sleeper.pid, flush=True)
time.sleep(60)
"""


def test_stopping_terminates_the_child_and_what_it_started(tmp_path):
    log_path = tmp_path / "run.log"

    async def go():
        child = await ChildRun.start([sys.executable, "-c", GRANDPARENT], None, {}, log_path)
        waiting = asyncio.ensure_future(child.wait())
        deadline = time.monotonic() + 30
        while b"up" not in log_path.read_bytes() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await child.stop(grace=5.0)
        return await asyncio.wait_for(waiting, 10.0)

    assert asyncio.run(go()) == -signal.SIGTERM
    grandchild = int(log_path.read_text().split()[1])
    wait_until(lambda: not pid_alive(grandchild), timeout=10, what="the grandchild to be gone")


def test_exit_codes_are_named_after_the_retcode_options():
    codes = {"unhandled_exception": 4, "missing_data": 0, "task_failed": 30, "already_running": 30}
    assert exit_meaning(0, codes) == "success"
    assert exit_meaning(4, codes) == "unhandled_exception"
    assert exit_meaning(30, codes) == "task_failed or already_running"
    assert exit_meaning(-signal.SIGKILL, codes) == "killed by SIGKILL"
    assert "no [retcode] option has this value" in exit_meaning(2, codes)
