"""luigid restart benchmark: how long a ``luigid`` with N tasks in its state takes to serve again, and
what the visualiser's first page and a ``task_list`` search then cost.

    .venv/bin/python -m bench.luigid_restart                         # N = 1,000,000 (builds the state)
    .venv/bin/python -m bench.luigid_restart --tasks 100000 --state /tmp/s100k.sqlite --browser

The state is built once (kept at ``--state`` when given): a scheduler on that SQLite file, in this
process, takes a ``wide`` pipeline's reports as luigid would (the wrapper naming every task first, then one
``add_task`` per task, flushed every 200 calls as a worker's batches are). Then a fresh ``luigid`` starts
on the file, and the bench times from the process's start to its first answer (``task_counts``), then the
calls the visualiser's first page makes (``task_counts`` and the first ``task_page``), and a
``task_list`` search matching one task. With ``--browser`` it also times the first render in headless
Chromium (``bench.visualiser_bench``). luigid's RSS after loading is its kernel high-water mark.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.luigid_bench import LUIGID, _free_port
from bench.visualiser_bench import Api

WORKER = "Worker(salt=1, workers=1, host=bench, username=bench, pid=1)"


def noop_id(i: int) -> str:
    return f"Noop_{i}_{i * 7919 % (1 << 40):010x}"


def build_state(path: Path, n: int) -> float:
    """A state file with a wide pipeline of ``n`` tasks, reported as a worker reports them; seconds taken."""
    from luigi.scheduler import Scheduler
    from luigi.scheduler.store import SqlStore

    started = time.perf_counter()
    sch = Scheduler(store=SqlStore.for_file(path))
    sch.load()
    ids = [noop_id(i) for i in range(n)]
    sch.add_task(worker=WORKER, task_id="Wide_n", deps=ids, family="Wide", params={"n": str(n)})
    sch.flush()
    for i, task_id in enumerate(ids):
        sch.add_task(
            worker=WORKER,
            task_id=task_id,
            family="Noop",
            module="bench.pipelines",
            params={"i": str(i)},
            param_visibilities={"i": 0},
            resources={},
        )
        if i % 200 == 199:
            sch.flush()
            sch.checkpoint(due_only=True)
    sch.close()
    return time.perf_counter() - started


def _vm_hwm_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _timed(call: Callable[[], Any], rounds: int = 3) -> float:
    """The median milliseconds of ``rounds`` calls."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measure_restart(path: Path, n: int, browser: bool) -> dict[str, float]:
    """Start luigid on ``path`` and time its first answer, the first page's calls and a search."""
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="luigid-restart-") as folder:
        config = Path(folder, "luigid.cfg")
        config.write_text("[scheduler]\nrecord_task_history = false\n")
        env = dict(os.environ, LUIGI_CONFIG_PATH=str(config))
        argv = [str(LUIGID), "--port", str(port), "--state-path", str(path)]
        with open(Path(folder, "luigid.log"), "wb") as log:
            started = time.perf_counter()
            process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            api = _first_answer(port, process, deadline=started + 600)
            serving_s = time.perf_counter() - started
            url = f"http://127.0.0.1:{port}"
            search = f"Noop(i={n // 2})"  # what the search box matches: the task's name with its parameters
            result = {
                "tasks": float(n),
                "serving_s": serving_s,
                "luigid_mib_after_load": _vm_hwm_mib(process.pid),
                "task_counts_ms": _timed(lambda: api.call("task_counts")),
                "first_task_page_ms": _timed(lambda: api.call("task_page", page_size=50)),
                # the first search after a start makes the index of names; the later ones use it
                "first_search_ms": _timed(lambda: api.call("task_list", search=search), rounds=1),
                "task_list_search_ms": _timed(lambda: api.call("task_list", search=search)),
                "task_list_search_hits": float(len(api.call("task_list", search=search))),
            }
            if browser:
                from bench.visualiser_bench import chromium, first_render_ms

                with chromium() as chrome:
                    result["first_render_ms"] = statistics.median(
                        first_render_ms(chrome, url) for _ in range(3)
                    )
            result["luigid_mib"] = _vm_hwm_mib(process.pid)
            return result
        finally:
            process.terminate()
            process.wait(timeout=120)


def _first_answer(port: int, process: subprocess.Popen[bytes], deadline: float) -> Api:
    """A client once luigid answers an RPC (its state is loaded by then)."""
    while True:
        if process.poll() is not None or time.perf_counter() > deadline:
            raise RuntimeError(f"luigid did not serve (exit code {process.poll()})")
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            api = Api(f"http://127.0.0.1:{port}")
            api.call("task_counts")
            return api
        time.sleep(0.02)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--state", type=Path, help="the state file (built there when missing, kept)")
    parser.add_argument("--browser", action="store_true", help="also time the first render in Chromium")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="luigid-restart-state-") as scratch:
        path = args.state or Path(scratch, "state.sqlite")
        if not path.exists():
            print(f"building a state of {args.tasks:,} tasks in {path} ...", flush=True)
            print(f"built in {build_state(path, args.tasks):.0f} s", flush=True)
        result = measure_restart(path, args.tasks, args.browser)
    for name, value in result.items():
        print(f"{name:<24}{value:>12,.1f}")


if __name__ == "__main__":
    main()
