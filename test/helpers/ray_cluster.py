"""A real Ray cluster for the tests: ``ray start --head`` with two CPUs on loopback, in a private temp dir.

Use from a test module with ``pytest_plugins = ["helpers.ray_cluster"]``; ``ray_cluster`` is one cluster
per test module (a Ray worker a test kills is replaced by the raylet; each luigi worker joins it as a Ray
driver and leaves it at its end). Every
port is a free one and the node's address is 127.0.0.1, with ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (here
and in the test process) so that Ray does not swap loopback for the host's address: all traffic stays on
127.0.0.1. Teardown stops the head (its process group) and then kills, by pid, any process of the cluster
still alive: no process is left behind. The Ray workers import the tasks' modules because ``test/`` and the
repository are on their ``PYTHONPATH``. Needs the ``ray`` package (extra ``ray``): skips locally without
it, fails under CI.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

import luigi
from helpers.dask_cluster import worker_python_path
from helpers.luigid import free_port, wait_until
from helpers.services import require_module

LOOPBACK = "127.0.0.1"
START_TIMEOUT = 90.0
STOP_TIMEOUT = 20.0
CPUS = 2
LOOPBACK_ONLY = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


@dataclass
class RayCluster:
    """A running Ray head node (the ``ray start --block`` process and what it started)."""

    address: str
    temp_dir: Path
    head: subprocess.Popen[bytes]

    def configure(self, **worker_options: str) -> None:
        """Make the current test's workers run their tasks on this cluster."""
        config = luigi.configuration.get_config()
        config.set("worker", "executor", "ray")
        config.set("ray", "address", self.address)
        for key, value in worker_options.items():
            config.set("worker", key, value)

    def processes(self) -> list[psutil.Process]:
        """Every live process of the cluster (the head's descendants)."""
        try:
            return psutil.Process(self.head.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def worker_pids(self) -> set[int]:
        """Every Ray worker process the cluster has started, alive or not (from the names of their logs:
        a job's workers exit when its driver leaves)."""
        logs = (self.temp_dir / "session_latest" / "logs").glob("python-core-worker-*_*.log")
        return {int(log.stem.rsplit("_", 1)[1]) for log in logs}

    def workers_alive(self) -> bool:
        """Whether the node still runs (the raylet replaces a Ray worker that died)."""
        return self.head.poll() is None

    def stop(self) -> None:
        """Stop the head and everything it started; kill by pid what outlives it."""
        left = self.processes()
        if self.head.poll() is None:
            self.head.send_signal(signal.SIGTERM)  # the head stops what it started (not its group: it hangs)
        try:
            self.head.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(self.head.pid, signal.SIGKILL)
            self.head.wait(STOP_TIMEOUT)
        _, alive = psutil.wait_procs(left, timeout=STOP_TIMEOUT)
        for process in alive:
            process.kill()
        _, alive = psutil.wait_procs(alive, timeout=STOP_TIMEOUT)
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        assert not alive, f"Ray processes outlived the cluster: {[p.pid for p in alive]}"


def _ray_program() -> str:
    return str(Path(sys.executable).parent / "ray")


def start_cluster() -> RayCluster:
    """Start a head node with ``CPUS`` CPUs on free loopback ports; wait until its raylet is up."""
    require_module("ray", "ray")
    # A short path: Ray's unix sockets live under it, and a socket path may not pass 107 bytes.
    temp_dir = Path(tempfile.mkdtemp(prefix="lr-", dir="/tmp"))
    port = free_port()
    ports = {
        "--ray-client-server-port": free_port(),
        "--dashboard-port": free_port(),
        "--dashboard-agent-listen-port": free_port(),
        "--dashboard-agent-grpc-port": free_port(),
        "--metrics-export-port": free_port(),
        "--runtime-env-agent-port": free_port(),
        "--node-manager-port": free_port(),
        "--object-manager-port": free_port(),
    }
    argv = [_ray_program(), "start", "--head", "--block", "--node-ip-address", LOOPBACK, "--port", str(port)]
    argv += ["--num-cpus", str(CPUS), "--temp-dir", str(temp_dir), "--include-dashboard", "false"]
    argv += ["--disable-usage-stats", *(str(item) for pair in ports.items() for item in pair)]
    env = {**os.environ, **LOOPBACK_ONLY, "PYTHONPATH": worker_python_path()}
    log = open(temp_dir / "head.log", "wb")  # noqa: SIM115 - the head keeps writing after we return
    head = subprocess.Popen(argv, env=env, stdout=log, stderr=log, start_new_session=True)
    cluster = RayCluster(f"{LOOPBACK}:{port}", temp_dir, head)
    raylet_socket = temp_dir / "session_latest" / "sockets" / "raylet"
    try:
        wait_until(lambda: raylet_socket.exists() or head.poll() is not None, START_TIMEOUT, "the raylet")
        assert head.poll() is None, (temp_dir / "head.log").read_text()[-3000:]
    except AssertionError:
        cluster.stop()
        raise
    return cluster


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[RayCluster]:
    saved = {name: os.environ.get(name) for name in LOOPBACK_ONLY}
    os.environ.update(LOOPBACK_ONLY)  # the luigi worker joins the cluster as a driver from this process
    try:
        cluster = start_cluster()
        try:
            yield cluster
        finally:
            import ray

            ray.shutdown()  # in case a test left this process a driver
            cluster.stop()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
