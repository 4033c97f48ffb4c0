"""One benchmark entry point: every workload in a fresh process, beside its floor, optionally A/B.

    .venv/bin/python -m bench.compare --quick                      # under a minute: a look at everything
    .venv/bin/python -m bench.compare --workloads wide chain --sizes 1000 100000 --modes local-w1 local-w8
    .venv/bin/python -m bench.compare --workloads startup import --against ../main --rounds 10

Workloads: ``wide``, ``chain``, ``lattice`` and ``noop-complete`` are the generated pipelines of
``bench.pipelines`` (N tasks, ``--sizes`` from 10 to 1,000,000), run by ``bench.engine_bench`` (local
scheduler) or ``bench.luigid_bench`` (through a fresh ``luigid``), timed inside their process; ``tiny`` is the
11-task wide pipeline (N is 10 whatever ``--sizes`` says); ``cpu`` is the wide pipeline of tasks that each
spend 10 ms of CPU before writing (its floor counts the writes only). ``startup`` is the whole
``luigi --module bench.pipelines Wide --n 10 --local-scheduler`` process, once over fresh outputs and once
more over the same, already complete ones (the rerun cron makes most often); ``import`` is
``python -c "import luigi"``.
Modes: ``local-w1``, ``local-w2``, ``local-w8`` (the local scheduler, 1, 2 or 8 workers) and ``luigid-w1``,
``luigid-w2``, ``luigid-w8``; ``startup`` and ``import`` have one mode, ``process``.

Every run is a fresh process with its outputs on disk, in a fresh folder under ``$BENCH_ROOT`` (default: the
system temp dir). Beside every run the bench times its floor in the same sitting on the same disk: the same
number of atomic writes (a temporary file renamed into place, as ``LocalTarget`` writes) in a plain Python
loop, or as many existence checks for an already complete rerun; for the two process workloads the floor is
the bare interpreter (``python -c pass``) plus those writes. It reports the engine's own cost per task,
(run time - floor) / N.

``--against DIR`` runs each workload with DIR's code instead of this checkout's, in alternating rounds (this
checkout first in even rounds, DIR first in odd ones), and the table gives the ratio this/against. Each side
runs with its checkout first on ``PYTHONPATH`` (a plain path entry, as a regular ``pip install .`` puts the
package in site-packages; not an editable install's import hook) and this bench's own ``bench`` package
beside it, and with its byte code compiled once beforehand into a cache of its own (``PYTHONPYCACHEPREFIX``),
as an installed package has it. To measure an installed copy instead, install it into a virtualenv
(``python -m venv /tmp/v && /tmp/v/bin/pip install .``) and run this bench with that interpreter and
``--installed``, which leaves ``PYTHONPATH`` to the interpreter.

Results are JSON lines on stdout, one per run, then a markdown table of the medians. The process workloads
also give the CPU seconds the process used (``cpu_s``), which a busy machine disturbs less than wall time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench import engine_bench, luigid_bench

THIS_CHECKOUT = Path(__file__).resolve().parents[1]
ENGINE_WORKLOADS = ("wide", "chain", "lattice", "noop-complete", "tiny", "cpu")
PROCESS_WORKLOADS = ("startup", "import")
WORKLOADS = ENGINE_WORKLOADS + PROCESS_WORKLOADS
MODES = ("local-w1", "local-w2", "local-w8", "luigid-w1", "luigid-w2", "luigid-w8")
TINY_N = 10  # the 11-task pipeline: a wrapper over ten tasks
LATTICE_WIDTH = 100  # bench.pipelines.Lattice's default width
MIN_N, MAX_N = 10, 1_000_000
QUICK = {"workloads": ["tiny", "wide", "noop-complete", "startup", "import"], "sizes": [100], "rounds": 2}


@dataclass(frozen=True)
class Side:
    """One checkout under test: its name in the results, its code, its environment for child processes."""

    name: str
    checkout: Path
    env: dict[str, str]


@dataclass(frozen=True)
class Case:
    """One workload at one size in one mode."""

    workload: str
    mode: str
    n: int


def main() -> None:
    args = _parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as sitting:
        # Children run here, so that no checkout shadows another through the current directory.
        os.chdir(sitting)
        sides = [_side("this", THIS_CHECKOUT, Path(sitting), args.installed)]
        if args.against:
            sides.append(_side("against", Path(args.against).resolve(), Path(sitting), args.installed))
        for side in sides:
            _compile(side)
        results = []
        for case in _cases(args):
            for round_number in range(args.rounds):
                order = sides if round_number % 2 == 0 else sides[::-1]
                for side in order:
                    for result in run_case(case, side):
                        result["round"] = round_number
                        print(json.dumps(result), flush=True)
                        results.append(result)
    print()
    print(markdown_table(results))


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument("--sizes", nargs="+", type=_size, default=[1_000, 10_000], help="N, 10 to 1,000,000")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=["local-w1", "local-w2"])
    parser.add_argument("--rounds", type=int, default=3, help="runs of each case on each side")
    parser.add_argument(
        "--against", metavar="DIR", help="a checkout to compare with (its code on PYTHONPATH)"
    )
    parser.add_argument(
        "--installed", action="store_true", help="use the luigi this interpreter has installed"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, few workloads: under a minute")
    args = parser.parse_args()
    if args.quick:
        given = set(sys.argv)
        args.workloads = args.workloads if "--workloads" in given else QUICK["workloads"]
        args.sizes = args.sizes if "--sizes" in given else QUICK["sizes"]
        args.rounds = args.rounds if "--rounds" in given else QUICK["rounds"]
        args.modes = args.modes if "--modes" in given else ["local-w1"]
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    if args.against and not Path(args.against, "luigi", "__init__.py").is_file():
        parser.error(f"--against {args.against}: no luigi package there; give the root of a checkout")
    if args.against and args.installed:
        parser.error("--against compares two checkouts; --installed measures this interpreter's luigi alone")
    return args


def _size(text: str) -> int:
    n = int(text)
    if not MIN_N <= n <= MAX_N:
        raise argparse.ArgumentTypeError(f"N must be from {MIN_N} to {MAX_N:,}, got {n}")
    return n


def _side(name: str, checkout: Path, sitting: Path, installed: bool) -> Side:
    """The environment a side's child processes run in (see the module's docstring)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package runs from byte code
    env["PYTHONPYCACHEPREFIX"] = str(sitting / f"pycache-{name}")
    bench_only = sitting / f"bench-{name}"
    bench_only.mkdir()
    (bench_only / "bench").symlink_to(
        THIS_CHECKOUT / "bench"
    )  # our bench code, whichever checkout is measured
    paths = [str(bench_only)] if installed else [str(bench_only), str(checkout)]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return Side(name, checkout, env)


