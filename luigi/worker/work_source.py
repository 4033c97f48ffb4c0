"""Where the worker's grants come from, and what it holds of them: the worker loop's ``WorkSource``.

The loop asks its source for a grant already in hand before it asks the scheduler, tells it before and
after each start and when each run ends, and lets it say what the worker holds. Which source a worker has is
decided once, in ``Worker.__init__``:

- ``DirectSource``: the scheduler is asked for each task in turn and nothing is held ahead; a worker of the
  in-process scheduler (``--local-scheduler``) or of any scheduler that is not our RPC client. Every method
  does nothing, so the loop's path carries no bookkeeping.
- ``AskAheadSource``: our RPC client. It asks ahead while short tasks run in this process
  (``luigi.worker.lookahead``, ``[worker] lookahead``) and, once our luigid says it tracks leases, keeps the
  worker's leases (``luigi.worker.leases``): pings say what is held, and what was handed to another worker
  while this one was cut off is let go of. Against a Luigi luigid the client declines every ask ahead and the
  leases stay off.

Runners (``luigi.worker.execution``) only run: a run is stopped through the runner's ``cancel_run``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from luigi.scheduler_api import SchedulerAPI
from luigi.task_status import DONE
from luigi.worker.leases import AHEAD, LeaseBook, LeaseCheck, Standing, scheduler_tracks_leases
from luigi.worker.lookahead import AheadAsker
from luigi.worker.task_process import TaskOutcome


class WorkSource(Protocol):
    """The worker loop's side of getting work: grants in hand, starts and ends, and what is held."""

    def begin_run(self, pinged: bool) -> None:
        """The worker's run begins; ``pinged``: a keep-alive thread pings meanwhile."""

    def release_handed_over(self) -> dict[str, str | None]:
        """Let go of the runs and grants handed to other workers since the last call; returns those tasks,
        each with its new owner (None: unknown), for the summary."""

    def next_grant(self) -> dict[str, Any] | None:
        """A grant in hand (made ahead, and still this worker's) to run next; None: ask the scheduler."""

    def unstarted(self) -> list[str]:
        """The tasks granted and not started yet: with the running ones, the worker's current tasks."""

    def before_start(self, task_id: str, timeout: float | None) -> str | None:
        """``task_id`` is about to start (with ``timeout``); returns why it must not run (cancelled while
        its grant waited), else None."""

    def after_start(self) -> None:
        """The runner's ``start`` of the task ``before_start`` named has returned."""

    def ended(self, outcome: TaskOutcome) -> dict[str, str | None]:
        """A run ended: empty if its result is this worker's to report, else the task with its new owner."""

    def cancel_before_start(self, task_id: str, reason: str) -> bool:
        """Have an unstarted grant of ``task_id`` fail with ``reason`` as it starts (from the keep-alive
        thread); False if no such grant waits."""

    def held_for_ping(self) -> dict[str, int] | None:
        """What a ping says this worker holds, each task with its run number; None: a plain ping."""

    def ping_answered(self, reply: dict[str, Any], held: dict[str, int]) -> None:
        """The reply to a ping that said ``held``."""


class DirectSource:
    """A ``WorkSource`` that holds nothing: every grant comes from a ``get_work`` asked in turn."""

    def begin_run(self, pinged: bool) -> None:
        pass

    def release_handed_over(self) -> dict[str, str | None]:
        return {}

    def next_grant(self) -> dict[str, Any] | None:
        return None

    def unstarted(self) -> list[str]:
        return []

    def before_start(self, task_id: str, timeout: float | None) -> str | None:
        return None

    def after_start(self) -> None:
        pass

    def ended(self, outcome: TaskOutcome) -> dict[str, str | None]:
        return {}

    def cancel_before_start(self, task_id: str, reason: str) -> bool:
        return False

    def held_for_ping(self) -> dict[str, int] | None:
        return None

    def ping_answered(self, reply: dict[str, Any], held: dict[str, int]) -> None:
        pass


