"""``SqlStore``: the scheduler's state in SQLite (a file beside ``state_path``) or any SQLAlchemy database.

Writes are one transaction per ``Scheduler.flush()`` (see ``rows``): through SQLAlchemy for a server
database, and straight on SQLite's driver connection for the file (a flush is a few rows, and there the
driver's own work is a small part of what SQLAlchemy's per-statement handling costs). SQLite runs
in WAL mode with ``synchronous=NORMAL``: a commit survives the process being killed and costs no fsync.
A SQLite file that cannot be read as our state is moved aside and the scheduler starts empty; a lost
connection to a database server is opened again at the next flush.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError

from luigi.scheduler.changes import ChangeSet
from luigi.scheduler.config import SchedulerConfig
from luigi.scheduler.state import SchedulerState
from luigi.scheduler.store import schema
from luigi.scheduler.store.base import CorruptStateError, StateStore, StateStoreError
from luigi.scheduler.store.rows import RowStore, Runner, Snapshot

logger = logging.getLogger("luigi.scheduler")

_BUSY_TIMEOUT_MS = 5000
_SQLITE_BUSY_CODES = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED (named in the sqlite3 module from 3.11 only)
# What reading a damaged database raises: driver errors, rows of the wrong shape, bad column values.
_READ_ERRORS = (DBAPIError, CorruptStateError, ValueError, TypeError)


def state_file_for(state_path: str | os.PathLike[str]) -> Path:
    """The SQLite file for ``[scheduler] state_path``: the same name with the extension ``.sqlite``."""
    path = Path(state_path).expanduser().absolute()
    if path.is_dir():
        raise StateStoreError(
            f"[scheduler] state_path {str(state_path)!r} is a directory; give a file name such as "
            f"{str(path / 'state.pickle')!r} (the state is kept in {str(path / 'state.sqlite')!r})"
        )
    return path.with_suffix(".sqlite")


class SqlStore(StateStore):
    """Scheduler state in a SQLAlchemy database: SQLite by default, PostgreSQL through ``state_url``.

    The database is opened on first use (``load`` or the first write). Until the state was loaded from
    it, the first write replaces whatever the database held, as Luigi's ``dump()`` replaced its file.
    """

    def __init__(self, url: str | URL) -> None:
        self._url = make_url(url)
        database = self._url.database
        is_file = self._url.get_backend_name() == "sqlite" and database not in (None, "", ":memory:")
        self._path = Path(database).absolute() if is_file and database else None
        self._engine: Engine | None = None
        self._conn: Connection | None = None
        self._mirrors_state = False
        self._rows: RowStore | None = None
        self._closed = False
        self._lock = threading.Lock()  # the scheduler is single-threaded, but shutdown hooks may not be

    @classmethod
    def for_file(cls, path: str | os.PathLike[str]) -> SqlStore:
        """A store in the SQLite file ``path`` (created when missing)."""
        return cls(URL.create("sqlite", database=str(Path(path).expanduser().absolute())))

    @classmethod
    def from_config(cls, state_path: str | None = None, config: SchedulerConfig | None = None) -> SqlStore:
        """The store ``luigid`` uses: SQLite beside ``state_path`` (the argument, else ``[scheduler]
        state_url`` when set, else ``[scheduler] state_path``)."""
        config = config or SchedulerConfig.from_config()
        if state_path is None and config.state_url:
            return cls(config.state_url)
        legacy = Path(state_path or config.state_path).expanduser()
        path = state_file_for(legacy)
        if legacy.suffix != ".sqlite" and legacy.is_file() and not path.exists():
            logger.warning(
                "Scheduler state %s is not read (pickled state is never loaded); the state is kept in %s",
                legacy,
                path,
            )
        return cls.for_file(path)

    @property
    def path(self) -> Path | None:
        """The SQLite file, or None for a server database."""
        return self._path

    @property
    def where(self) -> str:
        """The file or URL (password hidden), for messages."""
        return str(self._path) if self._path is not None else self._url.render_as_string(hide_password=True)

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (the database is opened, and upgraded, on first access)."""
        with self._lock:
            self._open()
            assert self._engine is not None
            return self._engine

    # -- the StateStore interface -------------------------------------------------------------------------

    def load(self, state: SchedulerState) -> None:
        """Replace the state's records with the stored ones (an empty state if the file was unreadable)."""
        with self._lock:
            conn = self._open()
            try:
                with conn.begin():
                    snapshot = self._row_store().read_all(conn)
            except _READ_ERRORS as exc:
                self._recover(exc)
                snapshot = Snapshot()
            snapshot.apply_to(state)
            self._mirrors_state = True

    def record_changes(self, state: SchedulerState, changes: ChangeSet) -> None:
        """Write every changed record's current fields (or delete its row) in one transaction."""
        with self._lock:
            try:
                conn = self._open()
                rows = self._row_store()
                if not self._mirrors_state:
                    with conn.begin():
                        rows.write_everything(conn, state, changes)
                elif self._path is not None:
                    _in_sqlite_transaction(conn, lambda run: rows.write_changes(run, state, changes))
                else:
                    with conn.begin():
                        rows.write_changes(conn.exec_driver_sql, state, changes)
            except DBAPIError as exc:
                if exc.connection_invalidated:  # the server went away: connect again next time
                    self._drop_connection()
                raise StateStoreError(
                    f"Cannot write the scheduler state to {self.where}: {_reason(exc)}"
                ) from exc
            except sqlite3.Error as exc:
                raise StateStoreError(f"Cannot write the scheduler state to {self.where}: {exc}") from exc
            self._mirrors_state = True

    def close(self) -> None:
        """Close the connection; later use raises StateStoreError."""
        with self._lock:
            self._dispose()
            self._closed = True

    # -- opening, and recovering from a damaged file ------------------------------------------------------

    def _open(self) -> Connection:
        if self._conn is not None:
            return self._conn
        if self._closed:
            raise StateStoreError(f"The scheduler state store {self.where} is closed")
        if self._engine is not None:  # opened before, then the connection was lost
            self._conn = self._engine.connect()
            return self._conn
        self._prepare_location()
        try:
            return self._connect()
        except (DBAPIError, CorruptStateError) as exc:
            self._recover(exc)
            assert self._conn is not None
            return self._conn

    def _row_store(self) -> RowStore:
        assert self._rows is not None, "the store is opened first"
        return self._rows

    def _connect(self) -> Connection:
        engine = self._make_engine()
        self._engine = engine
        self._rows = RowStore(engine.dialect)
        conn = self._conn = engine.connect()
        try:
            with conn.begin():
                schema.upgrade(conn, self.where)
        except BaseException:
            self._dispose()
            raise
        return conn

    def _make_engine(self) -> Engine:
        if self._path is None:
            return create_engine(self._url)
        engine = create_engine(self._url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _configure_sqlite)
        event.listen(engine, "begin", _begin_sqlite)
        return engine

    def _prepare_location(self) -> None:
        if self._path is None:
            return
        if self._path.is_dir():
            raise StateStoreError(f"The scheduler state file {self._path} is a directory; move it away")
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateStoreError(
                f"Cannot create the directory for the scheduler state file {self._path}: {exc}. "
                "Set [scheduler] state_path (luigid --state-path) to a writable place."
            ) from None

    def _recover(self, exc: BaseException) -> None:
        """Move an unreadable SQLite file aside and open a fresh one; other failures are fatal."""
        self._dispose()
        if self._path is None or _is_busy(exc) or not self._path.exists():
            raise StateStoreError(f"Cannot open the scheduler state in {self.where}: {_reason(exc)}") from exc
        moved = _move_aside(self._path)
        logger.warning(
            "The scheduler state file %s could not be read (%s); it was moved to %s and the scheduler "
            "starts with an empty state",
            self._path,
            _reason(exc),
            moved,
        )
        try:
            self._connect()
        except (DBAPIError, CorruptStateError) as again:
            raise StateStoreError(
                f"Cannot create the scheduler state file {self._path}: {_reason(again)}"
            ) from again

    def _drop_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(DBAPIError):  # closing a broken connection may fail; it is gone
                self._conn.close()
        self._conn = None

    def _dispose(self) -> None:
        self._drop_connection()
        if self._engine is not None:
            self._engine.dispose()
        self._engine = None


