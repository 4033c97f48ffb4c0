"""Fault injection: a pipeline run by real workers against a real luigid while things break, seeded.

``python -m bench.faults --seeds 1-50`` runs, for each seed, a pipeline of a few hundred tasks (20-200 ms
each; each appends ``<task id> <pid>`` to a marker file when it starts) with two or three worker
processes, while faults come at seeded moments: ``kill -9`` of luigid (restarted on the same state),
``kill -9`` of a worker or of a task slot, SIGSTOP/SIGCONT of a worker beyond the disconnect delay,
SIGTERM of a worker, a TCP proxy between one worker and luigid that drops or blackholes connections, and
(as root) the state directory on a tiny tmpfs that fills up. A supervisor keeps the workers' number up
until every task is complete. Then: every task complete (none lost); every task that ran twice had the
process of its earlier run hit by a fault first (any other double run is a defect); luigid's memory.
``test/faults`` runs one short seed of the same in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import psutil

LUIGID = Path(sys.executable).parent / "luigid"
# "[pid 123] Worker Worker(..., pid=120) running   Step(i=4)": which worker a run's process belonged to.
_RUN_LINE = re.compile(r"\[pid (\d+)\] Worker Worker\(.*?pid=(\d+)\) running")
# Faults that cut a worker off from luigid for a while (its reports may arrive late, stale).
_SILENCING = ("stop_worker", "proxy_")
# luigid dropping a silent worker: "Worker Worker(..., pid=120) timed out (no contact for >=3.0s)".
_CUT_OFF_LINE = re.compile(r"Worker Worker\(.*?pid=(\d+)\) timed out")
DISCONNECT_DELAY = 3.0

PIPELINE = """
import os, random, time
import luigi

MARKERS = {markers!r}
OUT = {out!r}
N = {n}

class Step(luigi.Task):
    i = luigi.IntParameter()

    def requires(self):
        rng = random.Random(self.i)
        return [Step(i=j) for j in sorted({{rng.randrange(self.i) for _ in range(2)}})] if self.i >= 8 else []

    def output(self):
        return luigi.LocalTarget(os.path.join(OUT, f"{{self.i}}.done"))

    def run(self):
        with open(MARKERS, "a") as markers:
            markers.write(f"{{self.task_id}} {{os.getpid()}}\\n")
        time.sleep(random.Random(self.i).uniform(0.02, 0.2))
        with self.output().open("w") as out:
            out.write("ok")

class All(luigi.WrapperTask):
    def requires(self):
        return [Step(i=i) for i in range(N)]
"""


@dataclasses.dataclass
class Fault:
    """One injected fault: when, what, and the processes it hit (their earlier runs may rerun)."""

    at: float
    kind: str
    pids: set[int]


@dataclasses.dataclass
class Result:
    """What one seed's run found."""

    seed: int
    tasks: int
    faults: dict[str, int]
    reruns_explained: int  # the earlier run's process was hit by a fault
    reruns_cut_off: int  # the earlier run's worker was dropped by luigid for silence (e.g. around a restart)
    reruns_unexplained: list[str]
    lost: int
    seconds: float
    luigid_rss_start: int
    luigid_rss_end: int


