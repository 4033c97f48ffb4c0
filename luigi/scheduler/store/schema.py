"""The tables of the scheduler's state database, its version number and the numbered migrations.

The ``meta`` table holds ``schema_version``. Opening a database runs every migration above its version
(a new database starts at 0); a database written by a newer version is refused, never altered.
"""

from __future__ import annotations

from typing import Any

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
    inspect,
    select,
    text,
)
from sqlalchemy.types import TypeEngine

from luigi.database import Migration, run_migrations
from luigi.scheduler.store.base import CorruptStateError, StateVersionError
from luigi.scheduler.store.codec import TASK_FIELDS, WORKER_FIELDS

VERSION_KEY = "schema_version"
PAUSED_KEY = "paused"


def _column(name: str, kind: str) -> Column[Any]:
    base = kind.rstrip("?")
    column_type: type[TypeEngine[Any]] = {
        "key": String,
        "text": String,
        "name": String,
        "status": String,
        "time": Double,
    }.get(base, Text)
    if base == "bool":
        column_type = Boolean
    return Column(name, column_type, primary_key=base == "key", nullable=kind.endswith("?"))


# Task fields added after version 1: the version that added each (its column is added by that migration).
LATER_TASK_FIELDS = {"lost_lease": 2, "cancel_requested": 3, "granted_ahead": 4}


def _tasks_table(owner: MetaData, version: int) -> Table:
    """The ``tasks`` table as schema ``version`` has it."""
    fields = [(name, kind) for name, kind in TASK_FIELDS if LATER_TASK_FIELDS.get(name, 1) <= version]
    return Table(
        "tasks",
        owner,
        *(_column(name, kind) for name, kind in fields),
        Column("seq", Integer, nullable=False),
    )


metadata = MetaData()
meta = Table(
    "meta",
    metadata,
    Column("key", String, primary_key=True),
    Column("value", Text, nullable=False),
)
# ``seq`` keeps each record's place in the scheduler's dicts (their insertion order) across restarts.
tasks = _tasks_table(metadata, max(LATER_TASK_FIELDS.values()))
workers = Table(
    "workers",
    metadata,
    *(_column(name, kind) for name, kind in WORKER_FIELDS),
    Column("seq", Integer, nullable=False),
)
resources = Table(
    "resources",
    metadata,
    Column("name", String, primary_key=True),
    Column("seq", Integer, nullable=False),
    Column("amount", Text, nullable=False),  # JSON: an int, or a float an older client sent
)
# The active luigid's lease (``store/lease``): one row, named ``active``, renewed by its holder; the
# database's clock decides when it has run out (``expires``, seconds since the epoch on that clock).
lease = Table(
    "luigid_lease",
    metadata,
    Column("name", String, primary_key=True),
    Column("holder", String, nullable=False),
    Column("address", Text, nullable=True),
    Column("expires", Double, nullable=False),
)
batchers = Table(
    "batchers",
    metadata,
    Column("worker", String, primary_key=True),
    Column("family", String, primary_key=True),
    Column("batched_args", Text, nullable=False),  # JSON list of parameter names
    Column("max_batch_size", Text, nullable=False),  # JSON number; infinity tagged by the codec
)


def _create_version_1(conn: Connection) -> None:
    # Version 1's layout: today's, but its ``tasks`` table lacks the columns later versions added.
    metadata.create_all(conn, tables=[meta, workers, resources, batchers])
    _tasks_table(MetaData(), 1).create(conn)
    conn.execute(meta.insert(), [{"key": PAUSED_KEY, "value": "false"}])


def _add_lost_lease(conn: Connection) -> None:
    # Text: a JSON object or null (``codec`` kind "dict?"); nullable, so the existing rows read as None.
    conn.execute(text("ALTER TABLE tasks ADD COLUMN lost_lease TEXT"))


def _add_cancel_requested(conn: Connection) -> None:
    # A time (``codec`` kind "time?"), in the type ``_column`` gives times; nullable: existing rows read None.
    conn.execute(text("ALTER TABLE tasks ADD COLUMN cancel_requested DOUBLE PRECISION"))


def _add_granted_ahead_and_lease(conn: Connection) -> None:
    # Nullable: the existing rows read as None (not granted ahead); the lease table starts empty.
    conn.execute(text("ALTER TABLE tasks ADD COLUMN granted_ahead BOOLEAN"))
    lease.create(conn)


# Migration N takes a database at version N-1 to version N, inside the opening transaction.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "tasks, workers, resources, batchers, meta", _create_version_1),
    Migration(2, "tasks.lost_lease: who lost a run whose lease it may renew", _add_lost_lease),
    Migration(3, "tasks.cancel_requested: a cancelled run, not retried till forgiven", _add_cancel_requested),
    Migration(4, "tasks.granted_ahead, and luigid_lease: the active luigid", _add_granted_ahead_and_lease),
)
SCHEMA_VERSION = MIGRATIONS[-1].version


def stored_version(conn: Connection) -> int:
    """The schema version of the database (0 when it has no tables at all)."""
    table_names = set(inspect(conn).get_table_names())
    if not table_names:
        return 0
    if "meta" not in table_names:
        raise CorruptStateError(f"it has tables {sorted(table_names)} but no 'meta' table (schema version)")
    raw = conn.execute(select(meta.c.value).where(meta.c.key == VERSION_KEY)).scalar()
    try:
        return int(str(raw))
    except ValueError:
        raise CorruptStateError(f"its schema version {raw!r} is not a number") from None


def upgrade(conn: Connection, where: str) -> int:
    """Bring the database to SCHEMA_VERSION (in the caller's transaction); returns the version found.

    Raises StateVersionError when the database is newer than this code.
    """

    def too_new(found: int, latest: int) -> StateVersionError:
        return StateVersionError(
            f"The scheduler state in {where} has schema version {found}, but this luigi reads versions up "
            f"to {latest}. Upgrade luigi, or point [scheduler] state_path/state_url elsewhere."
        )

    return run_migrations(conn, MIGRATIONS, stored_version(conn), too_new, _record_version)


def _record_version(conn: Connection, migration: Migration) -> None:
    conn.execute(meta.delete().where(meta.c.key == VERSION_KEY))
    conn.execute(meta.insert(), [{"key": VERSION_KEY, "value": str(migration.version)}])