def _configure_sqlite(dbapi_connection: Any, _record: Any) -> None:
    # Transactions are begun explicitly (see _begin_sqlite) so that DDL and reads are transactional too.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def _begin_sqlite(conn: Connection) -> None:
    conn.exec_driver_sql("BEGIN")


def _in_sqlite_transaction(conn: Connection, write: Callable[[Runner], None]) -> None:
    """Run ``write`` in one transaction on the SQLite driver connection itself.

    A flush is a handful of rows, for which SQLAlchemy's begin, execute and commit cost several times
    the database's own work; the driver connection is the one SQLAlchemy holds, outside any transaction
    of its own between calls. Errors are the driver's (``sqlite3.Error``); the transaction is rolled back.
    """
    raw: Any = conn.connection.driver_connection
    cursor = raw.cursor()
    try:
        cursor.execute("BEGIN")
        try:
            write(cursor.executemany)
            cursor.execute("COMMIT")
        except BaseException:
            if raw.in_transaction:
                cursor.execute("ROLLBACK")
            raise
    finally:
        cursor.close()


def _reason(exc: BaseException) -> str:
    """The driver's message when there is one (SQLAlchemy's wrapper adds a link to its docs)."""
    return str(getattr(exc, "orig", None) or exc)


def _is_busy(exc: BaseException) -> bool:
    """Whether another process holds the database: it is in use, not damaged."""
    orig = getattr(exc, "orig", None)
    if not isinstance(orig, sqlite3.OperationalError):
        return False
    code = getattr(orig, "sqlite_errorcode", None)
    return code in _SQLITE_BUSY_CODES or "locked" in str(orig)


def _move_aside(path: Path) -> Path:
    """Rename ``path`` (and its WAL side files) to ``<path>.corrupt-<timestamp>``, never overwriting."""
    base = f"{path}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}"
    target, n = Path(base), 1
    while target.exists():
        target, n = Path(f"{base}-{n}"), n + 1
    try:
        os.rename(path, target)
        for suffix in ("-wal", "-shm"):
            side = Path(f"{path}{suffix}")
            if side.exists():
                os.rename(side, f"{target}{suffix}")
    except OSError as exc:
        raise StateStoreError(
            f"The scheduler state file {path} cannot be read and cannot be moved aside ({exc}); "
            "move or delete it, or set [scheduler] state_path elsewhere"
        ) from None
    return target