class Proxy:
    """A TCP proxy to luigid that can pass, drop (reset every connection) or blackhole (answer nothing)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.mode = "pass"
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def set_mode(self, mode: str) -> None:
        self.mode = mode
        if mode != "pass":
            with self._lock:
                for conn in self._open:
                    with contextlib.suppress(OSError):
                        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
                        conn.close()
                self._open.clear()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            if self.mode == "drop":
                client.close()
                continue
            if self.mode == "blackhole":
                with self._lock:
                    self._open.append(client)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.extend([client, upstream])
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while self.mode == "pass":
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        for conn in (source, sink):
            with contextlib.suppress(OSError):
                conn.close()

    def close(self) -> None:
        self._server.close()
        self.set_mode("drop")


class Run:
    """One seed: the processes, the fault log, and the checks at the end."""

    def __init__(self, seed: int, workdir: Path, tasks: int, duration: float, tmpfs: bool) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.workdir = workdir
        self.tasks = tasks
        self.duration = duration
        self.markers = workdir / "markers.txt"
        self.out = workdir / "out"
        self.out.mkdir()
        self.state_dir = workdir / "state"
        self.state_dir.mkdir()
        self.tmpfs = tmpfs and _mount_tmpfs(self.state_dir)
        self.port = _free_port()
        self.luigid: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self.faults: list[Fault] = []
        self.proxy: Proxy | None = None
        self.rss_start = 0
        (workdir / "faultpipe.py").write_text(
            PIPELINE.format(markers=str(self.markers), out=str(self.out), n=tasks)
        )
        config = f"""
            [scheduler]
            worker_disconnect_delay = {DISCONNECT_DELAY}
            retry_delay = 0.5
            prune_interval = 1
            [worker]
            ping_interval = 0.5
            wait_interval = 0.2
            wait_jitter = 0.2
            keep_alive = true
            shutdown_grace = 5
            scheduler_unreachable_timeout = 120
            [retcode]
            """
        (workdir / "client.cfg").write_text(textwrap.dedent(config))

    # -- processes --------------------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LUIGI_")}
        env["LUIGI_CONFIG_PATH"] = str(self.workdir / "client.cfg")
        env["PYTHONPATH"] = os.pathsep.join([str(self.workdir), env.get("PYTHONPATH", "")])
        return env

    def start_luigid(self) -> None:
        log = (self.workdir / "luigid.log").open("ab")
        argv = [str(LUIGID), "--port", str(self.port), "--address", "127.0.0.1"]
        argv += ["--state-path", str(self.state_dir / "state.db")]
        self.luigid = subprocess.Popen(argv, env=self._env(), stdout=log, stderr=log, cwd=self.workdir)
        _wait(lambda: _answers(self.port), 30, "luigid to answer")
        if not self.rss_start:
            self.rss_start = psutil.Process(self.luigid.pid).memory_info().rss

    def start_worker(self, index: int) -> subprocess.Popen[bytes]:
        url_port = self.proxy.port if (index == 0 and self.proxy is not None) else self.port
        processes = 2 if index % 2 else 1
        log = (self.workdir / f"worker{index}.log").open("ab")
        argv = [sys.executable, "-m", "luigi", "--module", "faultpipe", "All", "--workers", str(processes)]
        argv += ["--scheduler-url", f"http://127.0.0.1:{url_port}/", "--no-lock"]
        return subprocess.Popen(argv, env=self._env(), stdout=log, stderr=log, cwd=self.workdir)

    def keep_workers_up(self, count: int) -> None:
        while len(self.workers) < count:
            self.workers.append(self.start_worker(len(self.workers)))
        for index, worker in enumerate(self.workers):
            if worker.poll() is not None and not self.complete():
                self.workers[index] = self.start_worker(index)
        if self.luigid is not None and self.luigid.poll() is not None:
            self.start_luigid()

    def complete(self) -> bool:
        return len(list(self.out.glob("*.done"))) >= self.tasks

    # -- faults -----------------------------------------------------------------------------------------

    def _hit(self, kind: str, root: int) -> set[int]:
        try:
            tree = {root, *(p.pid for p in psutil.Process(root).children(recursive=True))}
        except psutil.Error:
            tree = {root}
        self.faults.append(Fault(time.monotonic(), kind, tree))
        return tree

    def inject(self) -> None:
        kinds = ["kill9_luigid", "kill9_worker", "kill9_slot", "stop_worker", "term_worker", "proxy"]
        if self.tmpfs:
            kinds.append("fill_disk")
        kind = self.rng.choice(kinds)
        alive = [w for w in self.workers if w.poll() is None]
        if kind == "kill9_luigid" and self.luigid is not None:
            self.faults.append(Fault(time.monotonic(), kind, set()))
            self.luigid.kill()
            self.luigid.wait()
            self.start_luigid()
        elif kind in ("kill9_worker", "term_worker", "stop_worker") and alive:
            victim = self.rng.choice(alive)
            self._hit(kind, victim.pid)
            if kind == "kill9_worker":
                victim.kill()
            elif kind == "term_worker":
                victim.terminate()
            else:
                victim.send_signal(signal.SIGSTOP)
                time.sleep(DISCONNECT_DELAY + 1.5)  # the fault itself: silent beyond the disconnect delay
                victim.send_signal(signal.SIGCONT)
        elif kind == "kill9_slot":
            slots = [c for w in alive for c in _children(w.pid) if "luigi" in " ".join(_cmdline(c))]
            if slots:
                slot = self.rng.choice(slots)
                self._hit(kind, slot)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(slot, signal.SIGKILL)
        elif kind == "proxy" and self.proxy is not None and self.workers:
            mode = self.rng.choice(["drop", "blackhole"])
            self._hit(f"proxy_{mode}", self.workers[0].pid)
            self.proxy.set_mode(mode)
            time.sleep(self.rng.uniform(0.5, DISCONNECT_DELAY + 1.5))
            self.proxy.set_mode("pass")
        elif kind == "fill_disk":
            self.faults.append(Fault(time.monotonic(), kind, set()))
            filler = _fill(self.state_dir)
            time.sleep(self.rng.uniform(0.5, 2.0))
            filler.unlink()

    # -- the run ----------------------------------------------------------------------------------------

    def run(self) -> Result:
        started = time.monotonic()
        self.start_luigid()
        self.proxy = Proxy(self.port)
        worker_count = 2 + self.seed % 2
        try:
            self.keep_workers_up(worker_count)
            fault_until = started + self.duration
            while not self.complete():
                if time.monotonic() > started + self.duration * 6 + 120:
                    break
                if time.monotonic() < fault_until:
                    time.sleep(self.rng.uniform(0.3, 1.5))  # the seeded moment of the next fault
                    self.inject()
                else:
                    time.sleep(0.2)  # supervising: restart what died until the pipeline is complete
                self.keep_workers_up(worker_count)
            rss_end = self._settled_rss()
        finally:
            self.stop()
        return self._check(time.monotonic() - started, rss_end)

    def _settled_rss(self) -> int:
        for worker in self.workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.wait(timeout=30)
        if self.luigid is None or self.luigid.poll() is not None:
            return 0
        return int(psutil.Process(self.luigid.pid).memory_info().rss)

    def stop(self) -> None:
        for worker in self.workers:
            if worker.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    worker.send_signal(signal.SIGCONT)
                    worker.kill()
                worker.wait()
        if self.luigid is not None and self.luigid.poll() is None:
            self.luigid.terminate()
            self.luigid.wait(timeout=30)
        if self.proxy is not None:
            self.proxy.close()
        if self.tmpfs:
            subprocess.run(["umount", "-l", str(self.state_dir)], check=False)

    def _who_ran_and_who_was_dropped(self) -> tuple[dict[int, int], set[int]]:
        """From the logs: the worker pid of each run's process, and the workers luigid dropped."""
        worker_of: dict[int, int] = {}
        for log in self.workdir.glob("worker*.log"):
            for run_pid, worker_pid in _RUN_LINE.findall(_read(log)):
                worker_of[int(run_pid)] = int(worker_pid)
        cut_off = {int(pid) for pid in _CUT_OFF_LINE.findall(_read(self.workdir / "luigid.log"))}
        return worker_of, cut_off

    def _check(self, seconds: float, rss_end: int) -> Result:
        runs: dict[str, list[int]] = {}
        for line in self.markers.read_text().splitlines() if self.markers.exists() else []:
            task_id, pid = line.split()
            runs.setdefault(task_id, []).append(int(pid))
        hit = set().union(*(fault.pids for fault in self.faults)) if self.faults else set()
        silenced = set().union(*(f.pids for f in self.faults if f.kind.startswith(_SILENCING))) or set()
        worker_of, cut_off = self._who_ran_and_who_was_dropped()
        explained, after_cut_off, unexplained = 0, 0, []
        for task_id, pids in runs.items():
            for earlier, later in zip(pids, pids[1:], strict=False):
                if earlier in hit or worker_of.get(earlier) in hit:
                    explained += 1  # the earlier run's process (or its worker) was killed, stopped or cut off
                elif worker_of.get(earlier) in cut_off or worker_of.get(later) in cut_off | silenced:
                    after_cut_off += 1  # one of the two workers was cut off: its reports came late
                else:
                    unexplained.append(f"{task_id} (runs in pids {earlier} then {later})")
        done = {path.stem for path in self.out.glob("*.done")}
        counts: dict[str, int] = {}
        for fault in self.faults:
            counts[fault.kind] = counts.get(fault.kind, 0) + 1
        return Result(
            self.seed,
            self.tasks,
            counts,
            explained,
            after_cut_off,
            unexplained,
            self.tasks - len(done),
            round(seconds, 1),
            self.rss_start,
            rss_end,
        )


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _children(pid: int) -> list[int]:
    try:
        return [child.pid for child in psutil.Process(pid).children()]
    except psutil.Error:
        return []


