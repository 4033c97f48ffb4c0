"""``SqlStore``: the scheduler's state in SQLite (a file beside ``state_path``) or any SQLAlchemy database.

A server database gets one transaction per ``Scheduler.flush()`` (see ``rows``). A SQLite file gets one
line per flush appended to its journal, ``<file>.sqlite.journal`` (``<file>.sqlite-journal`` is
SQLite's own), before the server answers; ``fold()`` (in short slices between requests, at the caps of
pending changes, and whole at close) writes journaled rows in one transaction straight on SQLite's
driver connection, emptying the journal once nothing is pending, and ``load()`` replays whatever a
stopped process left in it.
SQLite runs in WAL mode with ``synchronous=NORMAL``: a commit, like a journal line, survives the
process being killed and costs no fsync. A SQLite file that cannot be read as our state is moved aside
with its journal and the scheduler starts empty; a damaged journal is moved aside and the scheduler
starts from the file; a lost connection to a database server is opened again at the next flush.
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

from sqlalchemy import Connection, Engine, create_engine
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError

from luigi.database import sqlite_engine
from luigi.scheduler.model.changes import ChangeSet
from luigi.scheduler.model.state import SchedulerState
from luigi.scheduler.settings import SchedulerConfig
from luigi.scheduler.store import schema
from luigi.scheduler.store.base import CorruptStateError, StateStore, StateStoreError
from luigi.scheduler.store.journal import (
    ANSWER_SLICE_KEYS,
    DIRECT_WRITE_KEYS,
    JOURNAL_SUFFIX,
    JournaledRows,
    journal_file_for,
    move_aside,
)
from luigi.scheduler.store.rows import RowChanges, RowStore, Runner, Snapshot

logger = logging.getLogger("luigi.scheduler")

_SQLITE_BUSY_CODES = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED (named in the sqlite3 module from 3.11 only)
# PERM, BUSY, LOCKED, NOMEM, READONLY, IOERR, FULL, CANTOPEN, PROTOCOL: the place, not the data, is at fault.
_SQLITE_UNAVAILABLE_CODES = frozenset({3, 5, 6, 7, 8, 10, 13, 14, 15})
_SQLITE_FULL = 13
SPACE_RETRY_SECONDS = 1.0  # how often a luigid starting on a full disk tries the journal again
_WAITING_FOR_SPACE = (
    "Cannot read or write the scheduler state %s (%s): waiting for space; luigid starts once it can "
    "(nothing is moved or lost: free the disk)"
)
_UNAVAILABLE_WORDS = ("locked", "readonly", "full", "I/O", "unable to open", "access permission")
# What reading (or replaying the journal into) a damaged database raises: driver errors and tables of the
# wrong shape. A row that would not load is skipped where it is read, so it never counts as damage.
_READ_ERRORS = (DBAPIError, sqlite3.Error, CorruptStateError)


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
        self._journal = JournaledRows(journal_file_for(self._path)) if self._path is not None else None
        self._closed = False
        self._lock = threading.Lock()  # the scheduler is single-threaded, but shutdown hooks may not be
        # Run inside each write's transaction of a server database, before it writes; raising refuses
        # the write (a standby luigid's lease check: ``store/lease``). None: every write goes ahead.
        self.fence: Callable[[Connection], None] | None = None

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
    def journal_path(self) -> Path | None:
        """The SQLite file's write journal, or None for a server database (which has none)."""
        return self._journal.path if self._journal is not None else None

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
        """Replace the state's records with the stored ones, the journal replayed into the file first
        (an empty state if the file was unreadable)."""
        with self._lock:
            self._read_stored_waiting_for_space().apply_to(state)
            self._mirrors_state = True

    def _read_stored_waiting_for_space(self) -> Snapshot:
        """The stored records (journal replayed first); on a full disk, wait for space (logged once), as a
        running luigid does, rather than refuse to start or take the file for damaged."""
        waited = False
        while True:
            try:
                snapshot = self._read_stored()
                break
            except _READ_ERRORS as exc:
                if not _is_full(exc):
                    self._recover(exc)
                    return Snapshot()
                if not waited:
                    logger.error(_WAITING_FOR_SPACE, self.where, _reason(exc))
                waited = True
                self._drop_connection()
                time.sleep(SPACE_RETRY_SECONDS)  # a full disk frees up by itself or by an operator
        if waited:
            logger.info("The scheduler state %s is readable and written: starting", self.where)
        return snapshot

    def _read_stored(self) -> Snapshot:
        conn = self._open()
        self._replay_journal()
        with conn.begin():
            return self._row_store().read_all(conn)

    def record_changes(self, state: SchedulerState, changes: ChangeSet) -> None:
        """Make every changed record's current fields (or its deletion) durable.

        A SQLite file appends them to its journal (``fold`` writes them into the file later); a server
        database writes them in one transaction. The first write of a store that did not load
        replaces the stored state, in one transaction.
        """
        with self._lock:
            try:
                conn = self._open()
                rows = self._row_store()
                if not self._mirrors_state:
                    with conn.begin():
                        self._check_fence(conn)
                        rows.write_everything(conn, state, changes)
                    if self._journal is not None:
                        self._journal.forget()
                elif self._journal is not None:
                    self._journal_or_write_through(state, changes)
                else:
                    with conn.begin():
                        self._check_fence(conn)
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

    def _check_fence(self, conn: Connection) -> None:
        if self.fence is not None:
            self.fence(conn)

    def fold(self, due_only: bool = False, limit: int | None = None) -> None:
        """Write journaled changes into the SQLite file in one transaction: all of them, or the oldest
        ``limit`` keys; the journal is emptied once none is left.

        With ``due_only``, a short slice once enough changes are pending (the server asks that after
        each answer). On failure the changes stay pending and journaled (the next fold, or the next
        start, writes them) and StateStoreError is raised. Nothing to do for a server database, which
        is written at each flush.
        """
        with self._lock:
            if not due_only:
                self._fold(limit)
            elif self._journal is not None and self._journal.due:
                self._fold(ANSWER_SLICE_KEYS)

    def close(self) -> None:
        """Fold the journal, then close the connection and the journal; later use raises StateStoreError.

        A fold that fails is logged: the journal keeps the changes and the next start replays them.
        """
        with self._lock:
            try:
                self._fold_logged()
            finally:
                self._dispose()
                self._closed = True

    # -- the journal of a SQLite file ---------------------------------------------------------------------

    def _fold_logged(self, limit: int | None = None) -> None:
        try:
            self._fold(limit)
        except StateStoreError as exc:
            logger.warning("%s; the journal keeps its changes for the next fold", exc)

    def _fold(self, limit: int | None = None) -> None:
        journal = self._journal
        if journal is None or not journal.pending:
            return
        try:
            journal.fold(self._write_rows, limit)
        except (sqlite3.Error, DBAPIError, StateStoreError) as exc:
            raise StateStoreError(
                f"Cannot fold the scheduler journal {journal.path} into {self.where}: {_reason(exc)}"
            ) from exc

    def _replay_journal(self) -> None:
        """Write what a stopped luigid left in the journal into the file (a full disk: the driver's error,
        which ``load`` waits out)."""
        if self._journal is None:
            return
        try:
            self._journal.replay(self._write_rows, self.where)
        except sqlite3.Error as exc:
            if not _is_unavailable(exc) or _is_full(exc):
                raise  # damage: the database is moved aside with its journal; a full disk is waited out
            raise StateStoreError(
                f"Cannot write the scheduler journal {self._journal.path} into {self.where}: {exc}. "
                "Both files are kept; make the file writable (or stop what holds it) and start again."
            ) from exc

    def _journal_or_write_through(self, state: SchedulerState, changes: ChangeSet) -> None:
        """Journal a flush's rows (a large one's runs of equal tasks as runs), or write a flush too large
        for a journal line straight into the file."""
        journal, row_store = self._journal, self._row_store()
        assert journal is not None
        if len(changes.tasks) < DIRECT_WRITE_KEYS:
            rows: RowChanges | None = row_store.rows_for(state, changes)
        else:
            rows = row_store.compact_rows_for(state, changes, max_loose=DIRECT_WRITE_KEYS)
            if rows is None:
                self._write_through(state, changes)
                return
        assert rows is not None
        journal.record(rows)
        at_cap = journal.over_cap()
        if at_cap:
            self._fold_logged(at_cap)  # a failure loses nothing: the rows are journaled

    def _write_through(self, state: SchedulerState, changes: ChangeSet) -> None:
        """Write a flush too large for a journal line straight into the SQLite file, in one transaction of
        its own, once the journal is folded and emptied (so that no older journaled row can win over it at
        a replay). A wrapper naming a million dependencies makes a million stubs in one call: as a line,
        that was hundreds of megabytes held at once (its stubs now go as runs: ``store.runs``)."""
        journal = self._journal
        assert journal is not None
        journal.fold(self._write_rows)
        row_store = self._row_store()
        _in_sqlite_transaction(self._open(), lambda run: row_store.write_changes(run, state, changes))

    def _write_rows(self, rows: RowChanges) -> None:
        """Write ``rows`` into the SQLite file in one transaction (errors are the driver's)."""
        conn = self._open()
        row_store = self._row_store()
        _in_sqlite_transaction(conn, lambda run: row_store.write_rows(run, rows))

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
        return sqlite_engine(self._url)

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
        """Move an unreadable SQLite file aside and open a fresh one; other failures are fatal (a file in
        use, read-only or on a failing disk is not damaged: it is never moved aside)."""
        self._dispose()
        if self._path is None or _is_unavailable(exc) or _is_busy(exc) or not self._path.exists():
            raise StateStoreError(f"Cannot open the scheduler state in {self.where}: {_reason(exc)}") from exc
        moved = move_aside(self._path, sides=("-wal", "-shm", JOURNAL_SUFFIX))
        if self._journal is not None:  # what it had pending went with the file's journal
            self._journal.forget_pending()
        logger.warning(
            "The scheduler state file %s could not be read (%s); it was moved (with its WAL and journal "
            "files) to %s and the scheduler starts with an empty state",
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
        if self._journal is not None:
            self._journal.close()
        self._drop_connection()
        if self._engine is not None:
            self._engine.dispose()
        self._engine = None


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


def _driver_error(exc: BaseException) -> sqlite3.Error | None:
    """SQLite's own error, also inside SQLAlchemy's wrapper (None for any other error)."""
    orig = getattr(exc, "orig", exc)
    return orig if isinstance(orig, sqlite3.Error) else None


def _is_busy(exc: BaseException) -> bool:
    """Whether another process holds the database: it is in use, not damaged."""
    orig = _driver_error(exc)
    if not isinstance(orig, sqlite3.OperationalError):
        return False
    code = getattr(orig, "sqlite_errorcode", None)
    return code in _SQLITE_BUSY_CODES or "locked" in str(orig)


def _is_full(exc: BaseException) -> bool:
    """Whether SQLite refused for lack of space (SQLITE_FULL)."""
    orig = _driver_error(exc)
    if orig is None:
        return False
    code = getattr(orig, "sqlite_errorcode", None)
    return (code & 0xFF) == _SQLITE_FULL if code is not None else "full" in str(orig)


def _is_unavailable(exc: BaseException) -> bool:
    """Whether SQLite refused because of where the file is (busy, read-only, full, I/O), not its data."""
    orig = _driver_error(exc)
    if orig is None:
        return False
    code = getattr(orig, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return (code & 0xFF) in _SQLITE_UNAVAILABLE_CODES
    return isinstance(orig, sqlite3.OperationalError) and any(
        word in str(orig) for word in _UNAVAILABLE_WORDS
    )
