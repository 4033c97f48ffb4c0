"""luigid benchmark: the engine pipelines run through a real ``luigid``, and ``get_work`` latency.

    .venv/bin/python -m bench.luigid_bench          # wide, chain, lattice; N = 1k, 10k; workers 1, 2
    .venv/bin/python -m bench.luigid_bench --shapes wide --sizes 100000 --workers 2
    .venv/bin/python -m bench.luigid_bench --latency-only
    .venv/bin/python -m bench.luigid_bench --shapes wide --sizes 10000 --metrics-collector prometheus
    .venv/bin/python -m bench.luigid_bench --shapes wide --sizes 10000 --log-level INFO   # tasks that log

Each case gets a fresh ``luigid`` (own port and state file) and runs ``luigi.build(..., scheduler_url=...)``
in a subprocess with its own ``BENCH_DIR`` for the task outputs, under ``$BENCH_ROOT`` when set
(``BENCH_ROOT=/dev/shm`` takes the disk's file-creation cost out of the figures, as for
``bench.engine_bench``; luigid's state file stays in the system temp dir). luigid's peak RSS is its kernel
high-water mark (VmHWM), or the largest RSS psutil saw while polling where that is not available. The
latency case adds 100,000 pending tasks through the batched client, then times 1,000 ``get_work`` calls
of the worker that added them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

SHAPES = ("wide", "chain", "lattice", "cpu")
LUIGID = Path(sys.executable).parent / "luigid"
LUIGID_PID_VARIABLE = "BENCH_LUIGID_PID"  # the case's luigid, for a worker that reads its CPU


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PeakRss:
    """Polls a process's RSS in a thread; ``peak_mib()`` is the high-water mark (VmHWM when Linux has it)."""

    def __init__(self, pid: int) -> None:
        self._process = psutil.Process(pid)
        self._seen = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(0.05):
            with contextlib.suppress(psutil.Error):
                self._seen = max(self._seen, self._process.memory_info().rss)

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the process used so far: less sensitive to a busy machine than wall."""
        with contextlib.suppress(psutil.Error):
            times = self._process.cpu_times()
            return float(times.user + times.system)
        return float("nan")

    def peak_mib(self) -> float:
        self._stop.set()
        self._thread.join()
        try:
            for line in Path(f"/proc/{self._process.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return self._seen / (1 << 20)


@contextlib.contextmanager
def luigid(folder: str, metrics_collector: str = "default") -> Iterator[tuple[str, int]]:
    """A fresh luigid on a free port; yields (url, pid) once it answers, stops it afterwards."""
    port = _free_port()
    config = Path(folder, "luigid.cfg")
    config.write_text(f"[scheduler]\nrecord_task_history = false\nmetrics_collector = {metrics_collector}\n")
    env = dict(os.environ, LUIGI_CONFIG_PATH=str(config))
    argv = [str(LUIGID), "--port", str(port), "--state-path", os.path.join(folder, "state.db")]
    with open(os.path.join(folder, "luigid.log"), "wb") as log:
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"luigid did not start; see {folder}/luigid.log")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/", process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)


def run_case(shape: str, n: int, workers: int, url: str, log_level: str) -> dict[str, float]:
    """One pipeline through luigid, in this process (the child the parent started).

    At ``log_level`` INFO each run logs its start and end lines, which a worker shipping task logs keeps.
    """
    import luigi
    import luigi.interface  # imported before the clock starts, as ``import luigi`` leaves it to the first run
    from bench.engine_bench import root_task
    from bench.task_log_blocks import switch_if_asked

    save_marks = switch_if_asked()
    first_grant = _time_first_grant()
    started = time.perf_counter()
    ok = luigi.build([root_task(shape, n)], scheduler_url=url, workers=workers, log_level=log_level)
    wall = time.perf_counter() - started
    if save_marks is not None:
        save_marks()
    add_s = (first_grant[0] if first_grant else float("nan")) - started
    return {
        "ok": bool(ok),
        "wall_s": wall,
        "tasks_per_s": n / wall,
        "add_s": add_s,
        "add_tasks_per_s": n / add_s,
        "worker_cpu_s": _own_cpu_s(),
    }


def _time_first_grant() -> list[float]:
    """A list that gets the moment the worker's first ``get_work`` was answered: the add phase is over
    then (the held ``add_task`` calls go before it on the same connection, and luigid answers in order)."""
    from luigi.worker.loop import Worker

    moments: list[float] = []
    ask = Worker._get_work

    def timed(worker: Worker) -> Any:
        grant = ask(worker)
        if not moments:
            moments.append(time.perf_counter())
        return grant

    Worker._get_work = timed  # type: ignore[method-assign]
    return moments


def _own_cpu_s() -> float:
    """CPU seconds (user + system) of this process and its reaped children (a worker's task slots)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure_case(
    shape: str,
    n: int,
    workers: int,
    metrics_collector: str = "default",
    log_level: str = "WARNING",
    worker_env: dict[str, str] | None = None,
) -> dict[str, float]:
    """One case through a fresh luigid; ``worker_env`` is added to the worker's environment.

    The worker reports its own CPU, so cases may run side by side (``bench.task_log_cost --together``).
    """
    with (
        tempfile.TemporaryDirectory(prefix="luigid-bench-") as folder,
        tempfile.TemporaryDirectory(prefix="luigid-bench-out-", dir=os.environ.get("BENCH_ROOT")) as outputs,
    ):
        with (
            luigid(folder, metrics_collector) as (url, pid),
            open(os.path.join(folder, "worker.log"), "wb") as log,
        ):
            rss = PeakRss(pid)
            # The worker's log goes to a file, as luigid's does: read through a pipe, this process woke
            # for each line and took the CPU from the two being measured (some 20,000 preemptions a case).
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.luigid_bench",
                    "--one",
                    shape,
                    str(n),
                    str(workers),
                    url,
                    log_level,
                ],
                env={**os.environ, **(worker_env or {}), "BENCH_DIR": outputs, LUIGID_PID_VARIABLE: str(pid)},
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
            if out.returncode != 0:
                log.flush()
                tail = Path(log.name).read_text(errors="replace")[-4000:]
                raise RuntimeError(f"the bench's worker exited {out.returncode}; its log ends:\n{tail}")
            result = json.loads(out.stdout.strip().splitlines()[-1])
            result["luigid_cpu_s"] = rss.cpu_s()
            result["luigid_mib"] = rss.peak_mib()
    return result


