"""Where ``luigid`` keeps its backfills: ``backfills.sqlite`` beside the schedules' file.

One row per backfill: what was asked, whether it should be running (``running`` until its child ends,
or it is cancelled), the child's pid and the attempt it is on, the last progress seen. A row is written
and committed before its child starts, so a ``luigid`` killed mid-backfill finds it again at start.
The schema version is SQLite's ``user_version``; a file written by a newer luigi is refused.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import (
    Column,
    Connection,
    Double,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.exc import SQLAlchemyError

from luigi.database import Migration, StorageError
from luigi.schedules.backfill import BackfillRequest
from luigi.schedules.sqlite_file import SqliteFile

__all__ = ["BackfillRecord", "BackfillState", "BackfillStore"]

_T = TypeVar("_T")


class BackfillState(str, enum.Enum):
    """Where a backfill stands."""

    RUNNING = "running"  # its child runs, or is started again when luigid starts
    ENDED = "ended"  # the child exited by itself; see its exit code
    CANCELLED = "cancelled"
    NOT_STARTED = "not-started"  # the child could not be started (see the note)


metadata = MetaData()
backfills = Table(
    "backfills",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("request", Text, nullable=False),  # BackfillRequest.as_json()
    Column("state", String, nullable=False),
    Column("created", Double, nullable=False),
    Column("attempt", Integer, nullable=False),  # children started so far (a restart starts one more)
    Column("pid", Integer, nullable=True),
    Column("ended", Double, nullable=True),
    Column("exit_code", Integer, nullable=True),
    Column("meaning", Text, nullable=True),
    Column("done", Integer, nullable=False),
    Column("note", Text, nullable=True),
)
MIGRATIONS: tuple[Migration, ...] = (Migration(1, "backfills", metadata.create_all),)


@dataclass(frozen=True)
class BackfillRecord:
    """One backfill row."""

    id: int
    request: BackfillRequest
    state: str
    created: float
    attempt: int
    pid: int | None
    ended: float | None
    exit_code: int | None
    meaning: str | None
    done: int
    note: str | None

    def as_json(self) -> dict[str, Any]:
        """The backfill as ``backfill_list`` shows it."""
        return {
            "id": self.id,
            **self.request.as_json(),
            "state": self.state,
            "created": self.created,
            "attempt": self.attempt,
            "pid": self.pid,
            "ended": self.ended,
            "exit_code": self.exit_code,
            "meaning": self.meaning,
            "done": self.done,
            "total": self.request.total,
            "note": self.note,
        }


class BackfillStore(SqliteFile):
    """The backfills' SQLite file (``path``); every error is a StorageError naming it."""

    what = "backfills' state"
    migrations = MIGRATIONS

    def _version(self) -> int:
        return int(self._connection().execute(text("PRAGMA user_version")).scalar_one())

    def _record_version(self, conn: Connection, migration: Migration) -> None:
        conn.execute(text(f"PRAGMA user_version = {int(migration.version)}"))

    def add(self, request: BackfillRequest, now: float) -> int:
        """Record a new backfill as running (attempt 0: no child yet); its id."""
        values: dict[str, Any] = {"request": json.dumps(request.as_json()), "created": now}
        values |= {"state": BackfillState.RUNNING.value, "attempt": 0, "done": 0}
        inserted = self._do(lambda c: c.execute(insert(backfills).values(**values)).inserted_primary_key)
        assert inserted is not None
        return int(inserted[0])

    def update(self, backfill_id: int, **values: Any) -> None:
        """Set columns of one backfill."""
        self._do(lambda c: c.execute(update(backfills).where(backfills.c.id == backfill_id).values(**values)))

    def all(self) -> list[BackfillRecord]:
        """Every backfill, newest first."""
        query = select(backfills).order_by(backfills.c.id.desc())
        return self._do(lambda c: [_record(row._mapping) for row in c.execute(query)])

    def get(self, backfill_id: int) -> BackfillRecord | None:
        query = select(backfills).where(backfills.c.id == backfill_id)
        return self._do(lambda c: next((_record(row._mapping) for row in c.execute(query)), None))

    def _do(self, work: Callable[[Connection], _T]) -> _T:
        conn = self._connection()
        try:
            with conn.begin():
                return work(conn)
        except SQLAlchemyError as exc:
            raise StorageError(f"Cannot use the backfills' state {self.path}: {exc}") from exc



def _record(row: Any) -> BackfillRecord:
    fields = dict(row)
    fields["request"] = BackfillRequest(**json.loads(fields["request"]))
    return BackfillRecord(**fields)
