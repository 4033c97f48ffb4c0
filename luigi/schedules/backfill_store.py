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
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import (
    Column,
    Connection,
    Double,
    Engine,
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

from luigi.database import Migration, StorageError, run_migrations, sqlite_engine
from luigi.schedules.backfill import BackfillRequest

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


class BackfillStore:
    """The backfills' SQLite file (``path``); every error is a StorageError naming it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._engine: Engine | None = None
        self._conn: Connection | None = None

    @property
    def is_open(self) -> bool:
        return self._conn is not None

    def open(self) -> None:
        """Create or upgrade the file."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._engine = sqlite_engine(f"sqlite:///{self.path}")
            self._conn = self._engine.connect()
            with self._conn.begin():
                found = int(self._conn.execute(text("PRAGMA user_version")).scalar_one())
                run_migrations(self._conn, MIGRATIONS, found, self._too_new, _record_version)
        except (OSError, SQLAlchemyError) as exc:
            self.close()
            raise StorageError(f"Cannot open the backfills' state {self.path}: {exc}") from exc

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._engine is not None:
            self._engine.dispose()
        self._conn = self._engine = None

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
        if self._conn is None:
            raise StorageError(f"The backfills' state {self.path} is not open")
        try:
            with self._conn.begin():
                return work(self._conn)
        except SQLAlchemyError as exc:
            raise StorageError(f"Cannot use the backfills' state {self.path}: {exc}") from exc

    def _too_new(self, found: int, latest: int) -> StorageError:
        return StorageError(
            f"The backfills' state {self.path} has schema version {found}, but this luigi reads versions "
            f"up to {latest}. Upgrade luigi, or move the file aside."
        )


def _record_version(conn: Connection, migration: Migration) -> None:
    conn.execute(text(f"PRAGMA user_version = {int(migration.version)}"))


def _record(row: Any) -> BackfillRecord:
    fields = dict(row)
    fields["request"] = BackfillRequest(**json.loads(fields["request"]))
    return BackfillRecord(**fields)
