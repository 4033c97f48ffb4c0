"""Asking for the next task while the current one runs: when a serial worker does it.

A worker with one process runs its tasks in its own process one after the other, and without this it
idles through a round trip to the scheduler between every two tasks. Asking ahead overlaps that round
trip with the task. The task granted ahead is RUNNING for this worker (and holds its resources) while it
waits, so it is asked for only after short tasks, and less often after asks that granted nothing.

One ask may grant several tasks, so that a run of short tasks costs one request per few tasks. It says
that the task about to run is expected to finish DONE, so a task that needs only it (the next link of a
chain) may be granted too, and so on down the grants. Such a grant names the tasks it assumes; it is run
only if they did finish DONE, and otherwise left out of the next ``get_work``'s ``current_tasks``, which
tells the scheduler to put it back to PENDING.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from luigi.rpc import RPCError
from luigi.rpc.retry import is_unreachable

if TYPE_CHECKING:
    from luigi.rpc.client import RemoteScheduler

logger = logging.getLogger("luigi-interface")

# A task that ran longer than this (seconds) stops asking ahead until one runs shorter: a task granted
# ahead then waits at most about as long as the tasks before it took, and the round trip saved (well
# under a millisecond) is worth nothing beside longer tasks.
SHORT_TASK = 0.02
# Tasks one ask may grant: the requests per task drop by as much, while a short task's grant waits at most
# this many short tasks (each held RUNNING for this worker meanwhile).
AHEAD_TASKS = 8
# The next ask goes out when a task starts with at most this many other granted tasks waiting behind it,
# so that luigid's answer is ready once they have run.
ASK_WHILE_QUEUED = 3
MAX_SKIP = 64  # after a run of asks that granted nothing, ask again at least every this many tasks


class Lookahead:
    """Whether to ask ahead before the next task, learnt from how long tasks ran and what asks granted."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._last_run_short = False  # nothing has run yet: the first task is asked for the ordinary way
        self._skip = 0  # tasks to start without asking ahead
        self._after_miss = 0  # how many to skip after the next ask that grants nothing

    def should_ask(self) -> bool:
        """Whether to ask ahead now, before starting a task (counts the task as started)."""
        if not self.last_run_short:
            return False
        if self._skip > 0:
            self._skip -= 1
            return False
        return True

    def ran(self, seconds: float) -> None:
        """A task ran in this process for ``seconds``."""
        self._last_run_short = seconds < SHORT_TASK

    @property
    def last_run_short(self) -> bool:
        """Whether asking ahead is on and the last task ran short."""
        return self.enabled and self._last_run_short

    def answered(self, granted: bool) -> None:
        """An ask ahead granted a task, or nothing (then skip the next 1, 2, 4, ... tasks)."""
        if granted:
            self._after_miss = 0
        else:
            self._after_miss = min(max(1, 2 * self._after_miss), MAX_SKIP)
            self._skip = self._after_miss


