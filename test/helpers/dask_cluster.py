"""A real Dask cluster for the tests: a ``dask scheduler`` and two ``dask worker`` processes on loopback.

Use from a test module with ``pytest_plugins = ["helpers.dask_cluster"]``. ``dask_cluster`` is
session-scoped (one per xdist worker); ``own_dask_cluster`` is a fresh one for a test that kills a worker.
Both need the ``distributed`` package (extra ``dask``) and keep what Dask writes in a temp dir. The
scheduler gives up on a task at the first worker lost under it (``allowed-failures = 0``), so a dead Dask
worker reaches luigi as a failed task, to be retried under luigi's rules.

As clusters are really run, the Dask scheduler cannot import the tasks' modules: it runs in a folder of its
own with only ``luigi`` on its ``PYTHONPATH`` (checked at start: ``helpers.dask_tasks`` must not import
there). The Dask workers can, because ``test/`` and the repository are on theirs, as for any remote worker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import luigi
from helpers.luigid import free_port, wait_until
from helpers.services import require_module

LOOPBACK = "127.0.0.1"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0
TEST_DIR = Path(__file__).resolve().parent.parent


@dataclass
class DaskCluster:
    """A running Dask scheduler and its workers (by name), each a process of this test run."""

    address: str
    scratch: Path
    scheduler: subprocess.Popen[bytes]
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def worker_pids(self) -> set[int]:
        return {process.pid for process in self.workers.values()}

    def workers_alive(self) -> bool:
        return all(process.poll() is None for process in self.workers.values())

    def configure(self, **worker_options: str) -> None:
        """Make the current test's workers run their tasks on this cluster."""
        config = luigi.configuration.get_config()
        config.set("worker", "executor", "dask")
        config.set("dask", "scheduler_address", self.address)
        for key, value in worker_options.items():
            config.set("worker", key, value)

    def kill_worker(self, name: str) -> None:
        """SIGKILL a Dask worker (it runs without a nanny, so nothing restarts it)."""
        process = self.workers.pop(name)
        process.send_signal(signal.SIGKILL)
        process.wait(STOP_TIMEOUT)

    def stop(self) -> None:
        for process in [*self.workers.values(), self.scheduler]:
            process.send_signal(signal.SIGTERM)
        for process in [*self.workers.values(), self.scheduler]:
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(STOP_TIMEOUT)


TASK_MODULE = "helpers.dask_tasks"  # what the workers import and the scheduler must not


def _environment(scratch: Path, python_path: str) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": python_path,
        "DASK_TEMPORARY_DIRECTORY": str(scratch),
        "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0",
        "DASK_DISTRIBUTED__WORKER__DAEMON": "False",  # a timed task forks a task slot on its Dask worker
    }


def worker_python_path() -> str:
    """The Dask workers' path: ``test/`` (helpers), the repository (examples, luigi) and the caller's."""
    paths = (str(TEST_DIR), str(TEST_DIR.parent), os.environ.get("PYTHONPATH", ""))
    return os.pathsep.join(path for path in paths if path)


def luigi_only_python_path(scratch: Path) -> str:
    """A folder holding only this checkout's ``luigi`` (a link), so nothing else of the repository imports."""
    folder = scratch / "luigi-only"
    folder.mkdir(exist_ok=True)
    link = folder / "luigi"
    if not link.exists():
        link.symlink_to(TEST_DIR.parent / "luigi", target_is_directory=True)
    return str(folder)


def scheduler_can_import(module: str, scratch: Path) -> bool:
    """Whether ``module`` imports in the Dask scheduler's folder and environment."""
    where = scratch / "scheduler"
    where.mkdir(exist_ok=True)
    probe = [sys.executable, "-c", f"import {module}"]
    env = _environment(scratch, luigi_only_python_path(scratch))
    return subprocess.run(probe, cwd=where, env=env, capture_output=True).returncode == 0


def _spawn(
    args: list[str], scratch: Path, cwd: Path, python_path: str, log_name: str
) -> subprocess.Popen[bytes]:
    log = open(scratch / log_name, "wb")  # noqa: SIM115 - the process keeps writing after we return
    return subprocess.Popen(
        [sys.executable, "-m", *args], cwd=cwd, env=_environment(scratch, python_path), stdout=log, stderr=log
    )


def _worker_count(address: str) -> int:
    from distributed import Client

    try:
        with Client(address, timeout=2, set_as_default=False) as client:
            info: dict[str, Any] = client.scheduler_info()
            return len(info.get("workers", {}))
    except OSError:
        return 0


def start_cluster(scratch: Path, workers: int = 2) -> DaskCluster:
    """Start a scheduler (without the task modules) and ``workers`` workers (two threads each, with them)
    on free loopback ports in ``scratch``."""
    require_module("distributed", "dask")
    scratch.mkdir(parents=True, exist_ok=True)
    assert not scheduler_can_import(TASK_MODULE, scratch), "the Dask scheduler must not see the task modules"
    port = free_port()
    address = f"tcp://{LOOPBACK}:{port}"
    scheduler_args = ["distributed.cli.dask_scheduler", "--host", LOOPBACK, "--port", str(port)]
    scheduler = _spawn(
        [*scheduler_args, "--no-dashboard"],
        scratch,
        scratch / "scheduler",
        luigi_only_python_path(scratch),
        "scheduler.log",
    )
    cluster = DaskCluster(address, scratch, scheduler)
    for number in range(1, workers + 1):
        name = f"dask-worker-{number}"
        worker_args = ["distributed.cli.dask_worker", address, "--host", LOOPBACK, "--name", name]
        worker_args += ["--no-nanny", "--nthreads", "2", "--no-dashboard", "--local-directory", str(scratch)]
        cluster.workers[name] = _spawn(worker_args, scratch, scratch, worker_python_path(), f"{name}.log")
    try:
        wait_until(lambda: _worker_count(address) == workers, START_TIMEOUT, f"{workers} Dask workers")
    except AssertionError:
        cluster.stop()
        raise
    return cluster


@pytest.fixture(scope="session")
def dask_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaskCluster]:
    cluster = start_cluster(tmp_path_factory.mktemp("dask"))
    yield cluster
    cluster.stop()


@pytest.fixture
def own_dask_cluster(tmp_path: Path) -> Iterator[DaskCluster]:
    cluster = start_cluster(tmp_path / "dask")
    yield cluster
    cluster.stop()
