"""A real Spark for the tests: ``local[2]``, and a standalone master plus one worker on loopback ports.

Use from a test module with ``pytest_plugins = ["helpers.spark_cluster"]``. Both fixtures are session-scoped
(one per xdist worker), need the ``pyspark`` package (extra ``spark``) and a Java runtime, and keep
everything Spark writes (logs, scratch space, the worker's directory) in the session's temp dir.
``SparkSetup.configure()`` writes the ``[spark]`` settings a test's tasks should run with.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import luigi
from helpers.luigid import free_port, wait_until
from helpers.services import require_module, require_program

LOOPBACK = "127.0.0.1"
START_TIMEOUT = 90.0  # two JVMs on a loaded 2-core machine
STOP_TIMEOUT = 15.0
# Short-lived test JVMs start about a third faster without the optimising compiler and with a simple GC.
FAST_START_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@dataclass
class SparkSetup:
    """Where Spark runs for a test, and the ``[spark]`` settings that make tasks run there."""

    master: str
    scratch: Path
    web_ui: str | None = None  # the standalone master's web UI
    extra: dict[str, str] = field(default_factory=dict)

    def settings(self, **options: str) -> dict[str, str]:
        """The ``[spark]`` settings for this Spark; ``conf`` and ``env`` in ``options`` add to these."""
        settings = {
            "master": self.master,
            # Everything Spark binds or writes stays on loopback and in the session's temp dir.
            "env": f"SPARK_LOCAL_IP={LOOPBACK}|SPARK_LOCAL_DIRS={self.scratch}",
            "conf": f"spark.ui.showConsoleProgress=false|spark.executor.extraJavaOptions={FAST_START_JVM}",
            "driver_memory": "512m",
            "driver_java_options": FAST_START_JVM,
            "executor_memory": "512m",
            **self.extra,
        }
        for key, value in options.items():
            settings[key] = f"{settings[key]}|{value}" if key in ("conf", "env") else value
        return settings

    def configure(self, **options: str) -> None:
        """Point ``[spark]`` at this Spark for the current test."""
        config = luigi.configuration.get_config()
        for key, value in self.settings(**options).items():
            config.set("spark", key, value)

    def config_file_section(self, **options: str) -> str:
        """The same settings as a ``[spark]`` section of a luigi.cfg, for a ``luigi`` command."""
        lines = [f"{key} = {value}" for key, value in self.settings(**options).items()]
        return "[spark]\n" + "\n".join(lines) + "\n"

    def applications(self) -> list[dict[str, Any]]:
        """The standalone master's applications, running and completed (its JSON status page)."""
        assert self.web_ui is not None, "only the standalone cluster has a master"
        status = _master_status(self.web_ui)
        return list(status.get("activeapps", [])) + list(status.get("completedapps", []))


def _spark_home() -> Path:
    require_module("pyspark", "spark")
    require_program("java", "openjdk-17-jre-headless")
    import pyspark

    return Path(pyspark.__file__).parent


@pytest.fixture(scope="session")
def spark_local(tmp_path_factory: pytest.TempPathFactory) -> SparkSetup:
    """Spark in the driver's own JVM with two threads."""
    _spark_home()
    return SparkSetup(master="local[2]", scratch=tmp_path_factory.mktemp("spark-local"))


def _master_status(web_ui: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{web_ui}/json/", timeout=5) as response:
        return dict(json.load(response))


def _daemon_env(home: Path, workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(home),
        SPARK_LOCAL_IP=LOOPBACK,
        SPARK_LOG_DIR=str(workdir / "logs"),
        SPARK_LOCAL_DIRS=str(workdir / "scratch"),
        SPARK_WORKER_DIR=str(workdir / "worker"),
        SPARK_DAEMON_MEMORY="256m",
        SPARK_DAEMON_JAVA_OPTS=FAST_START_JVM,
        SPARK_NO_DAEMONIZE="1",
        PYSPARK_PYTHON=sys.executable,
    )
    return env


def _start_daemon(home: Path, workdir: Path, name: str, args: list[str]) -> subprocess.Popen[bytes]:
    """Start a Spark daemon class in its own process group, logging to ``workdir/name.log``."""
    with open(workdir / f"{name}.log", "wb") as log:
        return subprocess.Popen(
            [str(home / "bin" / "spark-class"), *args],
            env=_daemon_env(home, workdir),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            start_new_session=True,
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a daemon started here, then anything left in the process group it leads (its executors)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _alive_workers(web_ui: str, processes: list[subprocess.Popen[bytes]]) -> int:
    for process in processes:
        if process.poll() is not None:
            raise RuntimeError(f"a Spark daemon exited with code {process.returncode}; see its log")
    try:
        return int(_master_status(web_ui).get("aliveworkers", 0))
    except (urllib.error.URLError, ConnectionError, json.JSONDecodeError):
        return 0


@pytest.fixture(scope="session")
def spark_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSetup]:
    """A standalone master and one worker (2 cores, 1 GiB), on free loopback ports."""
    home = _spark_home()
    workdir = tmp_path_factory.mktemp("spark-standalone")
    for sub in ("logs", "scratch", "worker"):
        (workdir / sub).mkdir()
    port, ui_port = free_port(), free_port()
    master_url, web_ui = f"spark://{LOOPBACK}:{port}", f"http://{LOOPBACK}:{ui_port}"
    master_class, worker_class = (
        "org.apache.spark.deploy.master.Master",
        "org.apache.spark.deploy.worker.Worker",
    )
    processes = [
        _start_daemon(
            home,
            workdir,
            "master",
            [master_class, "--host", LOOPBACK, "--port", str(port), "--webui-port", str(ui_port)],
        )
    ]
    try:
        worker_args = [worker_class, master_url, "--host", LOOPBACK, "--port", str(free_port())]
        worker_args += ["--webui-port", str(free_port()), "--cores", "2", "--memory", "1g"]
        worker_args += ["--work-dir", str(workdir / "worker")]
        processes.append(_start_daemon(home, workdir, "worker", worker_args))
        wait_until(
            lambda: _alive_workers(web_ui, processes) >= 1, START_TIMEOUT, "a Spark worker to register"
        )
        # The executors run Python from this environment; the driver finds it by itself.
        yield SparkSetup(
            master=master_url,
            scratch=workdir / "scratch",
            web_ui=web_ui,
            extra={"pyspark_python": sys.executable},
        )
    finally:
        for process in reversed(processes):
            _stop(process)
