"""The background writer: the scheduler only appends events to a bounded buffer; one thread writes them.

Recording never slows or stops scheduling. ``submit`` is an append under a lock. The writer thread
takes up to ``batch_size`` events per transaction, every ``flush_interval`` or as soon as a batch is
full. When the database is away it logs that once, keeps the events (retrying with a growing delay up
to ``retry_max_delay``), and writes them when it returns. Past ``buffer_size`` waiting events new ones
are dropped; every event that cannot be written is counted (``status()``) and logged, never lost in
silence. Rows the database refuses one by one (a data error) are counted as rejected.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable

from sqlalchemy import Engine
from sqlalchemy.exc import (
    DBAPIError,
    DisconnectionError,
    InterfaceError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from luigi.db_task_history import migrations, retention
from luigi.db_task_history.errors import HistorySchemaError, TaskHistoryError
from luigi.db_task_history.recorder import HistoryEvent, Recorder, timestamp
from luigi.db_task_history.settings import HistorySettings
from luigi.task_history import HistoryStatus

logger = logging.getLogger("luigi.task_history")

_FIRST_RETRY_DELAY = 0.1
_WRITER_NICENESS = 10
_LOGGED_REJECTIONS = 10  # rejected events logged one by one; after that only counted (and summarised)


def _reset_in_forked_children(writer: HistoryWriter) -> None:
    """Call ``writer.after_fork_in_child`` in every forked child, for as long as the writer lives."""
    ref = weakref.ref(writer)

    def after_fork() -> None:
        alive = ref()
        if alive is not None:
            alive.after_fork_in_child()

    os.register_at_fork(after_in_child=after_fork)


def _yield_cpu_to_scheduling() -> None:
    """Lower this thread's CPU priority: on a busy machine the scheduler's requests go first.

    Linux applies ``setpriority`` to a single thread when given its id; elsewhere this does nothing.
    """
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _WRITER_NICENESS)


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot be reached (as opposed to refusing the data)."""
    if isinstance(exc, (OperationalError, InterfaceError, DisconnectionError, PoolTimeoutError)):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


