"""The faults a run injects, each begun at a seeded moment and ended after a seeded hold.

Every fault is written to the fault log with its wall-clock span and the pids it hit, so that the
analysis can tell a rerun the fault explains from one nothing explains.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from helpers.luigid import wait_until
from helpers.tcp_proxy import TcpProxy

from faults.processes import DISCONNECT_DELAY, Luigid, WorkerSeat

KILL_LUIGID = "kill -9 luigid"
KILL_WORKER = "kill -9 worker"
KILL_SLOT = "kill -9 slot"
STOP_WORKER = "SIGSTOP worker"
TERM_WORKER = "SIGTERM worker"
PROXY_DROP = "proxy drop"
PROXY_BLACKHOLE = "proxy blackhole"
DISK_FULL = "state disk full"
TAKEOVER = "kill -9 active luigid, standby takes over"

RESTART_PATIENCE = 60.0  # how long luigid may keep failing to start before the run gives up
TAKEOVER_PATIENCE = 15.0  # the promise: a standby answers as the active one this soon after the kill

BUILT_KINDS = (KILL_LUIGID, KILL_WORKER, KILL_SLOT, STOP_WORKER, TERM_WORKER, PROXY_DROP, PROXY_BLACKHOLE)
ALL_KINDS = (*BUILT_KINDS, DISK_FULL, TAKEOVER)
# the faults that cut a process off its task: a rerun of a task its victim ran is explained
CUTTING = {KILL_WORKER, KILL_SLOT, STOP_WORKER, TERM_WORKER, PROXY_DROP, PROXY_BLACKHOLE}
# the cutting faults whose victim lives on: it may still run a task granted before it was cut off
RESUMING = {STOP_WORKER, PROXY_DROP, PROXY_BLACKHOLE}
PROXY_GROUP = "proxy"


def group(kind: str) -> str:
    """Faults of one group never overlap (both proxy faults act on the one proxy)."""
    return PROXY_GROUP if kind in (PROXY_DROP, PROXY_BLACKHOLE) else kind


@dataclass
class Fault:
    """One injected fault: what, when (wall clock), for how long, and whom it hit."""

    kind: str
    started: float
    hold: float
    seat: int | None = None
    pid: int | None = None
    ended: float | None = None
    note: str = ""


@dataclass
class Rig:
    """What faults act on: luigid, the worker seats, the proxy in front of seat 0, the state disk."""

    luigid: Luigid
    seats: list[WorkerSeat]
    proxy: TcpProxy
    disk: Path | None
    running_slots: Callable[[], list[tuple[int, int]]]  # (slot pid, seat) of tasks running now
    filler: list[Path] = field(default_factory=list)
    standbys: list[Luigid] = field(default_factory=list)  # the other luigids on luigid's PostgreSQL state
    takeovers: list[float] = field(default_factory=list)  # seconds from each kill to an active one answering

    @property
    def luigids(self) -> list[Luigid]:
        return [self.luigid, *self.standbys]


def begin(kind: str, rig: Rig, rng: random.Random) -> Fault | None:
    """Inject ``kind`` now; None when it has no victim at this moment (no slot busy, no worker up)."""
    return _BEGIN[kind](rig, rng)


def end(fault: Fault, rig: Rig) -> None:
    """Lift ``fault`` (restart luigid, SIGCONT, restore the proxy, free the disk) and stamp its end."""
    _END.get(fault.kind, lambda fault, rig: None)(fault, rig)
    fault.ended = time.time()


def _live_seat(rig: Rig, rng: random.Random) -> WorkerSeat | None:
    live = [seat for seat in rig.seats if seat.running() and not seat.stopped]
    return rng.choice(live) if live else None


def _kill_luigid(rig: Rig, rng: random.Random) -> Fault:
    fault = Fault(KILL_LUIGID, time.time(), rng.uniform(0.2, 2.0), pid=rig.luigid.pid)
    rig.luigid.kill()
    return fault


def _restart_luigid(fault: Fault, rig: Rig) -> None:
    """Start luigid again, and again while it exits at once, as a supervisor would (the failed starts are
    noted on the fault); on a full state disk it is not waited for, as it waits for space."""
    if rig.filler:  # the state disk is full: luigid waits for space before it answers (doc/guarantees.md)
        rig.luigid.start(wait=False)  # and the disk is freed only once this returns
        fault.note = f"restarted as pid {rig.luigid.pid} on a full disk"
        return
    deadline = time.monotonic() + RESTART_PATIENCE
    failed = 0
    while True:
        try:
            rig.luigid.start()
            break
        except AssertionError:
            failed += 1
            if time.monotonic() > deadline:
                raise
    fault.note = f"restarted as pid {rig.luigid.pid}" + (f" after {failed} failed starts" if failed else "")


def _kill_active_luigid(rig: Rig, rng: random.Random) -> Fault | None:
    """``kill -9`` the luigid that answers as the active one; a standby must take over (within 15 s)."""
    active = [luigid for luigid in rig.luigids if luigid.answers_as() == "active"]
    if not active or not rig.standbys:
        return None
    victim = active[0]
    fault = Fault(TAKEOVER, time.time(), 0.0, pid=victim.pid)
    killed = time.monotonic()
    victim.kill()
    fault.note = f"killed {victim.name}"
    survivors = [luigid for luigid in rig.luigids if luigid is not victim]
    taker = wait_until(
        lambda: next((luigid for luigid in survivors if luigid.answers_as() == "active"), None),
        TAKEOVER_PATIENCE,
        "a standby luigid to take over",
    )
    rig.takeovers.append(time.monotonic() - killed)
    fault.note += f"; {taker.name} active after {rig.takeovers[-1]:.1f} s"
    return fault


def _restart_as_standby(fault: Fault, rig: Rig) -> None:
    """Start the killed luigid again: it must come back as a standby (the lease is someone else's)."""
    victim = next(luigid for luigid in rig.luigids if luigid.process is not None and luigid.pid == fault.pid)
    victim.start()
    role = wait_until(victim.answers_as, RESTART_PATIENCE, f"{victim.name} to answer after its restart")
    fault.note += f"; {victim.name} restarted as pid {victim.pid}, answering as {role}"


def _signal_worker(kind: str, signum: int, hold: float) -> Callable[[Rig, random.Random], Fault | None]:
    def inject(rig: Rig, rng: random.Random) -> Fault | None:
        seat = _live_seat(rig, rng)
        if seat is None:
            return None
        fault = Fault(kind, time.time(), hold + (rng.uniform(0.5, 2.5) if kind == STOP_WORKER else 0.0))
        fault.seat, fault.pid = seat.index, seat.pid
        seat.signal(signum)
        seat.stopped = kind == STOP_WORKER
        return fault

    return inject


def _continue_worker(fault: Fault, rig: Rig) -> None:
    seat = rig.seats[fault.seat or 0]
    if seat.pid == fault.pid and seat.running():
        seat.signal(signal.SIGCONT)
    seat.stopped = False


def _kill_slot(rig: Rig, rng: random.Random) -> Fault | None:
    busy = [(pid, seat) for pid, seat in rig.running_slots() if not rig.seats[seat].stopped]
    if not busy:
        return None
    pid, seat = rng.choice(busy)
    fault = Fault(KILL_SLOT, time.time(), 0.0, seat=seat, pid=pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return fault


def _proxy_drop(rig: Rig, rng: random.Random) -> Fault:
    hold = rng.uniform(0.2, 2.0) if rng.random() < 0.7 else DISCONNECT_DELAY + rng.uniform(0.5, 2.0)
    fault = Fault(PROXY_DROP, time.time(), hold, seat=0, pid=rig.seats[0].pid)
    rig.proxy.drop(refuse_for=hold)
    return fault


def _proxy_blackhole(rig: Rig, rng: random.Random) -> Fault:
    hold = rng.uniform(0.5, 2.0) if rng.random() < 0.5 else DISCONNECT_DELAY + rng.uniform(0.5, 3.0)
    fault = Fault(PROXY_BLACKHOLE, time.time(), hold, seat=0, pid=rig.seats[0].pid)
    rig.proxy.blackhole()
    return fault


def _restore_proxy(fault: Fault, rig: Rig) -> None:
    rig.proxy.restore()


def _fill_disk(rig: Rig, rng: random.Random) -> Fault | None:
    if rig.disk is None:
        return None
    fault = Fault(DISK_FULL, time.time(), rng.uniform(1.0, 4.0))
    filler = rig.disk / f"filler-{len(rig.filler)}"
    rig.filler.append(filler)
    with filler.open("wb", buffering=0) as out:  # unbuffered: closing it has nothing left to write
        try:
            while True:
                out.write(b"\0" * 65536)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    return fault


def _free_disk(fault: Fault, rig: Rig) -> None:
    for filler in rig.filler:
        filler.unlink(missing_ok=True)
    rig.filler.clear()


_BEGIN: dict[str, Callable[[Rig, random.Random], Fault | None]] = {
    KILL_LUIGID: _kill_luigid,
    KILL_WORKER: _signal_worker(KILL_WORKER, signal.SIGKILL, 0.0),
    KILL_SLOT: _kill_slot,
    STOP_WORKER: _signal_worker(STOP_WORKER, signal.SIGSTOP, DISCONNECT_DELAY),
    TERM_WORKER: _signal_worker(TERM_WORKER, signal.SIGTERM, 0.0),
    PROXY_DROP: _proxy_drop,
    PROXY_BLACKHOLE: _proxy_blackhole,
    DISK_FULL: _fill_disk,
    TAKEOVER: _kill_active_luigid,
}
_END: dict[str, Callable[[Fault, Rig], None]] = {
    KILL_LUIGID: _restart_luigid,
    STOP_WORKER: _continue_worker,
    PROXY_DROP: _restore_proxy,
    PROXY_BLACKHOLE: _restore_proxy,
    DISK_FULL: _free_disk,
    TAKEOVER: _restart_as_standby,
}


# -- the tiny tmpfs ------------------------------------------------------------------------------------------


def can_mount_tmpfs() -> str | None:
    """None when this process may mount a tmpfs, else why not (not root, or the kernel refused)."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    with tempfile.TemporaryDirectory() as probe:
        try:
            mount_tmpfs(Path(probe), "1m")
        except OSError as exc:
            return f"mount -t tmpfs refused: {exc}"
        unmount(Path(probe))
    return None


def mount_tmpfs(directory: Path, size: str) -> None:
    """``mount -t tmpfs -o size=<size>`` on ``directory``; OSError with mount's message if refused."""
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise OSError(done.stderr.strip() or f"mount exited with {done.returncode}")


def unmount(directory: Path) -> None:
    """Lazily unmount ``directory`` (whatever still holds files there lets go when it exits)."""
    subprocess.run(["umount", "-l", str(directory)], capture_output=True)
