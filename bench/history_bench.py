"""Task-history benchmark: the cost of recording history on a real ``luigid``.

    .venv/bin/python -m bench.history_bench                  # N = 10,000, wide no-op pipeline, 5 rounds
    .venv/bin/python -m bench.history_bench --sizes 1000 10000 --rounds 3

Each round starts a fresh ``luigid`` subprocess twice, once with ``record_task_history = false`` and
once with it on (SQLite beside the state file), and runs the wide no-op pipeline (``bench.pipelines``)
through it from a client subprocess with one worker. It reports the client's wall time, the tasks per
second, luigid's CPU time and the part of it its history writer thread used (Linux), as medians over
the rounds; the cost of history in percent is the median of the per-round costs (the cases alternate,
so a busy moment on a shared machine weighs on both). For the history runs it also reports how long
after the pipeline ended the history had written everything (its lag), and the events written and lost.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

LUIGID = Path(sys.executable).parent / "luigid"
START_TIMEOUT = 60.0
DRAIN_TIMEOUT = 300.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _get(url: str, method: str = "GET") -> tuple[int, bytes]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError:
        return 0, b""


def start_luigid(folder: Path, record: bool) -> tuple[subprocess.Popen[bytes], str]:
    """A luigid on a free port with its own config and state; returns it with its base URL once it answers."""
    config = folder / "luigid.cfg"
    config.write_text(
        textwrap.dedent(
            f"""\
            [scheduler]
            record_task_history = {str(record).lower()}
            [task_history]
            db_connection = sqlite:///{folder / "history.sqlite"}
            """
        )
    )
    port = free_port()
    env = dict(os.environ, LUIGI_CONFIG_PATH=str(config))
    argv = [str(LUIGID), "--port", str(port), "--state-path", str(folder / "state.pickle")]
    with open(folder / "luigid.log", "wb") as log:
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT
    while _get(base + "/", "HEAD")[0] != 204:
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"luigid did not start: {(folder / 'luigid.log').read_text()}")
        time.sleep(0.05)
    return process, base


def run_client(base: str, n: int, folder: Path) -> dict[str, Any]:
    """Run the wide pipeline against ``base`` in a subprocess; its own measurements."""
    env = dict(os.environ, BENCH_DIR=str(folder / "outputs"))
    done = subprocess.run(
        [sys.executable, "-m", "bench.history_bench", "--client", base + "/", str(n)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def client_main(url: str, n: int) -> None:
    import luigi
    from bench import pipelines

    started = time.perf_counter()
    ok = luigi.build([pipelines.Wide(n=n)], scheduler_url=url, workers=1, log_level="WARNING")
    wall = time.perf_counter() - started
    print(json.dumps({"ok": bool(ok), "wall_s": wall, "tasks_per_s": n / wall}))


def wait_for_history(base: str) -> dict[str, Any]:
    """How long until the history wrote every event (from now), with its final counters."""
    started = time.perf_counter()
    while True:
        status, body = _get(base + "/history/api/status")
        if status != 200:
            return {"lag_s": float("nan"), "written": -1, "lost": -1}
        counters = json.loads(body)
        if counters["buffered"] == 0 or time.perf_counter() - started > DRAIN_TIMEOUT:
            return {
                "lag_s": time.perf_counter() - started,
                "written": counters["written"],
                "lost": counters["lost"],
            }
        time.sleep(0.05)


def writer_cpu_s(pid: int) -> float:
    """CPU seconds of luigid's history writer: the thread it runs at niceness 10 (Linux /proc; else 0)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[16]) == 10:  # nice: see luigi.db_task_history.writer
                total += (int(fields[11]) + int(fields[12])) / tick
    return total


def run_case(n: int, record: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="luigi-history-bench-") as tmp:
        folder = Path(tmp)
        process, base = start_luigid(folder, record)
        try:
            result = run_client(base, n, folder)
            if record:
                result.update(wait_for_history(base))
            result["writer_cpu_s"] = writer_cpu_s(process.pid)
        finally:
            process.send_signal(signal.SIGTERM)
            _, _, usage = os.wait4(process.pid, 0)
            process.returncode = 0  # reaped above
    result["luigid_cpu_s"] = usage.ru_utime + usage.ru_stime
    return result


def report(n: int, rounds: int) -> None:
    """Run the two cases side by side ``rounds`` times, then print the medians and the median cost.

    The order alternates and the cost is taken per round (each history run against the run without
    history next to it), so a busy moment on a shared machine weighs on both sides of a comparison.
    """
    results: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    costs: list[float] = []
    for round_number in range(rounds):
        for record in (False, True) if round_number % 2 == 0 else (True, False):
            result = run_case(n, record)
            results[record].append(result)
            print(
                f"  round {round_number + 1} {'sqlite' if record else 'off'}: {json.dumps(result)}",
                flush=True,
            )
        off, on = results[False][-1], results[True][-1]
        costs.append(100.0 * (on["wall_s"] - off["wall_s"]) / off["wall_s"])
    off, on = _median_run(results[False]), _median_run(results[True])
    cost = statistics.median(costs)
    print(
        f"{n:>7} {'off':>8} {off['wall_s']:>8.2f} {off['tasks_per_s']:>8.0f} {'':>8} "
        f"{off['luigid_cpu_s']:>8.2f} {'':>9} {off['ok']!s:>5}",
        flush=True,
    )
    print(
        f"{n:>7} {'sqlite':>8} {on['wall_s']:>8.2f} {on['tasks_per_s']:>8.0f} {cost:>7.1f}% "
        f"{on['luigid_cpu_s']:>8.2f} {on['writer_cpu_s']:>9.2f} {on['ok']!s:>5}"
        f"   lag {on['lag_s']:.2f}s, {on['written']} events written, {on['lost']} lost",
        flush=True,
    )


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each measurement's median over the runs (``ok`` only if every run succeeded)."""
    merged: dict[str, Any] = {"ok": all(run["ok"] for run in runs)}
    for key in runs[0]:
        if key != "ok":
            merged[key] = statistics.median(run[key] for run in runs)
    return merged


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000])
    parser.add_argument("--rounds", type=int, default=5, help="runs of each case (medians are reported)")
    parser.add_argument("--client", nargs=2, metavar=("URL", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client_main(args.client[0], int(args.client[1]))
        return
    header = ("N", "history", "wall s", "tasks/s", "cost", "cpu s", "writer s", "ok")
    print("{:>7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>5}".format(*header))
    for n in args.sizes:
        report(n, args.rounds)


if __name__ == "__main__":
    main()
