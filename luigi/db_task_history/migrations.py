"""Numbered schema migrations of the task-history database, recorded in ``luigi_history_schema``.

A database without that table is version 0: empty, or written by Luigi (whose tables migration 1 brings
up to date). Opening runs every migration above the recorded version, in order; a database whose version
is above ``LATEST_VERSION`` was written by a newer luigi and is refused. Every migration checks what is
already there before changing it, so one interrupted half-way (SQLite runs some DDL outside the
transaction) is simply run again.
"""

from __future__ import annotations

import datetime
from typing import Any

from sqlalchemy import Connection, Index, Table, func, insert, inspect, select, text

from luigi.database import Migration, run_migrations
from luigi.db_task_history import schema
from luigi.db_task_history.errors import HistorySchemaError
from luigi.db_task_history.recorder import LOST_RUN_ERROR
from luigi.task_status import DONE, FAILED, RUNNING

_BACKFILL_CHUNK = 1000
# PostgreSQL advisory lock key (an arbitrary constant): two servers opening one database upgrade in turn.
_UPGRADE_LOCK_KEY = 0x6C756967


def _luigi_tables(conn: Connection) -> None:
    """Luigi's tables and indexes; older Luigi databases gain ``tasks.task_id`` and TEXT parameter values."""
    luigi_tables: list[Table] = [schema.tasks, schema.task_parameters, schema.task_events]  # type: ignore[list-item]
    schema.Base.metadata.create_all(conn, tables=luigi_tables, checkfirst=True)
    columns = {column["name"]: column for column in inspect(conn).get_columns("tasks")}
    if "task_id" not in columns:
        conn.execute(text(f"ALTER TABLE tasks ADD COLUMN task_id VARCHAR({schema.TASK_ID_LENGTH})"))
    for table in luigi_tables:
        _create_missing_indexes(conn, table)
    _widen_parameter_values(conn)


def _widen_parameter_values(conn: Connection) -> None:
    """``task_parameters.value`` as TEXT (old Luigi databases had a short VARCHAR); SQLite has no widths."""
    dialect = conn.dialect.name
    value = next(c for c in inspect(conn).get_columns("task_parameters") if c["name"] == "value")
    if "TEXT" in str(value["type"]).upper():
        return
    if dialect == "postgresql":
        conn.execute(text("ALTER TABLE task_parameters ALTER COLUMN value TYPE TEXT"))
    elif dialect in ("mysql", "mariadb"):
        conn.execute(text("ALTER TABLE task_parameters MODIFY value TEXT"))


def _task_runs(conn: Connection) -> None:
    """The ``task_runs`` table: duration, host, worker, error, exception type and retry of each attempt."""
    table: Table = schema.task_runs  # type: ignore[assignment]
    table.create(conn, checkfirst=True)
    _create_missing_indexes(conn, table)
    if conn.execute(select(func.count()).select_from(table)).scalar() == 0:
        _backfill_runs(conn, table)


def _backfill_runs(conn: Connection, runs: Table) -> None:
    """Runs rebuilt from the events recorded before ``task_runs`` existed (a Luigi database).

    A RUNNING event opens a run, the next DONE or FAILED closes it; a FAILED without a start is a run
    of its own. Errors, workers and exception types were never recorded, so they stay empty.
    """
    tasks: Table = schema.tasks  # type: ignore[assignment]
    events: Table = schema.task_events  # type: ignore[assignment]
    query = (
        select(events.c.task_id, events.c.event_name, events.c.ts, tasks.c.name, tasks.c.host)
        .join(tasks, tasks.c.id == events.c.task_id)
        .order_by(events.c.task_id, events.c.ts, events.c.id)
    )
    pending: list[dict[str, Any]] = []
    builder = _RunBuilder()
    for row in conn.execute(query.execution_options(yield_per=_BACKFILL_CHUNK)):
        pending.extend(builder.feed(row.task_id, row.event_name, row.ts, row.name, row.host))
        if len(pending) >= _BACKFILL_CHUNK:
            conn.execute(insert(runs), pending)
            pending = []
    pending.extend(builder.finish())
    if pending:
        conn.execute(insert(runs), pending)


