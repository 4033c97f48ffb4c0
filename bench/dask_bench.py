"""200 tasks of 50 ms CPU each: on a two-worker Dask cluster against ``--workers 2`` locally.

    python -m bench.dask_bench [--tasks 200] [--cpu-ms 50]

Starts a ``dask scheduler`` and two single-threaded ``dask worker`` processes on loopback (no nanny),
runs the same pipeline both ways with a local scheduler, and prints tasks/s for each. On a 2-core machine
the two should be comparable; the point is that the same command scales with the cluster.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import luigi

OUT = Path(tempfile.mkdtemp(prefix="luigi-dask-bench-"))


class Burn(luigi.Task):
    """Spins the CPU for ``cpu_ms`` milliseconds, then writes its marker."""

    n = luigi.IntParameter()
    cpu_ms = luigi.IntParameter(default=50)
    run_id = luigi.Parameter()

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(str(OUT / self.run_id / f"{self.n}"))

    def run(self) -> None:
        end = time.process_time() + self.cpu_ms / 1000
        while time.process_time() < end:
            pass
        with self.output().open("w") as out:
            out.write("done")


class AllBurns(luigi.WrapperTask):
    tasks = luigi.IntParameter()
    cpu_ms = luigi.IntParameter(default=50)
    run_id = luigi.Parameter()

    def requires(self) -> list[Burn]:
        return [Burn(n=n, cpu_ms=self.cpu_ms, run_id=self.run_id) for n in range(self.tasks)]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_cluster(scratch: Path) -> tuple[str, list[subprocess.Popen[bytes]]]:
    """A scheduler and two workers; returns the address and the processes (wait for both workers)."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    dask = str(Path(sys.executable).parent / "dask")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env, "cwd": scratch}
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port)], **quiet)]
    for name in ("a", "b"):
        argv = [dask, "worker", address, "--nthreads", "1", "--no-nanny", "--name", name]
        procs.append(subprocess.Popen([*argv, "--local-directory", str(scratch / name)], **quiet))
    from distributed import Client

    with Client(address, timeout=60) as client:
        client.wait_for_workers(2, timeout=60)
    return address, procs


def timed(tasks: int, cpu_ms: int, run_id: str, **build: object) -> float:
    started = time.perf_counter()
    assert luigi.build([AllBurns(tasks=tasks, cpu_ms=cpu_ms, run_id=run_id)], local_scheduler=True, **build)
    return tasks / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--cpu-ms", type=int, default=50)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="luigi-dask-cluster-"))
    address, procs = start_cluster(scratch)
    try:
        local = timed(args.tasks, args.cpu_ms, "local", workers=2)
        config = luigi.configuration.get_config()
        config.set("worker", "executor", "dask")
        config.set("dask", "scheduler_address", address)
        on_dask = timed(args.tasks, args.cpu_ms, "dask", workers=2)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    print(
        f"{args.tasks} tasks of {args.cpu_ms} ms CPU: --workers 2 locally {local:.1f} tasks/s, "
        f"on two Dask workers {on_dask:.1f} tasks/s"
    )


if __name__ == "__main__":
    main()
