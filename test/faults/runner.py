"""One seeded fault run: the pipeline, luigid, the workers and a supervisor, faults at seeded moments.

``run_faults(workdir, seed, ...)`` starts a real luigid (its state on a tiny tmpfs when ``disk`` is set),
a TCP proxy in front of it for worker seat 0, and ``seats`` worker processes of two slots each. Faults
come in the order and at the progress points (share of the tasks started) drawn from ``seed``, each held
for its seeded span; two faults of one group (luigid, the proxy, the disk, one kind of worker fault) never
overlap. A worker process that is gone is started again, as a supervisor
would. The run ends when every output exists and the workers have left, or at ``deadline``.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from helpers.luigid import wait_until
from helpers.tcp_proxy import TcpProxy

from faults import analysis, injectors, pipeline
from faults.injectors import BUILT_KINDS, Fault, Rig
from faults.processes import START_TIMEOUT, Luigid, WorkerSeat

TICK = 0.05  # the supervisor's pace
# how long a fault waits for a victim (a busy slot, a live worker) before it is skipped
NO_VICTIM_PATIENCE = 3.0
LEAVE_TIMEOUT = 60.0
ORPHAN_TIMEOUT = 15.0
TMPFS_SIZE = "24m"
MEMORY_SLACK = 64 * 1024 * 1024


@dataclass
class Result:
    """What one seeded run did and showed."""

    seed: int
    tasks: int
    faults: list[Fault] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    verdict: analysis.Verdict = field(default_factory=analysis.Verdict)
    rss_baseline: int = 0
    rss_final: int = 0
    orphans: list[int] = field(default_factory=list)
    lingering: list[int] = field(default_factory=list)
    seconds: float = 0.0
    takeovers: list[float] = field(default_factory=list)  # seconds from a kill to a standby answering

    def memory_ok(self) -> bool:
        """luigid's memory back near its baseline: at most double it, or 64 MiB more, whichever is larger."""
        return self.rss_final <= self.rss_baseline + max(self.rss_baseline, MEMORY_SLACK)

    def defects(self) -> list[str]:
        """Everything that broke a guarantee of the built part; empty when the run was clean."""
        found = [f"rerun without cause: {line}" for line in self.verdict.unexplained]
        found += [f"task lost: Step(i={i}) never completed" for i in self.verdict.lost]
        found += [f"process outlived its worker: pid {pid}" for pid in self.orphans]
        if not self.memory_ok():
            found.append(f"luigid RSS {self.rss_final} B, baseline {self.rss_baseline} B")
        return found


@dataclass
class _Plan:
    """The faults still to inject: (progress share, kind), soonest first."""

    steps: list[tuple[float, str]]
    waiting_since: float | None = None

    @classmethod
    def draw(cls, rng: random.Random, kinds: Sequence[str], count: int) -> _Plan:
        order = [kinds[i % len(kinds)] for i in range(count)]
        rng.shuffle(order)
        shares = sorted(rng.uniform(0.05, 0.85) for _ in order)
        return cls(list(zip(shares, order, strict=True)))


def run_faults(
    workdir: Path,
    seed: int,
    tasks: int = 300,
    seats: int = 3,
    kinds: Sequence[str] = BUILT_KINDS,
    faults: int = 8,
    disk: bool = False,
    deadline: float = 300.0,
    state_url: str | None = None,
) -> Result:
    """Run the pipeline under seeded faults in ``workdir`` and judge what happened.

    With ``state_url`` (PostgreSQL), two luigids share that state, one active and one standby, and every
    worker is given both URLs."""
    rng = random.Random(seed)
    pipeline.write_pipeline(workdir, tasks, seed)
    result = Result(seed, tasks)
    began = time.monotonic()
    with _state_dir(workdir, disk) as state_dir:
        luigid = Luigid(workdir, state_dir, state_url=state_url)
        standbys = [Luigid(workdir, state_dir, state_url=state_url, name="luigid-b")] if state_url else []
        luigid.start()
        try:
            if standbys:
                wait_until(lambda: luigid.answers_as() == "active", START_TIMEOUT, "luigid to be active")
            for standby in standbys:
                standby.start()
            result.rss_baseline = luigid.rss()
            with TcpProxy(luigid.port).running() as proxy:
                rig = _rig(workdir, luigid, proxy, seats, state_dir if disk else None, standbys)
                try:
                    _supervise(workdir, rig, _Plan.draw(rng, kinds, faults), rng, result, began + deadline)
                    result.lingering = _wait_workers_leave(rig)
                    result.rss_final = luigid.rss() if luigid.process and luigid.process.poll() is None else 0
                finally:
                    _end_everything(rig)
        finally:
            for each in (luigid, *standbys):
                each.stop()
    _judge(workdir, rig, result)
    result.takeovers = rig.takeovers
    result.seconds = time.monotonic() - began
    return result


