"""Scheduler benchmark: drives the in-process Scheduler through whole pipelines and prints tasks/s.

    .venv/bin/python -m bench.scheduler_bench                          # wide and chain, N = 1k, 10k, 100k
    .venv/bin/python -m bench.scheduler_bench --shapes wide --sizes 10000

Each case adds the graph the way a worker does (add_task PENDING with deps, leaves first reported as
missing), then loops get_work / add_task DONE until nothing is left, with ``prune_on_get_work`` on as
in local mode. No task runs: this measures the scheduler alone. ``wide_res`` is ``wide`` with every
leaf needing a unit of a resource, so each get_work takes the reservation walk (``rules.resources``).
"""

from __future__ import annotations

import argparse
import gc
import time

from luigi.scheduler import Scheduler, SchedulerConfig

WORKER = "bench-worker"


RES_CAPACITY = 4


def add_wide(sch: Scheduler, n: int, needs: dict[str, int] | None = None) -> None:
    """One root depending on n independent leaves (each needing ``needs``)."""
    leaves = [f"Leaf_{i}" for i in range(n)]
    sch.add_task(worker=WORKER, task_id="Root", family="Root", deps=leaves)
    for i, leaf in enumerate(leaves):
        sch.add_task(worker=WORKER, task_id=leaf, family="Leaf", params={"i": str(i)}, resources=needs)


def add_wide_res(sch: Scheduler, n: int) -> None:
    """``wide``, with every leaf needing one unit of ``slot`` (capacity ``RES_CAPACITY``)."""
    add_wide(sch, n, needs={"slot": 1})


def add_chain(sch: Scheduler, n: int) -> None:
    """Link_i depends on Link_{i-1}, reported from the end of the chain as a worker walks it."""
    for i in range(n - 1, -1, -1):
        deps = [f"Link_{i - 1}"] if i else []
        sch.add_task(worker=WORKER, task_id=f"Link_{i}", family="Link", params={"i": str(i)}, deps=deps)


SHAPES = {"wide": add_wide, "chain": add_chain, "wide_res": add_wide_res}


def run_all(sch: Scheduler) -> int:
    done = 0
    while True:
        reply = sch.get_work(worker=WORKER, host="bench", current_tasks=[])
        task_id = reply["task_id"]
        if task_id is None:
            return done
        sch.add_task(worker=WORKER, task_id=task_id, status="DONE", runnable=None)
        done += 1


def run_case(shape: str, n: int) -> dict[str, float]:
    gc.collect()  # do not bill this case for freeing the previous one
    config = SchedulerConfig(
        prune_on_get_work=True, record_task_history=False, resources={"slot": RES_CAPACITY}
    )
    sch = Scheduler(config)
    started = time.perf_counter()
    SHAPES[shape](sch, n)
    added = time.perf_counter()
    completed = run_all(sch)
    finished = time.perf_counter()
    return {
        "tasks": completed,
        "add_per_s": completed / (added - started),
        "run_per_s": completed / (finished - added),
        "overall_per_s": completed / (finished - started),
        "wall_s": finished - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shapes", nargs="+", default=["wide", "chain"], choices=sorted(SHAPES))
    parser.add_argument("--sizes", nargs="+", type=int, default=[1_000, 10_000, 100_000])
    args = parser.parse_args()
    header = ("shape", "N", "tasks", "add/s", "grant+done/s", "overall/s", "wall s")
    print("{:<8} {:>8} {:>8} {:>10} {:>13} {:>10} {:>8}".format(*header))
    for shape in args.shapes:
        for n in args.sizes:
            r = run_case(shape, n)
            print(
                f"{shape:<8} {n:>8} {r['tasks']:>8} {r['add_per_s']:>10.0f} {r['run_per_s']:>13.0f} "
                f"{r['overall_per_s']:>10.0f} {r['wall_s']:>8.2f}"
            )


if __name__ == "__main__":
    main()
