"""Where ``luigid`` keeps its schedules' state: a SQLite file beside its scheduler state.

Each schedule has a row (paused flag, watermark: the newest slot decided) and its runs have rows
(slot, times, outcome, exit code). A slot is claimed, its run's row written and the watermark moved
in one committed transaction before its process starts, and ``(schedule, slot)`` is unique: after a
restart, clean or ``kill -9``, no slot runs twice. The schema has a version and numbered migrations
(``luigi.database``); a file written by a newer luigi is refused, never altered.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    Double,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    delete,
    func,
    insert,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from luigi.database import Migration, StorageError
from luigi.schedules.sqlite_file import SqliteFile, first_line

__all__ = ["RunKind", "RunOutcome", "RunRecord", "ScheduleStore", "StoredSchedule"]

logger = logging.getLogger("luigi.schedules")

VERSION_KEY = "schema_version"
_T = TypeVar("_T")


class RunKind(str, enum.Enum):
    """Why a run row exists: a due slot, a slot run late to catch up, or the run-now button."""

    SLOT = "slot"
    CATCH_UP = "catch-up"
    MANUAL = "manual"


class RunOutcome(str, enum.Enum):
    """Where a run row stands."""

    STARTING = "starting"  # claimed; the process is being started
    RUNNING = "running"
    ENDED = "ended"  # the process exited; see the exit code
    SKIPPED = "skipped"  # its slot came while another run of the schedule was still going
    MISSED = "missed"  # slots that passed while luigid was down (catchup = false)
    STOPPED = "stopped"  # luigid stopped it on its way down
    LOST = "lost"  # luigid was killed while it ran: its end was never seen
    NOT_STARTED = "not-started"  # the process could not be started (see the note)


def _schedules_table(metadata: MetaData, version: int) -> Table:
    """The ``schedules`` table as schema ``version`` has it."""
    later = [Column("late_total", Integer, nullable=False, server_default="0")] if version >= 2 else []
    return Table(
        "schedules",
        metadata,
        Column("name", String, primary_key=True),
        Column("paused", Boolean, nullable=False),
        Column("watermark", Double, nullable=False),
        *later,  # version 2: how many of its runs were late (luigid_schedule_late_total)
    )


def _runs_table(metadata: MetaData, version: int) -> Table:
    """The ``runs`` table as schema ``version`` has it."""
    later = []
    if version >= 2:  # the deadline (seconds after the start) the run had, its verdict, when it was alerted
        later = [Column("deadline", Double), Column("late", Boolean), Column("alerted", Double)]
    return Table(
        "runs",
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("schedule", String, nullable=False),
        Column("kind", String, nullable=False),
        Column("slot", Double, nullable=True),  # NULL for run-now runs, which have no slot
        Column("scheduled_time", Double, nullable=False),  # what the command's placeholders were given
        Column("outcome", String, nullable=False),
        Column("claimed", Double, nullable=False),
        Column("started", Double, nullable=True),
        Column("ended", Double, nullable=True),
        Column("pid", Integer, nullable=True),
        Column("exit_code", Integer, nullable=True),
        Column("meaning", Text, nullable=True),
        Column("log_bytes", Integer, nullable=True),
        Column("note", Text, nullable=True),
        *later,
        UniqueConstraint("schedule", "slot", name="one_run_per_slot"),
    )


SCHEMA_VERSION = 2
metadata = MetaData()
meta = Table("meta", metadata, Column("key", String, primary_key=True), Column("value", Text, nullable=False))
schedules = _schedules_table(metadata, SCHEMA_VERSION)
runs = _runs_table(metadata, SCHEMA_VERSION)


def _create_version_1(conn: Connection) -> None:
    version_1 = MetaData()
    meta.to_metadata(version_1)
    _schedules_table(version_1, 1)
    _runs_table(version_1, 1)
    version_1.create_all(conn)


def _add_deadlines(conn: Connection) -> None:
    # Nullable columns (and a count defaulting to 0): the rows already there read as "no deadline".
    conn.execute(text("ALTER TABLE schedules ADD COLUMN late_total INTEGER NOT NULL DEFAULT 0"))
    for column in ("deadline DOUBLE", "late BOOLEAN", "alerted DOUBLE"):
        conn.execute(text(f"ALTER TABLE runs ADD COLUMN {column}"))


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "meta, schedules, runs", _create_version_1),
    Migration(2, "deadlines: runs.deadline, runs.late, runs.alerted, schedules.late_total", _add_deadlines),
)


@dataclass(frozen=True)
class StoredSchedule:
    """A schedule's durable state."""

    paused: bool
    watermark: float


