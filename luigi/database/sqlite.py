"""SQLite engines for luigi's own databases: WAL, a busy timeout, and transactions begun explicitly."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL
from sqlalchemy.pool import Pool

SQLITE_BUSY_TIMEOUT_MS = 5000  # how long a writer waits for another process's transaction


def sqlite_engine(
    url: str | URL,
    foreign_keys: bool = False,
    busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS,
    poolclass: type[Pool] | None = None,
) -> Engine:
    """An engine usable from any thread whose connections run in WAL mode with ``synchronous=NORMAL``.

    Transactions are begun with an explicit ``BEGIN``, so that DDL (migrations) and reads are
    transactional too, which Python's sqlite3 module does not do by itself.
    """
    options: dict[str, Any] = {"connect_args": {"check_same_thread": False}}
    if poolclass is not None:
        options["poolclass"] = poolclass
    engine = create_engine(url, **options)
    pragmas = (
        ("busy_timeout", busy_timeout_ms),
        *_PRAGMAS,
        *((("foreign_keys", "ON"),) if foreign_keys else ()),
    )
    event.listen(engine, "connect", lambda connection, _record: _configure(connection, pragmas))
    event.listen(engine, "begin", _begin)
    return engine


_PRAGMAS: tuple[tuple[str, Any], ...] = (
    ("journal_mode", "WAL"),
    ("synchronous", "NORMAL"),
)


def _configure(dbapi_connection: Any, pragmas: tuple[tuple[str, Any], ...]) -> None:
    dbapi_connection.isolation_level = None  # no implicit transactions: ``_begin`` starts them
    cursor = dbapi_connection.cursor()
    try:
        for name, value in pragmas:
            cursor.execute(f"PRAGMA {name}={value}")
    finally:
        cursor.close()


def _begin(conn: Connection) -> None:
    conn.exec_driver_sql("BEGIN")
