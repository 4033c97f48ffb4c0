"""A real ``luigi`` worker process for tests that kill, stop or signal it.

``write_module`` puts a pipeline module into a directory; ``start_worker`` runs ``python -m luigi`` on it
(against a luigid URL or the local scheduler) with its own config file, output to a log file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psutil

from helpers.luigid import wait_until


def write_module(directory: Path, name: str, source: str) -> None:
    """Write ``<directory>/<name>.py`` from ``source`` (dedented)."""
    (directory / f"{name}.py").write_text(textwrap.dedent(source))


def start_worker(
    directory: Path,
    module: str,
    task: list[str],
    scheduler_url: str | None = None,
    workers: int = 1,
    config: str = "",
    log_name: str = "worker.log",
) -> subprocess.Popen[bytes]:
    """``python -m luigi --module <module> <task...>`` in ``directory``, logging to ``log_name`` there."""
    config_file = directory / f"{log_name}.cfg"
    config_file.write_text(textwrap.dedent(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LUIGI_")}
    env["LUIGI_CONFIG_PATH"] = str(config_file)
    env["PYTHONPATH"] = os.pathsep.join([str(directory), env.get("PYTHONPATH", "")])
    where = ["--scheduler-url", scheduler_url] if scheduler_url else ["--local-scheduler"]
    argv = [sys.executable, "-m", "luigi", "--module", module, *task, "--workers", str(workers), *where]
    log = (directory / log_name).open("ab")
    return subprocess.Popen([*argv, "--no-lock"], cwd=directory, env=env, stdout=log, stderr=log)


def read_pids(path: Path) -> list[int]:
    """The pids a task wrote to ``path``, one a line (none yet: empty)."""
    if not path.exists():
        return []
    return [int(line) for line in path.read_text().split() if line.strip()]


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie counts as gone)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_all_gone(pids: list[int], timeout: float = 15.0) -> None:
    """Wait until none of ``pids`` runs; AssertionError naming the survivors past ``timeout``."""
    try:
        wait_until(lambda: not any(alive(pid) for pid in pids), timeout=timeout, what="processes to die")
    except AssertionError:
        survivors = [pid for pid in pids if alive(pid)]
        for pid in survivors:
            psutil.Process(pid).kill()
        raise AssertionError(f"processes outlived their worker: {survivors}") from None


def task_statuses(probe: Any) -> dict[str, dict[str, Any]]:
    """Every task luigid knows, by id (``task_list`` over HTTP)."""
    reply = probe.call("task_list", {"status": "", "upstream_status": ""}, verb="GET")
    return dict(reply.json()["response"])