class AheadAsker:
    """The worker's side of asking ahead: sends the ask, queues what it granted, and keeps reports moving.

    ``scheduler`` must have ``ask_ahead``/``take_ahead`` (our RemoteScheduler) for anything to happen;
    ``flush`` sends held reports through the worker's retrier. One ask grants up to ``AHEAD_TASKS``
    tasks; the next ask goes out when the last but ``ASK_WHILE_QUEUED`` of them starts, with the reports
    held so far.
    """

    def __init__(self, scheduler: RemoteScheduler, lookahead: Lookahead, flush: Callable[[], None]) -> None:
        self._scheduler = scheduler
        self._lookahead = lookahead
        self._flush = flush
        self._asked = False
        self._queue: deque[dict[str, Any]] = deque()  # granted, not yet started, in grant order
        self._done: set[str] = set()  # tasks finished DONE that granted tasks may assume
        self._granted_ahead = False  # the task about to start was granted ahead

    def before_start(
        self, task_id: str, in_process: bool, get_work_kwargs: Callable[[], dict[str, Any]]
    ) -> None:
        """Ask ahead before ``task_id`` starts in this process (``in_process`` False: it does not, or
        the worker takes no more work), if worth it; otherwise send held reports, so that the previous
        task's result does not wait for this one when it was granted ahead."""
        granted_ahead, self._granted_ahead = self._granted_ahead, False
        short = in_process and self._lookahead.last_run_short
        if short and (self._asked or len(self._queue) > ASK_WHILE_QUEUED):
            return  # an ask is out, or goes before a later granted task: the reports wait for it
        if in_process and not self._asked and self._lookahead.should_ask():
            self._ask(task_id, get_work_kwargs())
            if self._asked:
                return
        if granted_ahead:
            self._flush()

    def _ask(self, task_id: str, get_work_kwargs: dict[str, Any]) -> None:
        """Ask for up to AHEAD_TASKS more, assuming this task and those already granted finish DONE."""
        waiting = self.queued()
        self._done &= {assumed for grant in self._queue for assumed in grant.get("assumes_done") or []}
        try:
            kwargs = {**get_work_kwargs, "assume_done": [task_id, *waiting], "max_tasks": AHEAD_TASKS}
            self._asked = bool(self._scheduler.ask_ahead(**kwargs))
        except RPCError as exc:
            if not is_unreachable(exc):
                raise  # a refused report: raised here as the ordinary get_work would have
            logger.debug("Asking ahead found the scheduler unreachable (the client rides it out): %s", exc)

    def ran(self, seconds: float) -> None:
        """A task ran in this process for ``seconds``."""
        self._lookahead.ran(seconds)

    def finished(self, task_id: str, done: bool) -> None:
        """A task's outcome was handled: grants assuming it are run only if it is DONE."""
        if done and (self._asked or self._queue):
            self._done.add(task_id)

    def queued(self) -> list[str]:
        """The tasks granted to this worker that it has not started yet (they are its current tasks); read
        from the keep-alive thread too, so the queue is copied in one step before it is looked at."""
        grants = list(self._queue)
        return [grant["task_id"] for grant in grants if isinstance(grant.get("task_id"), str)]

    def forget(self, task_id: str) -> bool:
        """Drop the grant of ``task_id`` unstarted (handed to another worker); False if none is queued."""
        for grant in list(self._queue):
            if grant.get("task_id") == task_id:
                self._queue.remove(grant)
                return True
        return False

    def put_back(self, grant: dict[str, Any]) -> None:
        """A grant just taken is to start later (its lease could not be confirmed): first in line again."""
        self._queue.appendleft(grant)
        self._granted_ahead = False

    def take(self) -> dict[str, Any] | None:
        """The next grant the asks ahead brought, if any (else ask the ordinary way); the answer to an
        ask is read once the grants before it are taken.

        A grant assuming a task that did not finish DONE is dropped, and so, in turn, are those assuming
        it: the ordinary get_work leaves them out of current_tasks, and the scheduler puts them back.
        """
        while True:
            while self._queue:
                grant = self._queue.popleft()
                assumed = grant.get("assumes_done") or []
                if all(task_id in self._done for task_id in assumed):
                    self._granted_ahead = True
                    return grant
                logger.info(
                    "Not running %s: it was granted on the assumption that %s would finish DONE",
                    grant.get("task_id"),
                    ", ".join(map(str, assumed)),
                )
            if not self._asked:
                return None
            self._asked = False
            self._receive(self._scheduler.take_ahead())

    def _receive(self, reply: Any) -> None:
        granted = isinstance(reply, dict) and (
            reply.get("task_id") is not None or reply.get("batch_id") is not None
        )
        self._lookahead.answered(granted)
        if not granted:
            return
        self._queue.append(reply)
        counts = {key: reply[key] for key in _COUNT_KEYS if key in reply}
        for more in reply.get("more_tasks") or []:
            # One we cannot read is not among our current tasks: the scheduler sends it again.
            if isinstance(more, dict) and isinstance(more.get("task_id"), str):
                self._queue.append({**counts, **more})


# A get_work reply's figures, which each further grant of the same reply shares.
_COUNT_KEYS = (
    "n_pending_tasks",
    "n_unique_pending",
    "n_pending_last_scheduled",
    "worker_state",
    "running_tasks",
)