class AskAheadSource:
    """The ``WorkSource`` of a worker of our luigid: grants asked ahead by ``ahead``, and leases.

    ``runs_here(timeout)``: whether a task with that timeout runs in this process (only then is it worth
    asking ahead before it); ``taking_work()``: whether the worker still takes new work;
    ``get_work_kwargs()``: its ``get_work`` arguments. ``stop_run(task_id)`` kills a run handed to another
    worker (False: it cannot be, it runs in this process) and ``forget_run(task_id)`` makes the loop forget
    a run it will not report.
    """

    def __init__(
        self,
        scheduler: SchedulerAPI,
        worker_id: str,
        ping_interval: float,
        ahead: AheadAsker,
        runs_here: Callable[[float | None], bool],
        taking_work: Callable[[], bool],
        get_work_kwargs: Callable[[], dict[str, Any]],
        stop_run: Callable[[str], bool],
        forget_run: Callable[[str], None],
    ) -> None:
        self._scheduler = scheduler
        self._ahead = ahead
        self._book = LeaseBook(ahead.queued)
        self._check = LeaseCheck(self._book, scheduler, worker_id, ping_interval)
        self._runs_here = runs_here
        self._taking_work = taking_work
        self._get_work_kwargs = get_work_kwargs
        self._stop_run = stop_run
        self._forget_run = forget_run
        self._dropped: dict[str, str | None] = {}  # grants made ahead dropped unstarted, for the summary
        self._cancel_lock = threading.Lock()  # the keep-alive thread cancels, the loop starts
        self._cancel_at_start: dict[str, str] = {}  # granted ahead and cancelled: fails when it starts
        self._started_here: float | None = None  # when the task starting in this process started

    def begin_run(self, pinged: bool) -> None:
        """Ask once whether the scheduler tracks leases (a Luigi luigid does not: plain pings then)."""
        self._book.enable(scheduler_tracks_leases(self._scheduler))
        self._book.pinging = pinged

    def release_handed_over(self) -> dict[str, str | None]:
        """Stop the runs, and drop the grants made ahead, that the last pings said were handed over (a run
        in this process cannot be stopped: it is only disowned, and its result dropped when it ends)."""
        owners, self._dropped = self._dropped, {}
        for lost in self._book.take_lost():
            task_id = lost.task_id
            if lost.number == AHEAD:
                if self._book.running(task_id):
                    continue  # started since the ping was sent: the next ping tells
                self._ahead.forget(task_id)
            elif self._stop_run(task_id):
                self._forget_run(task_id)
                self._book.ended(task_id)
            owners[task_id] = lost.new_owner
        return owners

    def next_grant(self) -> dict[str, Any] | None:
        """The next grant made ahead that is still this worker's; after a long silence one whose lease
        cannot be confirmed waits, first in line, and None is returned."""
        while True:
            grant = self._ahead.take()
            self._forget_cancels_of_dropped(grant)
            task_id = grant.get("task_id") if grant is not None else None
            if grant is None or not isinstance(task_id, str):
                return grant
            lease = self._check.lease_of(task_id)
            if lease.standing is Standing.OURS:
                return grant
            if lease.standing is Standing.UNCONFIRMED:  # its lease may have run out: start nothing
                self._ahead.put_back(grant)
                return None
            self._dropped[task_id] = lease.new_owner

    def _forget_cancels_of_dropped(self, grant: dict[str, Any] | None) -> None:
        """A cancel of a grant that was dropped unstarted (its assumption failed) has nothing left to do."""
        if not self._cancel_at_start:
            return
        waiting = {*self._ahead.queued(), grant.get("task_id") if grant is not None else None}
        with self._cancel_lock:
            for task_id in set(self._cancel_at_start) - waiting:
                del self._cancel_at_start[task_id]

    def unstarted(self) -> list[str]:
        return self._ahead.queued()

    def before_start(self, task_id: str, timeout: float | None) -> str | None:
        """Note the run; ask ahead before a task that runs in this process if worth it (a worker phasing
        out asks for nothing more), else send held reports so the previous result does not wait for it."""
        self._book.started(task_id)
        if self._cancel_at_start:
            with self._cancel_lock:
                reason = self._cancel_at_start.pop(task_id, None)
            if reason is not None:
                return reason
        here = self._runs_here(timeout)
        self._ahead.before_start(task_id, here and self._taking_work(), self._get_work_kwargs)
        self._started_here = time.monotonic() if here else None
        return None

    def after_start(self) -> None:
        """A task run in this process has ended: how long it ran tells whether to ask ahead next time."""
        started, self._started_here = self._started_here, None
        if started is not None:
            self._ahead.ran(time.monotonic() - started)

    def ended(self, outcome: TaskOutcome) -> dict[str, str | None]:
        """Grants assuming the task run only if it finished DONE; a run handed over meanwhile is not
        reported (the loop forgets it), and the task is returned with its new owner."""
        task_id = outcome.task_id
        self._ahead.finished(task_id, outcome.status == DONE)
        if self._book.disowned(task_id):
            lost = self._book.pop_lost(task_id)  # (None: it was let go of already)
            owner = lost.new_owner if lost is not None else None
        else:
            lease = self._check.lease_of(task_id)
            if lease.standing is not Standing.HANDED_OVER:
                self._book.ended(task_id)
                return {}  # still ours, or unknown: a stale report is refused by the scheduler anyway
            owner = lease.new_owner
        self._forget_run(task_id)
        self._book.ended(task_id)
        return {task_id: owner}

    def cancel_before_start(self, task_id: str, reason: str) -> bool:
        with self._cancel_lock:
            if task_id not in self._ahead.queued():
                return False
            self._cancel_at_start[task_id] = reason
        return True

    def held_for_ping(self) -> dict[str, int] | None:
        """The held runs and grants made ahead, once the scheduler said it tracks leases."""
        return self._book.snapshot() if self._book.enabled else None

    def ping_answered(self, reply: dict[str, Any], held: dict[str, int]) -> None:
        self._book.handed_over(reply.get("handed_over"), held, reply.get("handed_to"))