@contextlib.contextmanager
def _state_dir(workdir: Path, disk: bool) -> Iterator[Path]:
    state_dir = workdir / "state"
    state_dir.mkdir(exist_ok=True)
    if not disk:
        yield state_dir
        return
    injectors.mount_tmpfs(state_dir, TMPFS_SIZE)
    try:
        yield state_dir
    finally:
        injectors.unmount(state_dir)


def _rig(
    workdir: Path, luigid: Luigid, proxy: TcpProxy, seats: int, disk: Path | None, standbys: list[Luigid]
) -> Rig:
    urls = [f"http://127.0.0.1:{proxy.port}/"] + [luigid.url] * (seats - 1)
    urls = [",".join([url, *(standby.url for standby in standbys)]) for url in urls]
    workers = [WorkerSeat(index, url, workdir) for index, url in enumerate(urls)]
    rig = Rig(luigid, workers, proxy, disk, lambda: _running_slots(workdir, workers), standbys=standbys)
    for seat in workers:
        seat.start()
    return rig


def _running_slots(workdir: Path, seats: list[WorkerSeat]) -> list[tuple[int, int]]:
    """(slot pid, seat) for every task started and not yet done whose slot is alive now."""
    slots = {pid: seat.index for seat in seats if seat.running() for pid in seat.children()}
    out = workdir / pipeline.OUTPUTS
    return [
        (run.pid, slots[run.pid])
        for run in pipeline.read_runs(workdir)
        if run.pid in slots and not (out / f"step-{run.index}.done").exists()
    ]


def _supervise(
    workdir: Path, rig: Rig, plan: _Plan, rng: random.Random, result: Result, deadline: float
) -> None:
    active: list[Fault] = []
    out = workdir / pipeline.OUTPUTS
    while time.monotonic() < deadline:
        done = len(os.listdir(out)) >= result.tasks and not pipeline.missing_outputs(workdir, result.tasks)
        for fault in [fault for fault in active if time.time() >= fault.started + fault.hold]:
            injectors.end(fault, rig)
            active.remove(fault)
        if done and not active:
            break
        if plan.steps and injectors.group(plan.steps[0][1]) not in {injectors.group(f.kind) for f in active}:
            fault = _maybe_inject(workdir, rig, plan, rng, result)
            active += [fault] if fault is not None else []
        for seat in rig.seats:
            if not seat.running() and not done:
                seat.start()
        time.sleep(TICK)
    for fault in active:
        injectors.end(fault, rig)
    result.skipped += [kind for _, kind in plan.steps]


def _maybe_inject(workdir: Path, rig: Rig, plan: _Plan, rng: random.Random, result: Result) -> Fault | None:
    share, kind = plan.steps[0]
    started = len({run.task_id for run in pipeline.read_runs(workdir)})
    if started < share * result.tasks:
        return None
    fault = injectors.begin(kind, rig, rng)
    now = time.monotonic()
    if fault is None:
        plan.waiting_since = plan.waiting_since or now
        if now - plan.waiting_since > NO_VICTIM_PATIENCE:
            result.skipped.append(plan.steps.pop(0)[1])
            plan.waiting_since = None
        return None
    plan.steps.pop(0)
    plan.waiting_since = None
    result.faults.append(fault)
    return fault


def _wait_workers_leave(rig: Rig) -> list[int]:
    """Wait for the workers to exit by themselves; end (and name) those still there past the deadline."""
    deadline = time.monotonic() + LEAVE_TIMEOUT
    while any(seat.running() for seat in rig.seats) and time.monotonic() < deadline:
        time.sleep(TICK)
    lingering = [seat.pid for seat in rig.seats if seat.running() and seat.pid is not None]
    for seat in rig.seats:
        seat.end()
    return lingering


def _end_everything(rig: Rig) -> None:
    """Whatever happened (an interrupt, a failed start): no fault left on, no worker left running."""
    for seat in rig.seats:
        if seat.process is not None and seat.running():
            seat.signal(signal.SIGCONT)
            seat.signal(signal.SIGKILL)
            seat.process.wait()
    rig.proxy.restore()
    for filler in rig.filler:
        filler.unlink(missing_ok=True)


def _judge(workdir: Path, rig: Rig, result: Result) -> None:
    runs = pipeline.read_runs(workdir)
    seat_of = {pid: seat.index for seat in rig.seats for pid in seat.pids}
    missing = pipeline.missing_outputs(workdir, result.tasks)
    result.verdict = analysis.judge(runs, result.faults, seat_of, missing)
    result.orphans = _orphans({run.pid for run in runs} - set(seat_of))


def _orphans(pids: set[int]) -> list[int]:
    """The slot pids still alive once every worker is gone (killed here, and named)."""
    deadline = time.monotonic() + ORPHAN_TIMEOUT
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(TICK)
    survivors = sorted(pid for pid in pids if _alive(pid))
    for pid in survivors:
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).kill()
    return survivors


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs as one of our slots (not a zombie, not a stranger that reused the pid)."""
    try:
        process = psutil.Process(pid)
        return process.status() != psutil.STATUS_ZOMBIE and pipeline.MODULE in " ".join(process.cmdline())
    except psutil.Error:
        return False