def _cmdline(pid: int) -> list[str]:
    try:
        return list(psutil.Process(pid).cmdline())
    except psutil.Error:
        return []


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _mount_tmpfs(where: Path) -> bool:
    """A 4 MiB tmpfs for the state (root only); False where the machine forbids it."""
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)], capture_output=True)
    return done.returncode == 0


def _fill(directory: Path) -> Path:
    path = directory / "filler"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError:
        pass
    finally:
        os.close(fd)
    return path


def run_seed(seed: int, tasks: int, duration: float, tmpfs: bool = True) -> Result:
    """One seed in a fresh directory (removed afterwards unless it found a defect)."""
    workdir = Path(tempfile.mkdtemp(prefix=f"luigi-faults-{seed}-"))
    result = Run(seed, workdir, tasks, duration, tmpfs).run()
    if not result.reruns_unexplained and not result.lost:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"seed {seed}: kept {workdir} for a look", file=sys.stderr)
    return result


def _seeds(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1-5", help="a seed or a range, e.g. 1-50")
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of fault injection per seed")
    args = parser.parse_args(argv)
    columns = ["seed", "tasks", "faults injected", "reruns: fault hit", "reruns: worker cut off"]
    columns += ["reruns without cause", "lost", "s"]
    print("| " + " | ".join([*columns, "luigid RSS MiB"]) + " |")
    print("|---" * (len(columns) + 1) + "|")
    bad = 0
    for seed in _seeds(args.seeds):
        r = run_seed(seed, args.tasks, args.duration)
        faults = ", ".join(f"{k} {v}" for k, v in sorted(r.faults.items()))
        rss = f"{r.luigid_rss_start / 2**20:.0f} → {r.luigid_rss_end / 2**20:.0f}"
        print(
            f"| {r.seed} | {r.tasks} | {faults} | {r.reruns_explained} | {r.reruns_cut_off} "
            f"| {len(r.reruns_unexplained)} | {r.lost} | {r.seconds} | {rss} |",
            flush=True,
        )
        for line in r.reruns_unexplained:
            print(f"    unexplained rerun: {line}", file=sys.stderr)
        bad += bool(r.reruns_unexplained or r.lost)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
