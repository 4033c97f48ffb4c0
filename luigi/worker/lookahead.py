"""Asking for the next task while the current one runs: when a serial worker does it.

A worker with one process runs its tasks in its own process one after the other, and without this it
idles through a round trip to the scheduler between every two tasks. Asking ahead overlaps that round
trip with the task. The task granted ahead is RUNNING for this worker (and holds its resources) while it
waits, so it is asked for only after short tasks, and less often after asks that granted nothing.

The ask says that the task about to run is expected to finish DONE, so a task that needs only it (the
next link of a chain) may be granted too. Such a grant names the task it assumes; it is run only if
that task did finish DONE, and otherwise left out of the next ``get_work``'s ``current_tasks``, which
tells the scheduler to put it back to PENDING.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from luigi.rpc import RPCError
from luigi.worker.reconnect import is_unreachable

logger = logging.getLogger("luigi-interface")

# A task that ran longer than this (seconds) stops asking ahead until one runs shorter: a task granted
# ahead then waits at most about as long as the tasks before it took, and the round trip saved (well
# under a millisecond) is worth nothing beside longer tasks.
SHORT_TASK = 0.02
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
        if not (self.enabled and self._last_run_short):
            return False
        if self._skip > 0:
            self._skip -= 1
            return False
        return True

    def ran(self, seconds: float) -> None:
        """A task ran in this process for ``seconds``."""
        self._last_run_short = seconds < SHORT_TASK

    def answered(self, granted: bool) -> None:
        """An ask ahead granted a task, or nothing (then skip the next 1, 2, 4, ... tasks)."""
        if granted:
            self._after_miss = 0
        else:
            self._after_miss = min(max(1, 2 * self._after_miss), MAX_SKIP)
            self._skip = self._after_miss


class AheadAsker:
    """The worker's side of asking ahead: sends the ask, takes its grant, and keeps reports moving.

    ``scheduler`` must have ``ask_ahead``/``take_ahead`` (our RemoteScheduler) for anything to happen;
    ``flush`` sends held reports through the worker's retrier.
    """

    def __init__(self, scheduler: Any, lookahead: Lookahead, flush: Callable[[], None]) -> None:
        self._scheduler = scheduler
        self._lookahead = lookahead
        self._flush = flush
        self._asked = False
        self._granted_ahead = False  # the task about to start was granted ahead
        self._running: str | None = None  # the task run while the ask was out, assumed to finish DONE
        self._finished_done = False  # whether it did

    def before_start(
        self, task_id: str, in_process: bool, get_work_kwargs: Callable[[], dict[str, Any]]
    ) -> None:
        """Ask ahead before ``task_id`` starts in this process, if worth it; otherwise send held reports,
        so that the previous task's result does not wait for this one when it was granted ahead."""
        granted_ahead, self._granted_ahead = self._granted_ahead, False
        if in_process and self._lookahead.should_ask():
            self._running, self._finished_done = task_id, False
            try:
                kwargs = {**get_work_kwargs(), "assume_done": [task_id]}
                self._asked = bool(self._scheduler.ask_ahead(**kwargs))
            except RPCError as exc:
                if not is_unreachable(exc):
                    raise  # a refused report: raised here as the ordinary get_work would have
                logger.debug("Asking ahead found the scheduler unreachable (the retrier waits): %s", exc)
            if self._asked:
                return
        if granted_ahead:
            self._flush()

    def ran(self, seconds: float) -> None:
        """A task ran in this process for ``seconds``."""
        self._lookahead.ran(seconds)

    def finished(self, task_id: str, done: bool) -> None:
        """A task's outcome was handled: a grant assuming it is run only if it is DONE."""
        if task_id == self._running:
            self._finished_done = done

    def take(self) -> dict[str, Any] | None:
        """The reply granting a task, if the ask ahead granted one (else ask the ordinary way)."""
        if not self._asked:
            return None
        self._asked = False
        reply = self._scheduler.take_ahead()
        granted = isinstance(reply, dict) and (
            reply.get("task_id") is not None or reply.get("batch_id") is not None
        )
        self._lookahead.answered(granted)
        if granted and not self._assumption_held(reply):
            logger.info(
                "Not running %s: it was granted on the assumption that %s would finish DONE",
                reply.get("task_id"),
                self._running,
            )
            granted = False  # the ordinary get_work leaves it out of current_tasks: put back to PENDING
        self._running = None
        self._granted_ahead = granted
        return reply if granted else None

    def _assumption_held(self, reply: dict[str, Any]) -> bool:
        assumed = reply.get("assumes_done") or []
        return all(task_id == self._running and self._finished_done for task_id in assumed)
