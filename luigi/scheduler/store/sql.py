"""``SqlStore``: the scheduler's state in SQLite (a file beside ``state_path``) or any SQLAlchemy database.

Writes go through SQLAlchemy Core, one transaction per ``Scheduler.flush()``: each changed record's row
is deleted and inserted again (dialect-neutral), removed records just lose their row. SQLite runs in
WAL mode with ``synchronous=NORMAL``: a commit survives the process being killed, and costs no fsync.
A SQLite file that cannot be read as our state is moved aside and the scheduler starts empty.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Column, Connection, Engine, Table, create_engine, event, select
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError

from luigi.scheduler.changes import ChangeSet
from luigi.scheduler.config import SchedulerConfig
from luigi.scheduler.records import TaskRecord, WorkerRecord
from luigi.scheduler.state import SchedulerState
from luigi.scheduler.store import codec, schema
from luigi.scheduler.store.base import CorruptStateError, StateStore, StateStoreError

logger = logging.getLogger("luigi.scheduler")

_DELETE_CHUNK = 500  # ids per DELETE ... IN (...), well under every database's bound-parameter limit
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


@dataclass
class _Snapshot:
    """Everything read from the database, applied to the state in one step."""

    tasks: list[TaskRecord] = field(default_factory=list)
    workers: list[WorkerRecord] = field(default_factory=list)
    resources: dict[str, Any] = field(default_factory=dict)
    batchers: dict[str, dict[str, tuple[list[str], float]]] = field(default_factory=dict)
    paused: bool = False

    def apply_to(self, state: SchedulerState) -> None:
        state.tasks = {task.id: task for task in self.tasks}
        state.workers = {worker.id: worker for worker in self.workers}
        state.resources = {**state.config.resources, **self.resources}
        state.batchers = self.batchers
        state.paused = self.paused


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
        self._order = _Order()
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
                    snapshot, self._order = _read_all(conn)
            except _READ_ERRORS as exc:
                self._recover(exc)
                snapshot, self._order = _Snapshot(), _Order()
            snapshot.apply_to(state)
            self._mirrors_state = True

    def record_changes(self, state: SchedulerState, changes: ChangeSet) -> None:
        """Write every changed record's current fields (or delete its row) in one transaction."""
        with self._lock:
            conn = self._open()
            with conn.begin():
                if self._mirrors_state:
                    _write_changes(conn, state, changes, self._order)
                else:
                    self._order = _write_everything(conn, state, changes)
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
        self._prepare_location()
        try:
            return self._connect()
        except (DBAPIError, CorruptStateError) as exc:
            self._recover(exc)
            assert self._conn is not None
            return self._conn

    def _connect(self) -> Connection:
        engine = self._make_engine()
        self._engine = engine
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
            raise StateStoreError(f"Cannot open the scheduler state in {self.where}: {exc}") from exc
        moved = _move_aside(self._path)
        logger.warning(
            "The scheduler state file %s could not be read (%s); it was moved to %s and the scheduler "
            "starts with an empty state",
            self._path,
            exc,
            moved,
        )
        try:
            self._connect()
        except (DBAPIError, CorruptStateError) as again:
            raise StateStoreError(f"Cannot create the scheduler state file {self._path}: {again}") from again

    def _dispose(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(DBAPIError):  # closing a broken connection may fail; it is gone
                self._conn.close()
        if self._engine is not None:
            self._engine.dispose()
        self._conn, self._engine = None, None


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


# -- reading ----------------------------------------------------------------------------------------------


class _Positions:
    """Each record's place in its scheduler dict, so that a restart restores the insertion order."""

    def __init__(self, keys: Iterable[str] = ()) -> None:
        self._of = {key: n for n, key in enumerate(keys)}
        self._next = len(self._of)

    def of(self, key: str) -> int:
        """The key's position; a key not seen before goes last."""
        position = self._of.get(key)
        if position is None:
            position = self._of[key] = self._next
            self._next += 1
        return position

    def forget(self, key: str) -> None:
        """The record was removed (if it comes back, it goes last, as in a dict)."""
        self._of.pop(key, None)


@dataclass
class _Order:
    """Positions of tasks, workers and run-time resources."""

    tasks: _Positions = field(default_factory=_Positions)
    workers: _Positions = field(default_factory=_Positions)
    resources: _Positions = field(default_factory=_Positions)


def _read_all(conn: Connection) -> tuple[_Snapshot, _Order]:
    tasks_t, workers_t, resources_t = schema.tasks, schema.workers, schema.resources
    snapshot = _Snapshot()
    rows = conn.execute(select(tasks_t).order_by(tasks_t.c.seq)).mappings()
    snapshot.tasks = [codec.task_from_row(row) for row in rows]
    rows = conn.execute(select(workers_t).order_by(workers_t.c.seq)).mappings()
    snapshot.workers = [codec.worker_from_row(row) for row in rows]
    query = select(resources_t.c.name, resources_t.c.amount).order_by(resources_t.c.seq)
    for name, amount in conn.execute(query):
        snapshot.resources[name] = codec.decode_json("resources", name, "amount", amount, "number")
    for row in conn.execute(select(schema.batchers)).mappings():
        key = f"{row['worker']}/{row['family']}"
        names = codec.decode_json("batchers", key, "batched_args", row["batched_args"], "texts")
        size = codec.decode_json("batchers", key, "max_batch_size", row["max_batch_size"], "number")
        snapshot.batchers.setdefault(row["worker"], {})[row["family"]] = (names, size)
    meta = schema.meta
    paused = conn.execute(select(meta.c.value).where(meta.c.key == schema.PAUSED_KEY)).scalar()
    snapshot.paused = paused == "true"
    order = _Order(
        _Positions(task.id for task in snapshot.tasks),
        _Positions(worker.id for worker in snapshot.workers),
        _Positions(snapshot.resources),
    )
    return snapshot, order


# -- writing ----------------------------------------------------------------------------------------------


def _write_changes(conn: Connection, state: SchedulerState, changes: ChangeSet, order: _Order) -> None:
    rows = _task_rows(state, changes.tasks, order.tasks)
    _replace_rows(conn, schema.tasks, schema.tasks.c.id, changes.tasks, rows)
    rows = _worker_rows(state, changes.workers, order.workers)
    _replace_rows(conn, schema.workers, schema.workers.c.id, changes.workers, rows)
    rows = _resource_rows(state, changes.resources, order.resources)
    _replace_rows(conn, schema.resources, schema.resources.c.name, changes.resources, rows)
    rows = _batcher_rows(state, changes.batchers)
    _replace_rows(conn, schema.batchers, schema.batchers.c.worker, changes.batchers, rows)
    if changes.paused:
        _write_paused(conn, state.paused)


def _write_everything(conn: Connection, state: SchedulerState, changes: ChangeSet) -> _Order:
    """Make the database hold exactly the state (the first write of a scheduler that did not load)."""
    for table in (schema.tasks, schema.workers, schema.resources, schema.batchers):
        conn.execute(table.delete())
    order = _Order()
    _insert(conn, schema.tasks, _task_rows(state, state.tasks, order.tasks))
    _insert(conn, schema.workers, _worker_rows(state, state.workers, order.workers))
    configured = state.config.resources
    runtime = [
        name
        for name, amount in state.resources.items()
        if name in changes.resources or configured.get(name) != amount
    ]
    _insert(conn, schema.resources, _resource_rows(state, runtime, order.resources))
    _insert(conn, schema.batchers, _batcher_rows(state, state.batchers))
    _write_paused(conn, state.paused)
    return order


def _task_rows(state: SchedulerState, keys: Iterable[str], positions: _Positions) -> Iterator[dict[str, Any]]:
    tasks = state.tasks
    for key in keys:
        task = tasks.get(key)
        if task is None:
            positions.forget(key)
        else:
            row = codec.task_row(task)
            row["seq"] = positions.of(key)
            yield row


def _worker_rows(
    state: SchedulerState, keys: Iterable[str], positions: _Positions
) -> Iterator[dict[str, Any]]:
    workers = state.workers
    for key in keys:
        worker = workers.get(key)
        if worker is None:
            positions.forget(key)
        else:
            row = codec.worker_row(worker)
            row["seq"] = positions.of(key)
            yield row


def _resource_rows(
    state: SchedulerState, names: Iterable[str], positions: _Positions
) -> Iterator[dict[str, Any]]:
    for name in names:
        if name in state.resources:
            yield {"name": name, "amount": codec.dumps(state.resources[name]), "seq": positions.of(name)}


def _batcher_rows(state: SchedulerState, worker_ids: Iterable[str]) -> Iterator[dict[str, Any]]:
    for worker_id in worker_ids:
        for family, (names, max_size) in state.batchers.get(worker_id, {}).items():
            yield {
                "worker": worker_id,
                "family": family,
                "batched_args": codec.dumps(list(names)),
                "max_batch_size": codec.dumps(max_size),
            }


def _write_paused(conn: Connection, paused: bool) -> None:
    meta = schema.meta
    conn.execute(meta.delete().where(meta.c.key == schema.PAUSED_KEY))
    conn.execute(meta.insert(), [{"key": schema.PAUSED_KEY, "value": "true" if paused else "false"}])


def _replace_rows(
    conn: Connection, table: Table, key: Column[Any], keys: Iterable[str], rows: Iterable[dict[str, Any]]
) -> None:
    """Delete the rows of ``keys`` and insert ``rows`` (the current records among them)."""
    keys = list(keys)
    for start in range(0, len(keys), _DELETE_CHUNK):
        conn.execute(table.delete().where(key.in_(keys[start : start + _DELETE_CHUNK])))
    _insert(conn, table, rows)


def _insert(conn: Connection, table: Table, rows: Iterable[dict[str, Any]]) -> None:
    batch = list(rows)
    if batch:
        conn.execute(table.insert(), batch)
