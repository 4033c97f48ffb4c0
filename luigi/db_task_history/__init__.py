"""``DbTaskHistory``: the scheduler's task history in a SQLAlchemy database (SQLite or PostgreSQL).

Turned on by ``[scheduler] record_task_history = true``; the database is ``[task_history]
db_connection`` (default: a SQLite file beside ``[scheduler] state_path``). The tables are Luigi's
(``tasks``, ``task_parameters``, ``task_events``) plus ``task_runs``, so a Luigi history database can
be opened, upgraded and appended to. Events are written in the background (see ``writer``): recording
never slows scheduling, and survives the database being away for a while.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import datetime
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session

from luigi.db_task_history import queries
from luigi.db_task_history.engine import describe, make_engine, parse_url
from luigi.db_task_history.errors import HistorySchemaError, TaskHistoryError
from luigi.db_task_history.migrations import LATEST_VERSION
from luigi.db_task_history.recorder import HistoryEvent
from luigi.db_task_history.schema import Base, TaskEvent, TaskParameter, TaskRecord, TaskRun
from luigi.db_task_history.settings import HistorySettings
from luigi.db_task_history.writer import HistoryWriter
from luigi.task_history import HistoryStatus, TaskHistory
from luigi.task_status import DONE, FAILED, PENDING, RUNNING

__all__ = [
    "LATEST_VERSION",
    "Base",
    "DbTaskHistory",
    "HistorySchemaError",
    "HistorySettings",
    "TaskEvent",
    "TaskHistoryError",
    "TaskParameter",
    "TaskRecord",
    "TaskRun",
]

_CLOSE_AT_EXIT_TIMEOUT = 5.0


class DbTaskHistory(TaskHistory):
    """Records every task's events and runs in a database, and answers Luigi's history queries.

    Args:
        db_connection: a SQLAlchemy URL; default ``[task_history] db_connection``, else SQLite.
        settings: every ``[task_history]`` option; read from the configuration when None.
        clock: seconds since the epoch (tests inject one to drive retention).
        options: ``HistorySettings`` fields that win over the configuration (``keep_days=30``).

    Raises:
        HistorySchemaError: the database was written by a newer luigi.
        TaskHistoryError: the URL or an option is unusable (the message says which and why).
    """

    def __init__(
        self,
        db_connection: str | URL | None = None,
        *,
        settings: HistorySettings | None = None,
        clock: Callable[[], float] | None = None,
        **options: Any,
    ) -> None:
        if db_connection is not None:
            options["db_connection"] = parse_url(db_connection)
        if settings is None:
            settings = HistorySettings.from_config(**options)
        elif options:
            settings = dataclasses.replace(settings, **options)
        self.settings = settings
        url = settings.url
        self.where = describe(url)
        self._clock: Callable[[], float] = clock or time.time
        self._writer = HistoryWriter(lambda: make_engine(url), self.where, settings, self._clock)
        self._writer.open()
        self._writer.start()
        atexit.register(self._close_at_exit)

    # -- recording (the scheduler's calls: only a copy and an append) -----------------------------------

    def task_scheduled(self, task: Any) -> None:
        """The task became PENDING."""
        self._writer.submit(HistoryEvent.capture(task, PENDING, self._clock()))

    def task_started(self, task: Any, worker_host: str | None) -> None:
        """The task was granted to a worker on ``worker_host``: a run starts."""
        self._writer.submit(HistoryEvent.capture(task, RUNNING, self._clock(), host=worker_host))

    def task_finished(self, task: Any, successful: bool) -> None:
        """The task is DONE or FAILED: its run ends (with the task's error when it failed)."""
        self._writer.submit(HistoryEvent.capture(task, DONE if successful else FAILED, self._clock()))

    # -- lifecycle --------------------------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every event so far is written; False if ``timeout`` passed (e.g. during an outage)."""
        return self._writer.flush(timeout)

    def close(self, timeout: float | None = _CLOSE_AT_EXIT_TIMEOUT) -> None:
        """Write what can be written within ``timeout``, then release the database."""
        atexit.unregister(self._close_at_exit)
        self._writer.close(timeout)

    def _close_at_exit(self) -> None:
        self._writer.close(_CLOSE_AT_EXIT_TIMEOUT)

    def status(self) -> HistoryStatus:
        """Events waiting, written, dropped and refused, and the current outage if any."""
        return self._writer.status()

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine of the history database."""
        return self._writer.engine

    @contextlib.contextmanager
    def _session(self, session: Session | None = None) -> Iterator[Session]:
        """``session`` as given, or a new one committed at the end of the block (Luigi's helper)."""
        if session is not None:
            yield session
            return
        with Session(self.engine, expire_on_commit=False) as new_session, new_session.begin():
            yield new_session

    # -- Luigi's query API ------------------------------------------------------------------------------

    def find_all_by_parameters(
        self, task_name: str, session: Session | None = None, **task_params: Any
    ) -> list[TaskRecord]:
        """Records named ``task_name`` whose parameters include ``task_params``, newest first."""
        with self._session(session) as s:
            return queries.find_all_by_parameters(s, task_name, task_params)

    def find_all_by_name(self, task_name: str, session: Session | None = None) -> list[TaskRecord]:
        """Records named ``task_name``, newest first."""
        return self.find_all_by_parameters(task_name, session)

    def find_latest_runs(self, session: Session | None = None) -> list[TaskRecord]:
        """Records with an event in the last 24 hours, the most recently active first."""
        with self._session(session) as s:
            return queries.find_latest_runs(s, self._now())

    def find_all_runs(self, session: Session | None = None) -> list[TaskRecord]:
        """Every record, oldest first."""
        with self._session(session) as s:
            return queries.find_all_runs(s)

    def find_all_events(self, session: Session | None = None) -> list[TaskEvent]:
        """Every event, oldest first."""
        with self._session(session) as s:
            return queries.find_all_events(s)

    def find_task_by_id(self, id: int, session: Session | None = None) -> TaskRecord | None:
        """The record with database id ``id``, or None."""
        with self._session(session) as s:
            return queries.find_task_by_id(s, id)

    def find_task_by_task_id(self, task_id: str, session: Session | None = None) -> TaskRecord | None:
        """The newest record of the luigi task ``task_id``, or None."""
        with self._session(session) as s:
            return queries.find_task_by_task_id(s, task_id)

    # -- ours: bounded queries for the pages and the chart ----------------------------------------------

    def find_runs_by_name(self, task_name: str, limit: int = 500) -> list[TaskRun]:
        """The last ``limit`` runs of tasks named ``task_name``, oldest first."""
        with self._session() as s:
            return queries.find_runs_by_name(s, task_name, limit)

    def find_task_names(self) -> Sequence[tuple[str, int]]:
        """Every recorded task name with its number of records, by name."""
        with self._session() as s:
            return queries.find_task_names(s)

    def find_records_by_parameters(
        self, task_name: str, task_params: dict[str, Any], limit: int
    ) -> list[TaskRecord]:
        """Like ``find_all_by_parameters``, at most ``limit`` records (the pages' bound)."""
        with self._session() as s:
            return queries.find_all_by_parameters(s, task_name, task_params, limit)

    def find_latest_records(self, limit: int) -> list[TaskRecord]:
        """Like ``find_latest_runs``, at most ``limit`` records (the pages' bound)."""
        with self._session() as s:
            return queries.find_latest_runs(s, self._now(), limit)

    def _now(self) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(self._clock())