def get_work_latency(
    pending: int = 100_000, calls: int = 1_000, metrics_collector: str = "default"
) -> dict[str, float]:
    """Median and p95 ``get_work`` time (ms) with ``pending`` tasks waiting, and how long adding took."""
    from luigi.rpc import RemoteScheduler

    with (
        tempfile.TemporaryDirectory(prefix="luigid-bench-") as folder,
        luigid(folder, metrics_collector) as (url, pid),
    ):
        rss = PeakRss(pid)
        client = RemoteScheduler(url)
        client.add_worker("bench-worker", {"workers": 1})
        started = time.perf_counter()
        for i in range(pending):
            client.add_task(
                task_id=f"Bench_{i}", status="PENDING", runnable=True, worker="bench-worker", family="Bench"
            )
        client.flush()
        add_s = time.perf_counter() - started
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            reply = client.get_work(worker="bench-worker", host="bench", current_tasks=[])
            times.append(time.perf_counter() - t0)
            if reply.get("task_id") is None:
                raise RuntimeError(f"get_work granted nothing: {reply!r}")
        client.close()
        times.sort()
        return {
            "add_s": add_s,
            "median_ms": statistics.median(times) * 1000,
            "p95_ms": times[int(len(times) * 0.95)] * 1000,
            "luigid_mib": rss.peak_mib(),
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)
    parser.add_argument("--sizes", nargs="+", type=int, default=[1_000, 10_000])
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--latency-only", action="store_true")
    parser.add_argument("--no-latency", action="store_true")
    parser.add_argument(
        "--metrics-collector",
        default="default",
        help="luigid's [scheduler] metrics_collector (e.g. prometheus)",
    )
    parser.add_argument(
        "--log-level", default="WARNING", help="the pipelines' log level (INFO: each task logs two lines)"
    )
    parser.add_argument(
        "--one", nargs=5, metavar=("SHAPE", "N", "WORKERS", "URL", "LEVEL"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.one:
        shape, n, workers, url, log_level = args.one
        print(json.dumps(run_case(shape, int(n), int(workers), url, log_level)))
        return
    if not args.latency_only:
        print(
            f"{'shape':<9}{'N':>8}{'workers':>8}{'tasks/s':>10}{'wall s':>9}{'add/s':>9}"
            f"{'worker CPU s':>14}{'luigid CPU s':>14}{'luigid MiB':>12}  ok"
        )
        for shape in args.shapes:
            for n in args.sizes:
                for workers in args.workers:
                    r = measure_case(shape, n, workers, args.metrics_collector, args.log_level)
                    print(
                        f"{shape:<9}{n:>8}{workers:>8}{r['tasks_per_s']:>10.0f}{r['wall_s']:>9.2f}"
                        f"{r['add_tasks_per_s']:>9.0f}"
                        f"{r['worker_cpu_s']:>14.2f}{r['luigid_cpu_s']:>14.2f}"
                        f"{r['luigid_mib']:>12.0f}  {r['ok']}",
                        flush=True,
                    )
    if not args.no_latency:
        r = get_work_latency(metrics_collector=args.metrics_collector)
        print(
            f"get_work with 100,000 pending: median {r['median_ms']:.2f} ms, p95 {r['p95_ms']:.2f} ms "
            f"(1,000 calls; adding took {r['add_s']:.1f} s; luigid peak {r['luigid_mib']:.0f} MiB)",
            flush=True,
        )


if __name__ == "__main__":
    main()
