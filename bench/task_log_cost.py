"""What keeping task logs costs: ``bench.luigid_bench`` cases with the worker's capture on and off, A/B.

    .venv/bin/python -m bench.task_log_cost                          # wide, N = 10,000, workers 1, INFO
    .venv/bin/python -m bench.task_log_cost --workers 2 --rounds 4
    .venv/bin/python -m bench.task_log_cost --log-level WARNING      # runs that write nothing

Each round runs off, on, on, off (ABBA, so that the machine's drift falls on both sides alike); "off" is
``[worker] task_log_max_bytes = 0`` (nothing captured, nothing shipped), "on" the default (1 MiB per run).
At INFO each run logs two lines, which "on" captures and ships to luigid with the run's final status. The
cost reported is the median over rounds of (on + on) / (off + off) - 1, for wall time and for the CPU of
worker and luigid together, and then the fastest "on" case over the fastest "off" one (the two the
machine disturbed least). These machines' speed drifts from minute to minute: run several rounds.

With ``--together`` each round runs one "off" and one "on" case at the same time instead (each with its
own luigid; which starts first alternates), so that whatever slows the machine slows both alike; the
cost is then the median of on / off - 1. The two share the machine's cores, so their absolute times are
longer than a case's alone; their ratio is what is compared.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
from pathlib import Path

from bench.luigid_bench import SHAPES, measure_case

OFF = "[worker]\ntask_log_max_bytes = 0\n"
ON = "[worker]\n"
ORDER = ("off", "on", "on", "off")


Cases = dict[str, list[dict[str, float]]]


def one_round(shape: str, n: int, workers: int, log_level: str, configs: dict[str, str]) -> Cases:
    """One ABBA round: its cases, by side."""
    results: Cases = {"off": [], "on": []}
    for side in ORDER:
        results[side].append(_case(shape, n, workers, log_level, configs[side]))
    return results


def together_round(
    shape: str, n: int, workers: int, log_level: str, configs: dict[str, str], first: str
) -> Cases:
    """One "off" and one "on" case at the same time, ``first`` started first: their cases, by side."""
    results: Cases = {"off": [], "on": []}
    failures: list[BaseException] = []

    def run(side: str) -> None:
        try:
            results[side].append(_case(shape, n, workers, log_level, configs[side]))
        except BaseException as error:  # raised again in the main thread, which can report it
            failures.append(error)

    threads = [threading.Thread(target=run, args=(side,)) for side in (first, _other(first))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return results


def _other(side: str) -> str:
    return "on" if side == "off" else "off"


def _case(shape: str, n: int, workers: int, log_level: str, config: str) -> dict[str, float]:
    # the worker's config (luigid is given its own)
    return measure_case(shape, n, workers, log_level=log_level, worker_env={"LUIGI_CONFIG_PATH": config})


def total_ratios(cases: Cases) -> dict[str, float]:
    """The wall and CPU ratios of the "on" cases' total to the "off" cases' total."""
    wall = {side: sum(r["wall_s"] for r in rs) for side, rs in cases.items()}
    cpu = {side: sum(_cpu(r) for r in rs) for side, rs in cases.items()}
    return {"wall": wall["on"] / wall["off"], "cpu": cpu["on"] / cpu["off"]}


def _cpu(case: dict[str, float]) -> float:
    return case["worker_cpu_s"] + case["luigid_cpu_s"]


def fastest_ratios(cases: Cases) -> dict[str, float]:
    """The fastest "on" case over the fastest "off" one: the two least disturbed by the machine's drift."""
    return {
        "wall": min(r["wall_s"] for r in cases["on"]) / min(r["wall_s"] for r in cases["off"]),
        "cpu": min(_cpu(r) for r in cases["on"]) / min(_cpu(r) for r in cases["off"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shape", default="wide", choices=SHAPES)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--together", action="store_true", help="run each round's off and on cases at once")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="task-log-cost-") as folder:
        configs = {"off": str(Path(folder, "off.cfg")), "on": str(Path(folder, "on.cfg"))}
        Path(configs["off"]).write_text(OFF)
        Path(configs["on"]).write_text(ON)
        ratios = []
        cases: Cases = {"off": [], "on": []}
        for number in range(1, args.rounds + 1):
            if args.together:
                first = "off" if number % 2 else "on"
                round_cases = together_round(
                    args.shape, args.size, args.workers, args.log_level, configs, first
                )
            else:
                round_cases = one_round(args.shape, args.size, args.workers, args.log_level, configs)
            for side, results in round_cases.items():
                cases[side].extend(results)
            ratios.append(total_ratios(round_cases))
            last = ratios[-1]
            print(f"round {number}: wall {last['wall'] - 1:+.1%}  CPU {last['cpu'] - 1:+.1%}", flush=True)
    wall = statistics.median(r["wall"] for r in ratios) - 1
    cpu = statistics.median(r["cpu"] for r in ratios) - 1
    kind = "side-by-side" if args.together else "ABBA"
    print(
        f"task logs cost, {args.shape} N={args.size} workers={args.workers} {args.log_level}: "
        f"wall {wall:+.1%}, CPU {cpu:+.1%} (median of {args.rounds} {kind} rounds)"
    )
    fastest = fastest_ratios(cases)
    print(f"fastest on / fastest off: wall {fastest['wall'] - 1:+.1%}, CPU {fastest['cpu'] - 1:+.1%}")


if __name__ == "__main__":
    main()
