"""After a fault run: which reruns a fault explains, which nothing explains (defects), which tasks are lost.

A run of a task that was followed by another run is explained when a cutting fault hit the process that ran
it (its slot killed; its worker killed, stopped or sent SIGTERM, which acts until the worker's grace is
over; its worker's connection dropped or
blackholed for about the disconnect delay or longer) between ``SLACK`` seconds before it started and
``WINDOW`` seconds after, and before the next run began. A rerun is also explained when its own worker was
cut off and lived on (stopped then continued, its connection dropped or blackholed) and it started the task
by the end of that fault plus ``STALE_SLACK``: a grant made before the cut that the worker still acted on;
these are counted apart, as leases (issue 16, point 4) are meant to stop them. A luigid kill or a full state
disk explain nothing: the scheduler must come back on its state and hand out nothing twice.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from faults.injectors import CUTTING, KILL_SLOT, PROXY_BLACKHOLE, PROXY_DROP, RESUMING, TERM_WORKER, Fault
from faults.pipeline import Run
from faults.processes import DISCONNECT_DELAY, SHUTDOWN_GRACE

SLACK = 1.0  # a slot may start a task its worker was granted just before the worker was cut off
WINDOW = 15.0  # a fault this long after a run began cannot be why it ran again (it was long reported)
STALE_SLACK = 2.0  # how soon after a cut-off worker is back it acts on the grants it held
# a connection fault cuts a worker off only if it lasts about the disconnect delay: the worker is back at
# most this long after the proxy forwards again (its retries are at most rpc_retry_wait = 1 s apart)
RECONNECT_SLACK = 1.5


@dataclass
class Verdict:
    """What the run showed."""

    runs: int = 0
    explained: collections.Counter[str] = field(default_factory=collections.Counter)
    stale: collections.Counter[str] = field(default_factory=collections.Counter)
    unexplained: list[str] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)

    @property
    def reruns(self) -> int:
        return sum(self.explained.values()) + sum(self.stale.values()) + len(self.unexplained)


def worker_of(run: Run, worker_pids: set[int]) -> int:
    """The worker process behind ``run``: itself (in-process) or the parent of its slot."""
    return run.pid if run.pid in worker_pids else run.ppid


def _hits(fault: Fault, run: Run, worker_pid: int, seat: int | None) -> bool:
    if fault.kind == KILL_SLOT:
        return fault.pid == run.pid
    if fault.kind in (PROXY_DROP, PROXY_BLACKHOLE):
        return fault.seat == seat and _ended(fault) - fault.started + RECONNECT_SLACK >= DISCONNECT_DELAY
    return fault.pid == worker_pid


def _ended(fault: Fault) -> float:
    """When the fault stopped acting: a SIGTERM acts until the worker's grace is over (it still runs, and
    may start, the work in hand until then, and kills what runs at its end)."""
    if fault.kind == TERM_WORKER:
        return fault.started + SHUTDOWN_GRACE
    return fault.ended if fault.ended is not None else fault.started + fault.hold


def cause(run: Run, rerun: Run, faults: list[Fault], seat_of: dict[int, int]) -> Fault | None:
    """The cutting fault that hit ``run``'s process before ``rerun`` began, if any."""
    worker_pid = worker_of(run, set(seat_of))
    for fault in faults:
        in_time = _ended(fault) >= run.started - SLACK
        in_time = in_time and fault.started <= min(rerun.started, run.started + WINDOW)
        if fault.kind in CUTTING and in_time and _hits(fault, run, worker_pid, seat_of.get(worker_pid)):
            return fault
    return None


def stale_cause(rerun: Run, faults: list[Fault], seat_of: dict[int, int]) -> Fault | None:
    """The fault that cut ``rerun``'s worker off just before it ran a grant it held from before, if any."""
    worker_pid = worker_of(rerun, set(seat_of))
    for fault in faults:
        in_time = fault.started <= rerun.started <= _ended(fault) + STALE_SLACK
        if fault.kind in RESUMING and in_time and _hits(fault, rerun, worker_pid, seat_of.get(worker_pid)):
            return fault
    return None


def judge(runs: list[Run], faults: list[Fault], seat_of: dict[int, int], missing: list[int]) -> Verdict:
    """Attribute every rerun in ``runs`` to a fault or call it a defect; ``missing`` steps are lost."""
    verdict = Verdict(runs=len(runs), lost=list(missing))
    by_task: dict[str, list[Run]] = collections.defaultdict(list)
    for run in runs:
        by_task[run.task_id].append(run)
    for task_runs in by_task.values():
        task_runs.sort(key=lambda run: run.started)
        for run, rerun in zip(task_runs, task_runs[1:], strict=False):
            found = cause(run, rerun, faults, seat_of)
            stale = None if found is not None else stale_cause(rerun, faults, seat_of)
            if found is not None:
                verdict.explained[found.kind] += 1
            elif stale is not None:
                verdict.stale[stale.kind] += 1
            else:
                verdict.unexplained.append(_describe(run, rerun, faults))
    return verdict


def _describe(run: Run, rerun: Run, faults: list[Fault]) -> str:
    near = [
        f"{f.kind} pid {f.pid} at {f.started:.3f}" for f in faults if abs(f.started - run.started) < WINDOW
    ]
    return (
        f"{run.task_id} ran in pid {run.pid} (parent {run.ppid}) at {run.started:.3f} and again in pid "
        f"{rerun.pid} (parent {rerun.ppid}) at {rerun.started:.3f}; faults near: {', '.join(near) or 'none'}"
    )