@dataclass(frozen=True)
class RunRecord:
    """One run row, as stored."""

    id: int
    schedule: str
    kind: str
    slot: float | None
    scheduled_time: float
    outcome: str
    claimed: float
    started: float | None
    ended: float | None
    pid: int | None
    exit_code: int | None
    meaning: str | None
    log_bytes: int | None
    note: str | None
    deadline: float | None = None  # seconds after its start (its schedule's ``deadline`` when it was claimed)
    late: bool | None = None  # None: not decided yet (or no deadline)
    alerted: float | None = None  # when its late alert went out

    @property
    def start(self) -> float:
        """When the run began: its process's start, or its claim for a run whose process never started."""
        return self.started if self.started is not None else self.claimed

    @property
    def due(self) -> float | None:
        """The moment by which it should have ended well, or None when it has no deadline."""
        return None if self.deadline is None else self.start + self.deadline

    def as_json(self) -> dict[str, Any]:
        """The run as the ``schedule_list`` answer shows it."""
        return {
            "id": self.id,
            "kind": self.kind,
            "slot": self.slot,
            "scheduled_time": self.scheduled_time,
            "outcome": self.outcome,
            "started": self.started,
            "ended": self.ended,
            "exit_code": self.exit_code,
            "meaning": self.meaning,
            "log_bytes": self.log_bytes,
            "note": self.note,
            "deadline": self.due,
            "late": self.late,
        }


