"""What keeping task logs costs, measured inside one case: blocks of runs with the capture on and off.

    .venv/bin/python -m bench.task_log_blocks                       # wide, N = 10,000, blocks of 100
    .venv/bin/python -m bench.task_log_blocks --block 500 --cases 5
    .venv/bin/python -m bench.task_log_blocks --same                # A/A: both sides off, the noise floor
    .venv/bin/python -m bench.task_log_blocks --part capture        # or ship: one half of the cost
    .venv/bin/python -m bench.task_log_blocks --log-level WARNING   # luigid_bench's own level: no lines

One ``bench.luigid_bench`` case (a real luigid, a worker at INFO, so each run logs two lines; at
``--log-level WARNING``, ``bench.luigid_bench``'s default, a run writes nothing), whose worker
switches the capture every ``--block`` runs, in the order on, off, off, on (and again): "off" is what
``[worker] task_log_max_bytes = 0`` does, "on" the default. The machine's drift over a few seconds falls
on both sides alike, which separate cases (``bench.task_log_cost``) cannot ensure on a shared machine.
The wall time, the worker's CPU and luigid's CPU are read at each block's first run; the first block (the
warm-up) and the last (cut short) are left out. Cost: the mean "on" block over the mean "off" block - 1.
With ``--same`` both sides are "off": what that reads is the noise of the machine, not a cost (on this
VM, within 1.5% with blocks of 100; blocks of 500 read +3% to +4% there, a drift the pattern does not
cancel, so the default is 100). ``--part`` splits the cost: ``capture`` captures each "on" run and drops
its log, ``ship`` captures nothing and ships a sample about as long as a run's two lines in its place.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.luigid_bench import LUIGID_PID_VARIABLE, measure_case
from bench.task_log_cost import OFF

BLOCKS_VARIABLE = "BENCH_LOG_BLOCK"  # runs per block, for the worker the case starts
MARKS_VARIABLE = "BENCH_LOG_MARKS"  # where that worker writes what it read at each block's start
PART_VARIABLE = "BENCH_LOG_PART"  # what "on" does: all (capture and ship), capture only, ship only
PATTERN = ("on", "off", "off", "on")
# What "--part ship" sends for a run in place of its captured output: two lines about as long as a run's two.
SAMPLE_TAIL = (
    "INFO: [pid 12345] Worker Worker(salt=123456789, workers=1, host=bench, pid=12345) running   Leaf(i=1)\n"
) * 2


def switch_if_asked() -> Callable[[], None] | None:
    """In the bench's worker process: switch the capture in blocks if this case's environment asks for
    it; then the function that saves the marks once the runs have ended."""
    block = os.environ.get(BLOCKS_VARIABLE)
    if not block:
        return None
    marks = alternate_capture(int(block), int(os.environ[LUIGID_PID_VARIABLE]))
    return lambda: Path(os.environ[MARKS_VARIABLE]).write_text(json.dumps(marks))


def alternate_capture(block: int, luigid_pid: int) -> list[dict[str, Any]]:
    """In the bench's worker process: switch the capture every ``block`` runs (see the module docstring);
    the marks filled in as the runs go."""
    import psutil

    from bench.luigid_bench import _own_cpu_s
    from luigi.worker.execution import InProcessRunner
    from luigi.worker.output_capture import _new_run_id

    part = os.environ.get(PART_VARIABLE, "all")
    luigid = psutil.Process(luigid_pid)
    marks: list[dict[str, Any]] = []
    original = InProcessRunner._run_captured
    limit: list[int] = []
    runs = itertools.count()

    def switching(self: InProcessRunner, process: Any, reporter: Any) -> Any:
        if not limit:
            limit.append(self._options.task_log_max_bytes)  # what this worker would capture
        if next(runs) % block == 0:
            times = luigid.cpu_times()
            side = PATTERN[len(marks) % len(PATTERN)]
            marks.append({"side": side, "wall": time.perf_counter(), "worker_cpu": _own_cpu_s(),
                          "luigid_cpu": times.user + times.system})  # fmt: skip
            self._options.task_log_max_bytes = limit[0] if side == "on" else 0
        if part == "all" or not self._options.task_log_max_bytes:
            return original(self, process, reporter)
        if part == "capture":
            original(self, process, reporter)
            return None  # captured, never shipped
        self._options.task_log_max_bytes = 0  # "ship": nothing captured, a sample shipped as the run's log
        try:
            original(self, process, reporter)
        finally:
            self._options.task_log_max_bytes = limit[0]
        return {"run": _new_run_id(), "offset": 0, "chunk": SAMPLE_TAIL}

    InProcessRunner._run_captured = switching  # type: ignore[method-assign]
    return marks


def block_costs(marks: list[dict[str, Any]]) -> dict[str, float]:
    """Mean "on" block over mean "off" block - 1, for wall time and for worker + luigid CPU."""
    blocks: dict[str, dict[str, list[float]]] = {side: {"wall": [], "cpu": []} for side in ("on", "off")}
    for start, end in zip(marks[1:-1], marks[2:], strict=True):  # the warm-up block left out
        side = blocks[start["side"]]
        side["wall"].append(end["wall"] - start["wall"])
        side["cpu"].append(
            end["worker_cpu"] - start["worker_cpu"] + end["luigid_cpu"] - start["luigid_cpu"]
        )
    return {
        kind: statistics.mean(blocks["on"][kind]) / statistics.mean(blocks["off"][kind]) - 1
        for kind in ("wall", "cpu")
    }


def one_case(
    shape: str, n: int, block: int, folder: str, same: bool, part: str, log_level: str
) -> dict[str, float]:
    marks_path = os.path.join(folder, "marks.json")
    worker_env = {BLOCKS_VARIABLE: str(block), MARKS_VARIABLE: marks_path, PART_VARIABLE: part}
    if same:  # this worker captures nothing, so its "on" blocks are "off" ones too
        config = os.path.join(folder, "off.cfg")
        Path(config).write_text(OFF)
        worker_env["LUIGI_CONFIG_PATH"] = config
    measure_case(shape, n, 1, log_level=log_level, worker_env=worker_env)
    with open(marks_path) as marks:
        return block_costs(json.load(marks))


def main() -> None:
    import tempfile

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shape", default="wide", choices=("wide", "chain", "lattice"))
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--block", type=int, default=100)
    parser.add_argument("--cases", type=int, default=3)
    parser.add_argument("--same", action="store_true", help="both sides off (A/A): the noise floor")
    parser.add_argument(
        "--part", default="all", choices=("all", "capture", "ship"),
        help='what "on" does: capture and ship (all), capture and drop, or ship a sample without capturing',
    )  # fmt: skip
    parser.add_argument(
        "--log-level", default="INFO", choices=("INFO", "WARNING"),
        help="the worker's log level: INFO logs two lines a run, WARNING (luigid_bench's default) none",
    )  # fmt: skip
    args = parser.parse_args()
    costs = []
    with tempfile.TemporaryDirectory(prefix="task-log-blocks-") as folder:
        for number in range(1, args.cases + 1):
            costs.append(
                one_case(args.shape, args.size, args.block, folder, args.same, args.part, args.log_level)
            )
            print(f"case {number}: wall {costs[-1]['wall']:+.1%}  CPU {costs[-1]['cpu']:+.1%}", flush=True)
    wall = statistics.median(cost["wall"] for cost in costs)
    cpu = statistics.median(cost["cpu"] for cost in costs)
    what = "A/A noise (both off)" if args.same else f"task logs cost ({args.part})"
    print(
        f"{what}, {args.shape} N={args.size} workers=1 {args.log_level}, blocks of {args.block}: "
        f"wall {wall:+.1%}, CPU {cpu:+.1%} (median of {args.cases} cases)"
    )


if __name__ == "__main__":
    main()
