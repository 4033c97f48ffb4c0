"""The worker's side of leases: what it holds, as its pings tell the scheduler, and what it must let go.

Our luigid (``scheduler_features()["leases"]``) takes ``held`` with a ``ping``: the tasks the worker runs
and the grants made ahead it has not started. Its reply names those ``handed_over`` to someone else while
this worker was cut off (``luigi.scheduler.rules.leases``); the worker then stops those runs, reports
nothing of them, and drops such grants unstarted. A Luigi luigid is sent plain pings.
``luigi.worker.work_source.AskAheadSource`` acts on what this module tells; the in-process scheduler and
schedulers other than our RPC client need none of it (``DirectSource``).
"""

from __future__ import annotations

import enum
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from luigi.rpc import RPCError
from luigi.scheduler_api import SchedulerAPI

logger = logging.getLogger("luigi-interface")

# A worker whose pings have not been answered for this long (seconds, or three ping intervals if longer)
# may have been cut off: it asks the scheduler before it starts a grant made ahead or reports a result.
CHECK_AFTER_SILENCE = 5.0
AHEAD = 0  # the run number a grant made ahead has in a ping's snapshot: it has not started
REASON = "was handed to another worker while this one was cut off from the scheduler"
STOPPED = "stopped: its task was handed to another worker"  # why such a run is killed (the warning says more)


@dataclass(frozen=True)
class LostRun:
    """A run the scheduler handed to someone else: ``number`` is the run (AHEAD: a grant not started)."""

    task_id: str
    number: int
    new_owner: str | None


class LeaseBook:
    """What the worker holds, as its pings tell a scheduler that understands it (``leases`` feature).

    The worker loop notes each run's start and end; the keep-alive thread takes a snapshot of the held
    runs (and of the grants made ahead, from ``ahead()``) for each ping and hands the reply back. A run
    the reply says was handed over counts only if it is still the same run as in the snapshot: one that
    ended meanwhile (its result was reported before the scheduler answered) is left alone.
    """

    def __init__(self, ahead: Callable[[], list[str]]) -> None:
        self.enabled = False  # set once the scheduler says it understands ``held``
        self._ahead = ahead
        self._lock = threading.Lock()
        self._numbers = itertools.count(1)
        self._runs: dict[str, int] = {}  # task id -> the number of its run here
        self._lost: dict[str, LostRun] = {}  # told handed over, not acted on yet by the loop
        self._disowned: set[str] = set()  # runs whose result must not be reported
        self.confirmed_at = time.monotonic()  # when a ping last came back with the scheduler's answer
        self.pinging = False  # whether a keep-alive thread pings (else no silence means a cut-off)

    def enable(self, enabled: bool) -> None:
        """Whether the scheduler understands ``held`` (asked once, when the worker's run begins)."""
        self.enabled = enabled
        self.confirmed_at = time.monotonic()

    def started(self, task_id: str) -> None:
        """The loop started a run of ``task_id``."""
        with self._lock:
            self._runs[task_id] = next(self._numbers)

    def ended(self, task_id: str) -> None:
        """The run of ``task_id`` ended and was handled: a late answer about it means nothing now."""
        with self._lock:
            self._runs.pop(task_id, None)
            self._lost.pop(task_id, None)
            self._disowned.discard(task_id)

    def _queued(self) -> list[str]:
        """The grants made ahead the loop holds (read from this thread while the loop may change them)."""
        for _ in range(3):
            try:
                return list(self._ahead())
            except RuntimeError:  # the queue changed while it was read: read it again
                continue
        return []

    def snapshot(self) -> dict[str, int]:
        """The held tasks, each with its run number (AHEAD for a grant made ahead), for one ping."""
        ahead = self._queued()
        with self._lock:
            held = dict(self._runs)
        for task_id in ahead:
            held.setdefault(task_id, AHEAD)
        return held

    def handed_over(self, task_ids: Any, snapshot: dict[str, int], owners: Any, taken: str = "") -> None:
        """The ping's reply: ``task_ids`` (of ``snapshot``) are no longer this worker's; ``taken``: a grant
        made ahead the loop has just taken from its queue to start."""
        owners = owners if isinstance(owners, dict) else {}
        self.confirmed_at = time.monotonic()
        queued = {*self._queued(), taken}  # a grant the loop dropped itself meanwhile is no news
        with self._lock:
            for task_id in task_ids if isinstance(task_ids, list) else []:
                number = snapshot.get(task_id) if isinstance(task_id, str) else None
                if number is None or self._runs.get(task_id, AHEAD) != number:
                    continue  # not sent, or its run ended (or a grant made ahead started) meanwhile
                if number == AHEAD and task_id not in queued:
                    continue
                if task_id in self._lost or task_id in self._disowned:
                    continue  # told before, by an earlier ping
                owner = owners.get(task_id)
                self._lost[task_id] = LostRun(task_id, number, owner if isinstance(owner, str) else None)
                if number != AHEAD:
                    self._disowned.add(task_id)
                _warn(task_id)

    def take_lost(self) -> list[LostRun]:
        """The runs told handed over since the last call, for the loop to let go of."""
        with self._lock:
            lost, self._lost = list(self._lost.values()), {}
        return lost

    def running(self, task_id: str) -> bool:
        """Whether a run of ``task_id`` has started here and not ended."""
        with self._lock:
            return task_id in self._runs

    def pop_lost(self, task_id: str) -> LostRun | None:
        """The handed-over run of ``task_id`` if the loop has not let go of it yet."""
        with self._lock:
            return self._lost.pop(task_id, None)

    def disowned(self, task_id: str) -> bool:
        """Whether the current run of ``task_id`` was handed over (its result must not be reported)."""
        with self._lock:
            return task_id in self._disowned


