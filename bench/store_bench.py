"""Store benchmark: what persisting every change costs the scheduler, as luigid would run it.

    .venv/bin/python -m bench.store_bench                    # wide graph, N = 10,000
    .venv/bin/python -m bench.store_bench --sizes 1000 100000 --shapes wide chain

Each case drives the in-process Scheduler through a whole graph (add_task for every task, then
get_work / add_task DONE until nothing is left) twice: without a store, and with a SqlStore on a
SQLite file with ``flush()`` after every call, as the server does before answering each request.
Prints tasks/s for both and the flush latency (mean and 99th percentile).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.scheduler_bench import add_chain, add_wide, run_all
from luigi.scheduler import Scheduler, SchedulerConfig
from luigi.scheduler.store import SqlStore


class FlushingScheduler:
    """A scheduler whose every RPC call is followed by ``flush()``, timing the flushes."""

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler
        self.flush_seconds: list[float] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._scheduler, name)

        def call_then_flush(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            started = time.perf_counter()
            self._scheduler.flush()
            self.flush_seconds.append(time.perf_counter() - started)
            return result

        return call_then_flush


def run_case(shape: str, n: int, state_dir: Path | None) -> dict[str, float]:
    """Add and run a graph of ``n`` tasks; with ``state_dir``, persist to a SQLite file there."""
    gc.collect()
    config = SchedulerConfig(record_task_history=False)
    driver: Any
    if state_dir is None:
        scheduler = Scheduler(config)
        driver = scheduler
    else:
        scheduler = Scheduler(config, store=SqlStore.for_file(state_dir / f"{shape}-{n}.sqlite"))
        scheduler.load()
        driver = FlushingScheduler(scheduler)
    started = time.perf_counter()
    (add_wide if shape == "wide" else add_chain)(driver, n)
    completed = run_all(driver)
    wall = time.perf_counter() - started
    scheduler.close()
    flushes = sorted(getattr(driver, "flush_seconds", []))
    return {
        "tasks": completed,
        "per_s": completed / wall,
        "wall_s": wall,
        "flush_mean_us": statistics.fmean(flushes) * 1e6 if flushes else 0.0,
        "flush_p99_us": flushes[int(len(flushes) * 0.99)] * 1e6 if flushes else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shapes", nargs="+", default=["wide"], choices=["wide", "chain"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000])
    parser.add_argument("--dir", type=Path, help="where the SQLite files go (default: a temporary dir)")
    args = parser.parse_args()
    header = ("shape", "N", "store", "tasks", "tasks/s", "wall s", "flush µs", "p99 µs")
    print("{:<6} {:>7} {:>6} {:>7} {:>9} {:>8} {:>9} {:>8}".format(*header))
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for shape in args.shapes:
            for n in args.sizes:
                for label, state_dir in (("none", None), ("sqlite", Path(tmp))):
                    r = run_case(shape, n, state_dir)
                    print(
                        f"{shape:<6} {n:>7} {label:>6} {r['tasks']:>7} {r['per_s']:>9.0f} "
                        f"{r['wall_s']:>8.2f} {r['flush_mean_us']:>9.0f} {r['flush_p99_us']:>8.0f}"
                    )


if __name__ == "__main__":
    main()