class ScheduleStore(SqliteFile):
    """The schedules' SQLite file (``path``), opened by ``open()``; every error is a StorageError."""

    what = "schedules' state"
    migrations = MIGRATIONS

    # -- schedules ---------------------------------------------------------------------------------------

    def schedule(self, name: str) -> StoredSchedule | None:
        """The stored state of schedule ``name``, or None when it has never been seen."""
        row = self._read(lambda c: c.execute(select(schedules).where(schedules.c.name == name)).first())
        return None if row is None else StoredSchedule(bool(row.paused), float(row.watermark))

    def save_schedule(self, name: str, state: StoredSchedule) -> None:
        """Write the whole state of schedule ``name``."""

        def write(conn: Connection) -> None:
            conn.execute(delete(schedules).where(schedules.c.name == name))
            conn.execute(insert(schedules).values(name=name, paused=state.paused, watermark=state.watermark))

        self._write(write)

    def set_paused(self, name: str, paused: bool) -> None:
        self._write(
            lambda c: c.execute(update(schedules).where(schedules.c.name == name).values(paused=paused))
        )

    def move_watermark(self, name: str, watermark: float) -> None:
        self._write(lambda c: c.execute(_watermark_update(name, watermark)))

    # -- runs ------------------------------------------------------------------------------------------

    def claim(
        self,
        name: str,
        kind: RunKind,
        slot: float | None,
        scheduled_time: float,
        now: float,
        deadline: float | None = None,
    ) -> int | None:
        """Record a run as starting (and move the watermark to its slot) in one transaction; ``deadline``
        is the seconds after its start by which it should end well (None: it has none).

        Returns the run's id, or None when the slot already has a row (it ran, or was skipped, before).
        """

        def write(conn: Connection) -> int:
            values = _run_values(name, kind, slot, scheduled_time, RunOutcome.STARTING, now)
            inserted = conn.execute(insert(runs).values(**values, deadline=deadline)).inserted_primary_key
            assert inserted is not None
            run_id = inserted[0]
            if slot is not None:
                conn.execute(_watermark_update(name, slot))
            return int(run_id)

        try:
            return self._write(write)
        except _Duplicate:
            return None

    def record_unrun(self, name: str, outcome: RunOutcome, slots: list[float], now: float, note: str) -> None:
        """Record ``slots`` as not run (skipped, missed) and move the watermark past them, at once."""

        def write(conn: Connection) -> None:
            for slot in slots:
                exists = conn.execute(select(runs.c.id).where(runs.c.schedule == name, runs.c.slot == slot))
                if exists.first() is None:
                    values = _run_values(name, RunKind.SLOT, slot, slot, outcome, now)
                    conn.execute(insert(runs).values(**values, note=note))
            conn.execute(_watermark_update(name, max(slots)))

        self._write(write)

    def mark_started(self, run_id: int, pid: int, started: float) -> None:
        values = {"outcome": RunOutcome.RUNNING.value, "pid": pid, "started": started}
        self._write(lambda c: c.execute(update(runs).where(runs.c.id == run_id).values(**values)))

    def finish(self, run_id: int, outcome: RunOutcome, ended: float, **values: Any) -> None:
        """Record a run's end: ``exit_code``, ``meaning``, ``log_bytes``, ``note`` as known."""
        fields = {"outcome": outcome.value, "ended": ended, **values}
        self._write(lambda c: c.execute(update(runs).where(runs.c.id == run_id).values(**fields)))

    def lose_unfinished(self, now: float) -> list[int]:
        """Mark the runs a killed luigid left starting or running as lost; returns their ids."""
        open_outcomes = (RunOutcome.STARTING.value, RunOutcome.RUNNING.value)
        note = "luigid stopped without seeing this run end (killed?); its process was not waited for"

        def write(conn: Connection) -> list[int]:
            found = conn.execute(select(runs.c.id).where(runs.c.outcome.in_(open_outcomes)))
            ids = [int(row.id) for row in found]
            if ids:
                values = {"outcome": RunOutcome.LOST.value, "ended": now, "note": note}
                conn.execute(update(runs).where(runs.c.id.in_(ids)).values(**values))
            return ids

        return self._write(write)

    # -- deadlines ---------------------------------------------------------------------------------------

    def record_verdict(self, run_id: int, late: bool) -> bool:
        """Record whether run ``run_id`` was late (and count it in its schedule's ``late_total``) unless a
        verdict is there already; returns whether this call recorded it. One transaction."""

        def write(conn: Connection) -> bool:
            undecided = (runs.c.id == run_id) & runs.c.late.is_(None)
            found = conn.execute(select(runs.c.schedule).where(undecided)).first()
            if found is None:
                return False
            conn.execute(update(runs).where(runs.c.id == run_id).values(late=late))
            if late:
                counted = update(schedules).where(schedules.c.name == found.schedule)
                conn.execute(counted.values(late_total=schedules.c.late_total + 1))
            return True

        return self._write(write)

    def mark_alerted(self, run_id: int, when: float) -> None:
        """Record that run ``run_id``'s late alert went out (or was tried), so it is never sent again."""
        self._write(lambda c: c.execute(update(runs).where(runs.c.id == run_id).values(alerted=when)))

    def undecided(self) -> list[RunRecord]:
        """Runs with a deadline and no verdict yet, oldest first."""
        query = select(runs).where(runs.c.deadline.is_not(None), runs.c.late.is_(None)).order_by(runs.c.id)
        return self._read(lambda c: [RunRecord(**row._mapping) for row in c.execute(query)])

    def unalerted(self) -> list[RunRecord]:
        """Late runs whose alert has not gone out yet, oldest first."""
        query = select(runs).where(runs.c.late.is_(True), runs.c.alerted.is_(None)).order_by(runs.c.id)
        return self._read(lambda c: [RunRecord(**row._mapping) for row in c.execute(query)])

    def late_totals(self) -> dict[str, int]:
        """How many runs of each schedule were late, ever (kept when the runs are pruned)."""
        query = select(schedules.c.name, schedules.c.late_total)
        return self._read(lambda c: {row.name: int(row.late_total) for row in c.execute(query)})

    def last_runs(self, name: str, limit: int) -> list[RunRecord]:
        """The newest ``limit`` runs of schedule ``name``, newest first."""
        query = select(runs).where(runs.c.schedule == name).order_by(runs.c.id.desc()).limit(limit)
        return self._read(lambda c: [RunRecord(**row._mapping) for row in c.execute(query)])

    def run(self, name: str, run_id: int) -> RunRecord | None:
        """Run ``run_id`` of schedule ``name``, or None."""
        query = select(runs).where(runs.c.schedule == name, runs.c.id == run_id)
        return self._read(lambda c: next((RunRecord(**row._mapping) for row in c.execute(query)), None))

    def prune(self, name: str, keep: int) -> list[int]:
        """Delete all but the newest ``keep`` runs of schedule ``name``; returns the deleted ids."""

        def write(conn: Connection) -> list[int]:
            newest = select(runs.c.id).where(runs.c.schedule == name).order_by(runs.c.id.desc()).limit(keep)
            kept = {int(row.id) for row in conn.execute(newest)}
            every = conn.execute(select(runs.c.id).where(runs.c.schedule == name))
            gone = [int(row.id) for row in every if int(row.id) not in kept]
            if gone:
                conn.execute(delete(runs).where(runs.c.id.in_(gone)))
            return gone

        return self._write(write)

    def run_count(self, name: str) -> int:
        """How many runs of schedule ``name`` are stored."""
        query = select(func.count()).select_from(runs).where(runs.c.schedule == name)
        return int(self._read(lambda c: c.execute(query).scalar_one()))

    # -- plumbing --------------------------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[Connection]:
        conn = self._connection()
        try:
            with conn.begin():
                yield conn
        except IntegrityError as exc:
            raise _Duplicate(str(exc)) from exc
        except SQLAlchemyError as exc:
            raise StorageError(f"Cannot write the schedules' state {self.path}: {first_line(exc)}") from exc

    def _write(self, work: Callable[[Connection], _T]) -> _T:
        with self._transaction() as conn:
            return work(conn)

    def _read(self, work: Callable[[Connection], _T]) -> _T:
        with self._transaction() as conn:
            return work(conn)

    def _version(self) -> int:
        conn = self._connection()
        if "meta" not in inspect(conn).get_table_names():
            return 0
        raw = conn.execute(select(meta.c.value).where(meta.c.key == VERSION_KEY)).scalar()
        try:
            return int(str(raw))
        except ValueError:
            raise StorageError(f"The schedules' state {self.path} has a schema version {raw!r}") from None

    def _record_version(self, conn: Connection, migration: Migration) -> None:
        conn.execute(delete(meta).where(meta.c.key == VERSION_KEY))
        conn.execute(insert(meta).values(key=VERSION_KEY, value=str(migration.version)))


class _Duplicate(StorageError):
    """A row for this slot exists already."""


def _watermark_update(name: str, watermark: float) -> Any:
    # Never backwards: a late write must not make an older slot due again.
    return (
        update(schedules)
        .where(schedules.c.name == name, schedules.c.watermark < watermark)
        .values(watermark=watermark)
    )


def _run_values(
    name: str, kind: RunKind, slot: float | None, scheduled_time: float, outcome: RunOutcome, now: float
) -> dict[str, Any]:
    return {
        "schedule": name,
        "kind": kind.value,
        "slot": slot,
        "scheduled_time": scheduled_time,
        "outcome": outcome.value,
        "claimed": now,
    }