class Standing(enum.Enum):
    """Whether a task granted to this worker is still its to run and report."""

    OURS = "ours"
    HANDED_OVER = "handed over"  # to another worker while this one was cut off
    UNCONFIRMED = "unconfirmed"  # a long silence, and the scheduler still does not answer: nobody can tell


@dataclass(frozen=True)
class Lease:
    """The standing of one task's lease, with its new owner when it was handed over (None: unknown)."""

    standing: Standing
    new_owner: str | None = None


OURS = Lease(Standing.OURS)


def scheduler_tracks_leases(scheduler: SchedulerAPI) -> bool:
    """Whether the scheduler takes ``held`` with a ping (a Luigi luigid has no ``scheduler_features``)."""
    try:
        return bool(scheduler.scheduler_features().get("leases"))
    except RPCError:
        return False


class LeaseCheck:
    """Tells whether a task is still this worker's: from what the pings said, and after a long silence
    (a worker that may have been cut off) by asking the scheduler with a ping of its own."""

    def __init__(
        self, book: LeaseBook, scheduler: SchedulerAPI, worker_id: str, ping_interval: float
    ) -> None:
        self._book = book
        self._scheduler = scheduler
        self._worker_id = worker_id
        self._check_after = max(CHECK_AFTER_SILENCE, 3 * ping_interval)

    def lease_of(self, task_id: str) -> Lease:
        """The lease of ``task_id``. After pings went unanswered for a while, one is sent now, with
        everything held, and the others it names are let go of at the loop's next step."""
        book = self._book
        lost = book.pop_lost(task_id)  # (a run here is disowned and handled by the caller)
        silent = time.monotonic() - book.confirmed_at >= self._check_after
        if lost is None and book.enabled and book.pinging and silent:
            held = book.snapshot()
            held.setdefault(task_id, AHEAD)
            try:
                reply = self._scheduler.ping(worker=self._worker_id, held=list(held))
            except RPCError:  # still unreachable: the caller decides (a report may go, a grant waits)
                return Lease(Standing.UNCONFIRMED)
            if isinstance(reply, dict):
                book.handed_over(reply.get("handed_over"), held, reply.get("handed_to"), task_id)
            lost = book.pop_lost(task_id)
        return OURS if lost is None else Lease(Standing.HANDED_OVER, lost.new_owner)


def _warn(task_id: str) -> None:
    logger.warning("Task %s %s: its run here is killed (in this process: left to end) and not reported",
                   task_id, REASON)  # fmt: skip
