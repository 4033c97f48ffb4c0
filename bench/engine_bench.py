"""Engine benchmark: runs generated no-op pipelines with the local scheduler and prints a table.

    .venv/bin/python -m bench.engine_bench                     # every shape, N = 1k, 10k, 100k, workers 1, 2
    .venv/bin/python -m bench.engine_bench --shapes wide --sizes 10000 --workers 1

Outputs go to a fresh temporary folder under ``$BENCH_ROOT`` (default: the system temp dir); set
``BENCH_ROOT=/dev/shm`` to take the disk's file-creation cost out of the figures.
Each case runs in a fresh subprocess (so peak memory is that run's own) with a fresh output folder.
``python -m bench.compare`` runs these cases (and ``bench.luigid_bench``'s) beside their floor, and A/B.
``noop-complete`` runs the wide pipeline a second time over the outputs of the first, timing only the
second run: it measures how fast already-done work is recognised.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

SHAPES = ("wide", "chain", "lattice", "noop-complete", "cpu")


def root_task(shape: str, n: int):  # noqa: ANN201 - returns a task of the generated pipeline
    from bench import pipelines

    if shape in ("wide", "noop-complete"):
        return pipelines.Wide(n=n)
    if shape == "cpu":
        return pipelines.WideSpin(n=n)
    if shape == "chain":
        return pipelines.Link(i=n - 1)
    return pipelines.Lattice(n=n)


def run_case(shape: str, n: int, workers: int) -> dict[str, float]:
    """Runs one case in this process and returns its measurements (the engine's modules loaded beforehand,
    which ``import luigi`` leaves to the first run, so the clock sees the run and not the imports)."""
    import luigi
    import luigi.interface
    import luigi.scheduler

    luigi.scheduler.Scheduler  # noqa: B018 - the local scheduler's engine, imported on first use

    if shape == "noop-complete":
        luigi.build([root_task(shape, n)], local_scheduler=True, workers=workers, log_level="WARNING")
    started = time.perf_counter()
    ok = luigi.build([root_task(shape, n)], local_scheduler=True, workers=workers, log_level="WARNING")
    wall = time.perf_counter() - started
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"ok": bool(ok), "wall_s": wall, "tasks_per_s": n / wall, "peak_mib": peak_mib}


def run_in_subprocess(shape: str, n: int, workers: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="luigi-bench-", dir=os.environ.get("BENCH_ROOT")) as folder:
        env = dict(os.environ, BENCH_DIR=folder)
        out = subprocess.run(
            [sys.executable, "-m", "bench.engine_bench", "--one", shape, str(n), str(workers)],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)
    parser.add_argument("--sizes", nargs="+", type=int, default=[1_000, 10_000, 100_000])
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--one", nargs=3, metavar=("SHAPE", "N", "WORKERS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        shape, n, workers = args.one
        print(json.dumps(run_case(shape, int(n), int(workers))))
        return
    print(f"{'shape':<14}{'N':>8}{'workers':>8}{'tasks/s':>10}{'wall s':>9}{'peak MiB':>10}  ok")
    for shape in args.shapes:
        for n in args.sizes:
            for workers in args.workers:
                r = run_in_subprocess(shape, n, workers)
                print(
                    f"{shape:<14}{n:>8}{workers:>8}{r['tasks_per_s']:>10.0f}{r['wall_s']:>9.2f}"
                    f"{r['peak_mib']:>10.0f}  {r['ok']}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
