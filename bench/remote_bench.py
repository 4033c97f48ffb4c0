"""200 tasks of 50 ms CPU each, ``--workers 2``: locally, on two Dask workers, on a two-CPU Ray cluster.

    python -m bench.remote_bench [--tasks 200] [--cpu-ms 50] [--only local,dask,ray]

Starts a ``dask scheduler`` (from a folder where this module is not importable, as clusters are run) and
two single-threaded ``dask worker`` processes, and a Ray head with two CPUs, all on loopback; runs the
same pipeline each way with a local scheduler and prints tasks/s for each. On a 2-core machine they
should be comparable: the point is that the same command scales with the cluster, and what a task's trip
through each cluster costs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import luigi

REPO = Path(__file__).resolve().parent.parent


class Burn(luigi.Task):
    """Spins the CPU for ``cpu_ms`` milliseconds, then writes its marker under ``root``."""

    n = luigi.IntParameter()
    cpu_ms = luigi.IntParameter(default=50)
    root = luigi.Parameter()

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(os.path.join(self.root, str(self.n)))

    def run(self) -> None:
        end = time.process_time() + self.cpu_ms / 1000
        while time.process_time() < end:
            pass
        with self.output().open("w") as out:
            out.write("done")


class AllBurns(luigi.WrapperTask):
    tasks = luigi.IntParameter()
    cpu_ms = luigi.IntParameter(default=50)
    root = luigi.Parameter()

    def requires(self) -> list[Burn]:
        return [Burn(n=n, cpu_ms=self.cpu_ms, root=self.root) for n in range(self.tasks)]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _env(python_path: str, **extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": python_path, **extra}


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def dask_cluster(scratch: Path) -> Iterator[None]:
    """A scheduler (only luigi on its path) and two one-thread workers (with this module on theirs)."""
    address = f"tcp://127.0.0.1:{_free_port()}"
    bin_dir = Path(sys.executable).parent
    only_luigi = scratch / "only-luigi"
    only_luigi.mkdir()
    (only_luigi / "luigi").symlink_to(REPO / "luigi")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler = [
        str(bin_dir / "dask"),
        "scheduler",
        "--host",
        "127.0.0.1",
        "--port",
        address.rsplit(":", 1)[1],
    ]
    procs = [subprocess.Popen(scheduler, cwd=only_luigi, env=_env(str(only_luigi)), **quiet)]  # type: ignore[call-overload]
    for name in ("a", "b"):
        argv = [str(bin_dir / "dask"), "worker", address, "--nthreads", "1", "--no-nanny", "--name", name]
        argv += ["--local-directory", str(scratch / name)]
        procs.append(subprocess.Popen(argv, cwd=scratch, env=_env(str(REPO)), **quiet))  # type: ignore[call-overload]
    try:
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=60)
        config = luigi.configuration.get_config()
        config.set("worker", "executor", "dask")
        config.set("dask", "scheduler_address", address)
        yield
    finally:
        _stop(procs)


@contextmanager
def ray_cluster(scratch: Path) -> Iterator[None]:
    """A Ray head with two CPUs on loopback (this module on its workers' path); stopped by its pid."""
    loopback = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
    os.environ.update(loopback)
    port = _free_port()
    temp_dir = tempfile.mkdtemp(prefix="lrb-", dir="/tmp")  # short: Ray's sockets live under it
    argv = [str(Path(sys.executable).parent / "ray"), "start", "--head", "--block", "--port", str(port)]
    argv += ["--node-ip-address", "127.0.0.1", "--num-cpus", "2", "--temp-dir", temp_dir]
    argv += ["--include-dashboard", "false", "--disable-usage-stats"]
    argv += ["--ray-client-server-port", str(_free_port()), "--dashboard-port", str(_free_port())]
    log = open(scratch / "ray.log", "wb")  # noqa: SIM115 - the head writes until it stops
    head = subprocess.Popen(
        argv, env=_env(str(REPO), **loopback), stdout=log, stderr=log, start_new_session=True
    )
    try:
        raylet = Path(temp_dir) / "session_latest" / "sockets" / "raylet"
        give_up = time.monotonic() + 90
        while not raylet.exists():
            if time.monotonic() > give_up or head.poll() is not None:
                raise RuntimeError(f"the Ray head did not start: see {scratch / 'ray.log'}")
            time.sleep(0.2)
        config = luigi.configuration.get_config()
        config.set("worker", "executor", "ray")
        config.set("ray", "address", f"127.0.0.1:{port}")
        yield
    finally:
        _stop([head])
        shutil.rmtree(temp_dir, ignore_errors=True)


def timed(tasks: int, cpu_ms: int, root: Path) -> float:
    """Tasks per second of one build of the pipeline, ``--workers 2``, with a local scheduler."""
    started = time.perf_counter()
    pipeline = AllBurns(tasks=tasks, cpu_ms=cpu_ms, root=str(root))
    assert luigi.build([pipeline], local_scheduler=True, workers=2)
    return tasks / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--cpu-ms", type=int, default=50)
    parser.add_argument("--only", default="local,dask,ray", help="comma-separated: local, dask, ray")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="luigi-remote-bench-"))
    clusters: dict[str, Callable[[Path], Any]] = {
        "local": _no_cluster,
        "dask": dask_cluster,
        "ray": ray_cluster,
    }
    for name in args.only.split(","):
        (scratch / name).mkdir()
        with clusters[name](scratch / name):
            rate = timed(args.tasks, args.cpu_ms, scratch / name / "out")
        luigi.configuration.get_config().set("worker", "executor", "local")
        print(
            f"{args.tasks} tasks of {args.cpu_ms} ms CPU, --workers 2, {name}: {rate:.1f} tasks/s", flush=True
        )


@contextmanager
def _no_cluster(scratch: Path) -> Iterator[None]:
    yield


if __name__ == "__main__":
    main()