def _compile(side: Side) -> None:
    """Byte-compile the side's package (not its backends) and the bench into its cache, as installed."""
    folders = [str(side.checkout / "luigi"), str(THIS_CHECKOUT / "bench")]
    skipped = "/contrib/|/static/|/templates/"
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-x", skipped, *folders], env=side.env, check=True
    )


def _cases(args: argparse.Namespace) -> Iterator[Case]:
    for workload in args.workloads:
        if workload in PROCESS_WORKLOADS:
            yield Case(workload, "process", 1)
            continue
        sizes = [TINY_N] if workload == "tiny" else args.sizes
        for n in sizes:
            for mode in args.modes:
                if workload == "noop-complete" and mode.startswith("luigid"):
                    continue  # bench.luigid_bench runs fresh outputs only
                yield Case(workload, mode, n)


def run_case(case: Case, side: Side) -> list[dict]:
    """One run of ``case`` with ``side``'s code, each result beside its floor (two for ``startup``)."""
    with _environment(side.env):
        if case.workload == "import":
            return [_process_result(case, side, [sys.executable, "-c", "import luigi"], writes=0, checks=0)]
        if case.workload == "startup":
            return _startup(case, side)
        return [_engine_result(case, side)]


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    """``env`` as this process's environment, which the engine and luigid benches hand their children."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _engine_result(case: Case, side: Side) -> dict:
    shape = "wide" if case.workload == "tiny" else case.workload
    scheduler, workers = case.mode.split("-w")
    if scheduler == "luigid":
        measured = luigid_bench.measure_case(shape, case.n, int(workers))
    else:
        measured = engine_bench.run_in_subprocess(shape, case.n, int(workers))
    files = _written_by(shape, case.n)
    rerun = shape == "noop-complete"  # only the rerun is timed: it checks the outputs, writes none
    floor = _floor(writes=0 if rerun else files, checks=files if rerun else 0)
    return _result(case, side, measured["wall_s"], floor, measured)


def _written_by(shape: str, n: int) -> int:
    """How many output files the pipeline writes (a wrapper writes none)."""
    if shape == "lattice":
        return max(1, n // LATTICE_WIDTH) * LATTICE_WIDTH
    return n


def _startup(case: Case, side: Side) -> list[dict]:
    """The whole ``luigi`` command over fresh outputs, then again over the same, now complete ones."""
    argv = [*_luigi_command(), "--module", "bench.pipelines", "Wide", "--n", str(TINY_N), "--local-scheduler"]
    tasks = TINY_N + 1
    with _outputs() as folder:
        os.environ["BENCH_DIR"] = folder
        fresh = _process_result(Case("startup-fresh", case.mode, tasks), side, argv, writes=TINY_N, checks=0)
        complete = _process_result(
            Case("startup-complete", case.mode, tasks), side, argv, writes=0, checks=tasks
        )
    return [fresh, complete]


def _luigi_command() -> list[str]:
    """The ``luigi`` console script beside this interpreter, as users run it (else what it runs)."""
    script = Path(sys.executable).parent / "luigi"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from luigi.cmdline import luigi_run; sys.exit(luigi_run())"]


def _process_result(case: Case, side: Side, argv: list[str], writes: int, checks: int) -> dict:
    """A whole process, timed from here: wall time and the CPU it used; its floor, the bare interpreter."""
    wall, cpu = _timed_process(argv)
    bare_wall, _ = _timed_process([sys.executable, "-c", "pass"])
    floor = bare_wall + _floor(writes, checks)
    return _result(case, side, wall, floor, {"ok": True, "cpu_s": round(cpu, 6)})


def _timed_process(argv: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-4000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


@contextlib.contextmanager
def _outputs() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="bench-out-", dir=os.environ.get("BENCH_ROOT")) as folder:
        yield folder


def _floor(writes: int, checks: int) -> float:
    """Seconds for ``writes`` atomic writes (temporary file, rename), then ``checks`` existence checks,
    laid out as the pipelines lay out their outputs (a folder per name prefix), in a plain loop."""
    with _outputs() as folder:
        started = time.perf_counter()
        for i in range(writes):
            _atomic_write(folder, f"noop-{i}")
        for i in range(checks):
            os.path.exists(os.path.join(folder, "noo", f"noop-{i}"))
        return time.perf_counter() - started


def _atomic_write(folder: str, name: str) -> None:
    path = os.path.join(folder, name[:3], name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}-tmp-{os.getpid()}"
    with open(temporary, "w") as out:
        out.write("x")
    os.replace(temporary, path)


def _result(case: Case, side: Side, wall: float, floor: float, measured: dict) -> dict:
    wall, floor = round(wall, 6), round(floor, 6)  # microseconds: finer is noise
    return {
        "workload": case.workload,
        "mode": case.mode,
        "n": case.n,
        "side": side.name,
        "checkout": str(side.checkout),
        "wall_s": wall,
        "floor_s": floor,
        "overhead_us_per_task": round((wall - floor) / case.n * 1e6, 3),
        **{key: value for key, value in measured.items() if key != "wall_s"},
    }


def markdown_table(results: list[dict]) -> str:
    """Medians per workload, mode, N and side; with two sides, the ratio this/against of the wall times."""
    groups: dict[tuple[str, str, int], dict[str, list[dict]]] = {}
    for result in results:
        key = (result["workload"], result["mode"], result["n"])
        groups.setdefault(key, {}).setdefault(result["side"], []).append(result)
    lines = [
        "| workload | mode | N | side | runs | wall s | floor s | overhead µs/task | cpu s | this/against |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for (workload, mode, n), by_side in groups.items():
        medians = {side: statistics.median(r["wall_s"] for r in runs) for side, runs in by_side.items()}
        ratio = f"{medians['this'] / medians['against']:.2f}" if len(medians) == 2 else ""
        for side, runs in by_side.items():
            floor = statistics.median(r["floor_s"] for r in runs)
            overhead = statistics.median(r["overhead_us_per_task"] for r in runs)
            lines.append(
                f"| {workload} | {mode} | {n} | {side} | {len(runs)} | {medians[side]:.3f} | {floor:.3f} "
                f"| {overhead:.1f} | {_median_cpu(runs)} | {ratio if side == 'this' else ''} |"
            )
    return "\n".join(lines)


def _median_cpu(runs: list[dict]) -> str:
    """The median CPU seconds of whole-process runs (steadier than wall time on a busy machine), else ''."""
    cpu = [r["cpu_s"] for r in runs if "cpu_s" in r]
    return f"{statistics.median(cpu):.3f}" if cpu else ""


if __name__ == "__main__":
    main()
