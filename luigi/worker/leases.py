"""The worker's side of leases: what it holds, as its pings tell the scheduler, and what it must let go.

Our luigid (``scheduler_features()["leases"]``) takes ``held`` with a ``ping``: the tasks the worker runs
and the grants made ahead it has not started. Its reply names those ``handed_over`` to someone else while
this worker was cut off (``luigi.scheduler.rules.leases``); the worker then stops those runs, reports
nothing of them, and drops such grants unstarted. A Luigi luigid is sent plain pings.
"""

from __future__ import annotations

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
UNCONFIRMED = "unconfirmed"  # a long silence, and the scheduler still does not answer: nobody can tell


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


class Handover:
    """The worker loop's side: lets go of what the scheduler handed over, and asks after a long silence.

    ``runner`` is the worker's runner (``let_go`` kills a run in a slot or drops a grant made ahead);
    ``forget_run(task_id)`` makes the loop forget a run it will not report. Each method returns the tasks
    it let go of, with their new owner when known, for the summary.
    """

    def __init__(
        self,
        book: LeaseBook,
        scheduler: SchedulerAPI,
        worker_id: str,
        ping_interval: float,
        runner: Any,
        forget_run: Callable[[str], None],
    ) -> None:
        self._book = book
        self._scheduler = scheduler
        self._worker_id = worker_id
        self._check_after = max(CHECK_AFTER_SILENCE, 3 * ping_interval)
        self._runner = runner
        self._forget_run = forget_run
        self._dropped: dict[str, str | None] = {}  # grants made ahead dropped unstarted, for the summary

    def scheduler_tracks_leases(self) -> bool:
        """Whether the scheduler takes ``held`` with a ping (a Luigi luigid has no ``scheduler_features``)."""
        try:
            return bool(self._scheduler.scheduler_features().get("leases"))
        except RPCError:
            return False

    def let_go(self) -> dict[str, str | None]:
        """Kill the runs, and drop the grants made ahead, that the last pings said were handed over (a run
        in this process cannot be killed: it is only marked, and its result dropped when it ends)."""
        owners, self._dropped = self._dropped, {}
        for lost in self._book.take_lost():
            if lost.number == AHEAD and self._book.running(lost.task_id):
                continue  # started since the ping was sent: the next ping tells
            owners[lost.task_id] = lost.new_owner
            let_go = getattr(self._runner, "let_go", None)
            if let_go is not None and let_go(lost.task_id) and lost.number != AHEAD:
                self._forget_run(lost.task_id)
                self._book.ended(lost.task_id)
        return owners

    def ended_elsewhere(self, task_id: str) -> dict[str, str | None]:
        """A run of ``task_id`` ended here: empty if it is still ours to report, else who owns it now."""
        if self._book.disowned(task_id):
            lost = self._book.pop_lost(task_id)  # (None: the loop let go of it already)
            owner = lost.new_owner if lost is not None else None
        else:
            handed_to = self._handed_to(task_id)
            if handed_to is False or handed_to is UNCONFIRMED:
                return {}  # still ours, or unknown: a stale report is refused by the scheduler anyway
            owner = handed_to if isinstance(handed_to, str) else None
        self._forget_run(task_id)
        self._book.ended(task_id)
        return {task_id: owner}

    def take_granted_ahead(self) -> dict[str, Any] | None:
        """The runner's next grant made ahead that is still this worker's."""
        while True:
            reply: dict[str, Any] | None = self._runner.take_granted_ahead()
            task_id = reply.get("task_id") if isinstance(reply, dict) else None
            if not isinstance(task_id, str):
                return reply
            handed_to = self._handed_to(task_id)
            if handed_to is False:
                return reply
            if handed_to is UNCONFIRMED:  # after a long silence a lease may have run out: start nothing
                put_back = getattr(self._runner, "put_back_granted_ahead", None)
                if put_back is not None:
                    put_back(reply)
                    return None
                return reply
            self._dropped[task_id] = handed_to if isinstance(handed_to, str) else None

    def _handed_to(self, task_id: str) -> str | None | bool:
        """Whether ``task_id`` is still this worker's: False if it is, UNCONFIRMED if the scheduler, silent
        for a while, still does not answer, else its new owner (None: unknown). After pings went
        unanswered for a while, one is sent now, with everything held, and the others it names are let
        go of at the next step."""
        lost = self._book.pop_lost(task_id)  # (a run here is disowned and handled by ``ended_elsewhere``)
        book = self._book
        silent = time.monotonic() - book.confirmed_at >= self._check_after
        if lost is None and book.enabled and book.pinging and silent:
            held = book.snapshot()
            held.setdefault(task_id, AHEAD)
            try:
                reply = self._scheduler.ping(worker=self._worker_id, held=list(held))
            except RPCError:  # still unreachable: the caller decides (a report may go, a grant waits)
                return UNCONFIRMED
            if isinstance(reply, dict):
                book.handed_over(reply.get("handed_over"), held, reply.get("handed_to"), task_id)
            lost = book.pop_lost(task_id)
        return False if lost is None else lost.new_owner


def _warn(task_id: str) -> None:
    logger.warning("Task %s %s: its run here is killed (in this process: left to end) and not reported",
                   task_id, REASON)  # fmt: skip