class _RunBuilder:
    """Pairs one task's events, in time order, into runs (see ``_backfill_runs``)."""

    def __init__(self) -> None:
        self.task_id: int | None = None
        self.open: dict[str, Any] | None = None
        self.failures = 0

    def feed(
        self, task_id: int, event: str, ts: datetime.datetime, name: str | None, host: str | None
    ) -> list[dict[str, Any]]:
        """The runs that ``event`` completes."""
        done = self.finish() if task_id != self.task_id else []
        self.task_id = task_id
        if event == RUNNING:
            if self.open is not None:  # started again without an end: the earlier run was lost
                done.append(self._close(FAILED, ts, LOST_RUN_ERROR, duration=False))
            self.open = {"task_id": task_id, "name": name, "host": host, "retry": self.failures}
            self.open.update(status=RUNNING, started=ts, finished=None, duration=None, error=None)
        elif event in (DONE, FAILED):
            if self.open is None:
                self.open = {"task_id": task_id, "name": name, "host": host, "retry": self.failures}
                self.open.update(started=None, error=None)
            done.append(self._close(event, ts, None, duration=True))
        return done

    def _close(self, status: str, ts: datetime.datetime, error: str | None, duration: bool) -> dict[str, Any]:
        run, self.open = self.open or {}, None
        started = run.get("started")
        seconds = (ts - started).total_seconds() if duration and started is not None else None
        self.failures = 0 if status == DONE else self.failures + 1
        return {**run, "status": status, "finished": ts, "duration": seconds, "error": error}

    def finish(self) -> list[dict[str, Any]]:
        """The run the task's events leave open (it may still be running), if any."""
        run, self.open, self.failures = self.open, None, 0
        return [run] if run is not None else []


def _create_missing_indexes(conn: Connection, table: Table) -> None:
    existing = {index["name"] for index in inspect(conn).get_indexes(table.name)}
    for index in table.indexes:
        if isinstance(index, Index) and index.name not in existing:
            index.create(conn)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1, "Luigi's tables: tasks (with task_id), task_parameters (TEXT values), task_events", _luigi_tables
    ),
    Migration(
        2, "task_runs: duration, host, worker, error, exception type and retry of every run", _task_runs
    ),
)
LATEST_VERSION = MIGRATIONS[-1].version


def current_version(conn: Connection) -> int:
    """The highest migration recorded in the database (0 when none is)."""
    if not inspect(conn).has_table(schema.SchemaVersion.__tablename__):
        return 0
    return int(conn.execute(select(func.max(schema.SchemaVersion.version))).scalar() or 0)


def upgrade(conn: Connection, where: str) -> int:
    """Bring the database at ``where`` (shown in messages) to ``LATEST_VERSION`` and return that number.

    Raises:
        HistorySchemaError: the database was written by a newer luigi (its version is higher).
    """
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _UPGRADE_LOCK_KEY})

    def too_new(found: int, latest: int) -> HistorySchemaError:
        return HistorySchemaError(
            f"The task history database {where} has schema version {found}, newer than the version "
            f"{latest} this luigi knows: it was written by a newer luigi. Upgrade luigi, or set "
            "[task_history] db_connection to another database."
        )

    found = current_version(conn)
    if found <= LATEST_VERSION:
        _VERSIONS.create(conn, checkfirst=True)
    run_migrations(conn, MIGRATIONS, found, too_new, _record_version)
    return LATEST_VERSION


_VERSIONS: Table = schema.schema_versions  # type: ignore[assignment]


def _record_version(conn: Connection, migration: Migration) -> None:
    row = {"version": migration.version, "description": migration.description}
    conn.execute(insert(_VERSIONS).values(**row, applied_at=datetime.datetime.now()))