def short_error(exc: BaseException) -> str:
    """The first line of a database error, without SQLAlchemy's background link."""
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class HistoryWriter:
    """Buffers events and writes them from its own thread (started by ``start``, ended by ``close``)."""

    def __init__(
        self,
        make_engine: Callable[[], Engine],
        where: str,
        settings: HistorySettings,
        clock: Callable[[], float],
    ) -> None:
        self.where = where
        self._settings = settings
        self._clock = clock
        self._make_engine = make_engine
        self._engine: Engine | None = None
        self._schema_ready = False
        self._recorder = Recorder(settings.cache_size)
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._queue: deque[HistoryEvent] = deque()
        self._in_flight: list[HistoryEvent] = []
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._closed = False
        self._fatal: HistorySchemaError | None = None
        self._written = self._dropped = self._rejected = 0
        self._dropped_in_outage = 0
        self._outage_since: float | None = None
        self._last_error: str | None = None
        self._next_prune = clock()
        _reset_in_forked_children(self)

    # -- the scheduler's side ---------------------------------------------------------------------------

    def submit(self, event: HistoryEvent) -> None:
        """Queue ``event`` for writing (or count it as dropped when the buffer is full); never blocks."""
        with self._lock:
            if self._closed or self._fatal is not None:
                self._count_lost_after_close()
                return
            waiting = len(self._queue) + len(self._in_flight)
            if waiting >= self._settings.buffer_size:
                self._drop_one(waiting)
                return
            self._queue.append(event)
            full_batch = len(self._queue) >= self._settings.batch_size
        if self._thread is None:  # not started yet, or not in this (forked) process
            self.start()
        if full_batch:
            self._wake.set()

    def _drop_one(self, waiting: int) -> None:
        if self._dropped_in_outage == 0:
            logger.error(
                "Task history buffer is full (%d events waiting for %s): new events are dropped, and "
                "counted, until the database takes them again",
                waiting,
                self.where,
            )
        self._dropped += 1
        self._dropped_in_outage += 1

    def _count_lost_after_close(self) -> None:
        if self._fatal is not None:
            self._rejected += 1
        else:
            self._dropped += 1

    # -- lifecycle --------------------------------------------------------------------------------------

    def open(self) -> None:
        """Open and upgrade the database now: HistorySchemaError if too new; an outage is only logged."""
        try:
            self._ensure_open()
        except HistorySchemaError:
            raise
        except SQLAlchemyError as exc:
            if not is_outage(exc):
                raise TaskHistoryError(
                    f"Cannot prepare the task history database {self.where}: {short_error(exc)}"
                ) from None
            self._enter_outage(exc)

    def start(self) -> None:
        """Start the writer thread, unless it runs."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name="luigi-task-history", daemon=True)
            self._thread.start()

    def after_fork_in_child(self) -> None:
        """A forked child has no writer thread and must not use the parent's locks, connections or events.

        The events waiting in the copied buffer are the parent's to write; the child starts empty and
        starts its own thread when it records something.
        """
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._queue = deque()
        self._in_flight = []
        self._thread = None
        if self._engine is not None:
            self._engine.dispose(close=False)  # the parent's connections are not ours to use

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every submitted event is written (or refused); False when ``timeout`` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._wake.set()
        with self._drained:
            while (self._queue or self._in_flight) and self._thread is not None and self._thread.is_alive():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._drained.wait(0.1 if remaining is None else min(remaining, 0.1))
            return not (self._queue or self._in_flight)

    def close(self, timeout: float | None = 5.0) -> None:
        """Write what can be written within ``timeout``, stop the thread, and report what was lost."""
        with self._lock:
            if self._closed:
                return
            self._stopping = True
            thread = self._thread
        self._wake.set()
        if thread is not None and thread.is_alive():
            thread.join(timeout)
        with self._lock:
            self._closed = True
            unwritten = len(self._queue) + len(self._in_flight)
            self._dropped += unwritten
            self._queue.clear()
            self._in_flight = []
        self._report_losses(unwritten)
        if self._engine is not None:
            self._engine.dispose()

    def _report_losses(self, unwritten: int) -> None:
        if unwritten:
            logger.error(
                "Task history: %d events could not be written to %s before shutdown (%s)",
                unwritten,
                self.where,
                self._last_error or "the writer did not finish in time",
            )
        if self._dropped or self._rejected:
            logger.error(
                "Task history: %d events in all were not recorded in %s (%d dropped, %d refused)",
                self._dropped + self._rejected,
                self.where,
                self._dropped,
                self._rejected,
            )

    def status(self) -> HistoryStatus:
        """The counters and the outage, for the pages and the logs."""
        with self._lock:
            return HistoryStatus(
                recording=True,
                where=self.where,
                buffered=len(self._queue) + len(self._in_flight),
                written=self._written,
                dropped=self._dropped,
                rejected=self._rejected,
                outage_since=self._outage_since,
                last_error=str(self._fatal) if self._fatal is not None else self._last_error,
            )

    @property
    def engine(self) -> Engine:
        """The engine (the pages read through it); opened, not necessarily reachable."""
        if self._engine is None:
            self._engine = self._make_engine()
        return self._engine

    # -- the writer thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        """The loop: wait for work, write every pending batch, prune when due, back off while away."""
        _yield_cpu_to_scheduling()
        delay = 0.0
        while True:
            self._wake.wait(delay or self._settings.flush_interval)
            self._wake.clear()
            stopping = self._stopping
            try:
                written = self._write_pending()
                if written:
                    self._prune_if_due()
            except Exception:  # a bug here must not end recording for good: log it, back off, go on
                logger.exception("Task history writer failed; retrying")
                written = False
            delay = (
                0.0 if written else min(max(delay * 2, _FIRST_RETRY_DELAY), self._settings.retry_max_delay)
            )
            if stopping:
                return

    def _write_pending(self) -> bool:
        """Write batch after batch until none is left (True) or the database is away (False)."""
        while True:
            batch = self._take_batch()
            if not batch:
                return True
            if not self._write_batch(batch):
                return False

    def _take_batch(self) -> list[HistoryEvent]:
        """The batch that failed last time, else the next ``batch_size`` events; wakes ``flush`` if none."""
        with self._lock:
            if not self._in_flight:
                take = min(len(self._queue), self._settings.batch_size)
                self._in_flight = [self._queue.popleft() for _ in range(take)]
            if not self._in_flight:
                self._drained.notify_all()
            return self._in_flight

    def _write_batch(self, batch: list[HistoryEvent]) -> bool:
        """One transaction for the whole batch; on a data error, one per event. False during an outage."""
        try:
            engine = self._ensure_open()
            with engine.begin() as conn:
                self._recorder.write(conn, batch)
        except HistorySchemaError as exc:
            self._refuse_everything(exc)
            return True
        except SQLAlchemyError as exc:
            self._recorder.forget()
            if is_outage(exc):
                self._enter_outage(exc)
                return False
            return self._write_singly(batch)
        except Exception:  # a bug tripped by one event must not stop the others: find it, refuse it alone
            self._recorder.forget()
            return self._write_singly(batch)
        self._leave_outage()
        self._settle(written=len(batch), rejected=0)
        return True

    def _write_singly(self, batch: list[HistoryEvent]) -> bool:
        """Write the events of a refused batch one by one, counting (and logging) the ones refused."""
        engine = self.engine
        for index, event in enumerate(batch):
            try:
                with engine.begin() as conn:
                    self._recorder.write(conn, [event])
            except Exception as exc:  # refused (or a bug): counted and logged, the next event is tried
                self._recorder.forget()
                if isinstance(exc, SQLAlchemyError) and is_outage(exc):
                    with self._lock:
                        self._in_flight = batch[index:]
                    self._enter_outage(exc)
                    return False
                self._reject(event, exc)
                self._settle(written=0, rejected=1, keep=batch[index + 1 :])
            else:
                self._settle(written=1, rejected=0, keep=batch[index + 1 :])
        return True

    def _settle(self, written: int, rejected: int, keep: list[HistoryEvent] | None = None) -> None:
        with self._lock:
            self._written += written
            self._rejected += rejected
            self._in_flight = keep or []
            drained = not self._in_flight and not self._queue
            dropped = self._dropped_in_outage if drained and self._outage_since is None else 0
            if drained:
                self._dropped_in_outage = 0
                self._drained.notify_all()
        if dropped:
            logger.warning(
                "Task history caught up; %d events were dropped while its buffer was full", dropped
            )

    def _reject(self, event: HistoryEvent, exc: BaseException) -> None:
        self._last_error = short_error(exc)
        if self._rejected < _LOGGED_REJECTIONS:
            logger.error(
                "Task history: %s refused the %s event of %s (%s); it is counted as rejected",
                self.where,
                event.status,
                event.task_id,
                self._last_error,
                exc_info=not isinstance(exc, SQLAlchemyError),
            )

    def _refuse_everything(self, exc: HistorySchemaError) -> None:
        logger.error("Task history is not recorded: %s", exc)
        with self._lock:
            self._fatal = exc
            self._rejected += len(self._queue) + len(self._in_flight)
            self._queue.clear()
            self._in_flight = []
            self._drained.notify_all()

    def _ensure_open(self) -> Engine:
        """The engine, with the schema upgraded once per connection to a database."""
        engine = self.engine
        if not self._schema_ready:
            with engine.begin() as conn:
                migrations.upgrade(conn, self.where)
            self._schema_ready = True
        return engine

    # -- outages ----------------------------------------------------------------------------------------

    def _enter_outage(self, exc: BaseException) -> None:
        self._last_error = short_error(exc)
        if self._outage_since is not None:
            logger.debug("Task history database %s still unavailable: %s", self.where, self._last_error)
            return
        self._outage_since = self._clock()
        logger.error(
            "Task history database %s is unavailable (%s). Scheduling goes on; up to %d events are kept "
            "and written when it returns.",
            self.where,
            self._last_error,
            self._settings.buffer_size,
        )

    def _leave_outage(self) -> None:
        if self._outage_since is None:
            return
        away = self._clock() - self._outage_since
        with self._lock:
            waiting = len(self._queue) + len(self._in_flight)
            dropped, self._dropped_in_outage = self._dropped_in_outage, 0
            self._outage_since = None
        lost = f"; {dropped} events were dropped while it was away (buffer full)" if dropped else ""
        logger.warning(
            "Task history database %s is back after %.0fs; writing the %d waiting events%s",
            self.where,
            away,
            waiting,
            lost,
        )

    # -- retention --------------------------------------------------------------------------------------

    def _prune_if_due(self) -> None:
        keep = self._settings.keep_seconds
        now = self._clock()
        if keep is None or now < self._next_prune:
            return
        self._next_prune = now + self._settings.prune_interval
        try:
            with self._ensure_open().begin() as conn:
                pruned = retention.prune(conn, timestamp(now - keep))
        except HistorySchemaError:
            return
        except SQLAlchemyError as exc:
            logger.warning(
                "Task history: pruning %s failed (%s); next try in %.0fs",
                self.where,
                short_error(exc),
                self._settings.prune_interval,
            )
            return
        finally:
            self._recorder.forget()
        if pruned:
            logger.info(
                "Task history: pruned %d runs, %d events and %d tasks older than %g days from %s",
                pruned.runs,
                pruned.events,
                pruned.tasks,
                self._settings.keep_days,
                self.where,
            )
