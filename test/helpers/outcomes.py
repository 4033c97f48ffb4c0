"""Running a task as a user would and taking what it failed with; acting on a service while it runs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import luigi
from luigi.event import Event

__all__ = ["build_failing", "meanwhile", "printed_without", "start_luigi_command"]

TEST_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_failing(task: luigi.Task) -> BaseException:
    """Run ``task`` with ``luigi.build``; it must fail (not DONE): return the exception its run raised."""
    caught: list[BaseException] = []
    type(task).event_handler(Event.FAILURE)(lambda _task, exc: caught.append(exc))
    result = luigi.build([task], local_scheduler=True, detailed_summary=True)
    assert result.status == luigi.LuigiStatusCode.FAILED
    assert not result.scheduling_succeeded
    [exc] = caught
    return exc


@contextmanager
def meanwhile(action: Callable[[], Any]) -> Iterator[Future[Any]]:
    """Run ``action`` on a thread while the block runs the task; its errors surface at the end."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(action)
        yield future
        future.result(timeout=60)


def printed_without(module: str, code: str) -> str:
    """What ``code`` prints in a fresh interpreter where ``module`` cannot be imported (not installed)."""
    blocked = f"import sys; sys.modules[{module!r}] = None\n"
    run = subprocess.run([sys.executable, "-c", blocked + code], capture_output=True, text=True, check=True)
    return run.stdout.strip()


def start_luigi_command(module: str, task: str, *args: str) -> subprocess.Popen[str]:
    """``luigi --module <module> <task> --local-scheduler <args>`` as a user types it, from this directory
    with ``test/`` importable (so ``helpers.*`` task modules load); both output streams on its stdout."""
    command = [sys.executable, "-m", "luigi", "--module", module, task, "--local-scheduler", *args]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), TEST_DIR])}
    return subprocess.Popen(
        command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
