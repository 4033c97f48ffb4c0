"""Reading the whole state from the tables, and writing changed records back as rows.

A flush's changed records are first encoded as ``RowChanges`` (the rows to write and the keys to
delete), which a SQLite file journals and writes later, and a server database writes at once. A
changed record's row is upserted (``INSERT ... ON CONFLICT DO UPDATE`` on SQLite and PostgreSQL,
delete then insert elsewhere); a removed record's row is deleted. Statements are built once per
connection, so a flush costs little more than the driver's own work. Each row carries ``seq``, the
record's place in the scheduler's dicts, so that loading restores their insertion order.
"""

from __future__ import annotations

import json
import logging
import math
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, TypeVar, cast

from sqlalchemy import ClauseElement, Connection, Delete, Dialect, Insert, String, Table, bindparam, select
from sqlalchemy.sql.compiler import SQLCompiler

from luigi.scheduler.model.changes import ChangeSet
from luigi.scheduler.model.records import TaskRecord, WorkerRecord
from luigi.scheduler.model.state import SchedulerState
from luigi.scheduler.store import codec, schema
from luigi.scheduler.store.base import CorruptStateError
from luigi.scheduler.store.runs import TaskRun, group_runs

Row = dict[str, Any]
T = TypeVar("T")
logger = logging.getLogger("luigi.scheduler")


@dataclass
class Snapshot:
    """Everything read from the database, applied to the state in one step."""

    tasks: list[TaskRecord] = field(default_factory=list)
    workers: list[WorkerRecord] = field(default_factory=list)
    resources: dict[str, Any] = field(default_factory=dict)
    batchers: dict[str, dict[str, tuple[list[str], float]]] = field(default_factory=dict)
    paused: bool = False

    def apply_to(self, state: SchedulerState) -> None:
        """Replace the state's records (capacities set at run time overlay the configured ones)."""
        state.tasks = {task.id: task for task in self.tasks}
        state.workers = {worker.id: worker for worker in self.workers}
        state.resources = {**state.config.resources, **self.resources}
        state.batchers = self.batchers
        state.paused = self.paused


class Positions:
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


JOURNAL_FORMAT = 2  # 2: a line may hold ``runs`` (``store.runs``); lines without them are still written as 1
_READ_FORMATS = (1, JOURNAL_FORMAT)  # a journal left by the version before runs is replayed as it is
_KEYED = ("tasks", "workers", "resources", "batchers")  # RowChanges' keyed fields, in the order folded
_SCALARS = (str, int, float, bool, type(None))
# A task's or worker's field values (``codec.task_values``) followed by its ``seq``: what the journal
# holds for a changed record. Encoding the columns from them waits for the fold, off the request path.
Values = Sequence[Any]


@dataclass(frozen=True)
class _RecordTable:
    """How a task's or worker's values become its row, and how the row is checked when read back."""

    name: str
    table: Table
    row_of: Callable[[Values], Row]
    decode: Callable[[Row], Any]

    def row(self, values: Values) -> Row:
        row = self.row_of(values)
        row["seq"] = values[-1]
        return row

    def rows(self, changed: Mapping[str, Values | None]) -> dict[str, Row | None]:
        """The rows to write for changed records' values (None stays None: delete the row)."""
        return {key: None if values is None else self.row(values) for key, values in changed.items()}


_TASKS = _RecordTable("tasks", schema.tasks, codec.task_row_of, codec.task_from_row)
_WORKERS = _RecordTable("workers", schema.workers, codec.worker_row_of, codec.worker_from_row)


@dataclass
class RowChanges:
    """What one or more flushes change: what a journal line holds and what a fold writes.

    ``tasks`` and ``workers`` map a key to the record's ``Values``, ``resources`` to its new row; None
    deletes the row. ``batchers`` maps a worker id to all of that worker's rows (they replace the stored
    ones; an empty list deletes them); ``paused`` is the new pause flag, or None when it did not change.
    """

    tasks: dict[str, Values | None] = field(default_factory=dict)
    workers: dict[str, Values | None] = field(default_factory=dict)
    resources: dict[str, Row | None] = field(default_factory=dict)
    batchers: dict[str, list[Row]] = field(default_factory=dict)
    paused: bool | None = None
    # Tasks journaled as runs of equal rows (``runs``), oldest first; an entry of ``tasks`` for the same
    # task is always newer (``merge`` keeps it so), so runs are written first and ``tasks`` wins.
    runs: list[TaskRun] = field(default_factory=list)

    def __len__(self) -> int:
        """How many keys (rows or row groups) are changed."""
        keyed = len(self.tasks) + len(self.workers) + len(self.resources) + len(self.batchers)
        return keyed + sum(len(run) for run in self.runs) + (self.paused is not None)

    def merge(self, later: RowChanges) -> None:
        """Add ``later``'s changes: a key's later row (or deletion) wins, keys keep their first place."""
        for run in later.runs:
            if self.tasks:
                for task_id in run.ids:
                    self.tasks.pop(task_id, None)
            self.runs.append(run)
        self.tasks.update(later.tasks)
        self.workers.update(later.workers)
        self.resources.update(later.resources)
        self.batchers.update(later.batchers)
        if later.paused is not None:
            self.paused = later.paused

    def take(self, limit: int) -> RowChanges:
        """Remove and return ``limit`` keys: runs' members first (the oldest run's, from its end), then the
        first keys of tasks, workers, resources, batchers, then the pause flag."""
        taken = RowChanges()
        left = limit
        while self.runs and left > 0:
            run = self.runs[0].split_off(left) if len(self.runs[0]) > left else self.runs.pop(0)
            left -= len(run)
            kept = run.without(self.tasks)  # a later change of a member is written instead
            if kept is not None:
                taken.runs.append(kept)
        for name in _KEYED:
            source: dict[str, Any] = getattr(self, name)
            if left <= 0 or not source:
                continue
            if len(source) <= left:
                setattr(taken, name, source)
                setattr(self, name, {})
            else:
                target: dict[str, Any] = getattr(taken, name)
                for key in list(islice(source, left)):
                    target[key] = source.pop(key)
            left -= len(getattr(taken, name))
        if left > 0 and self.paused is not None:
            taken.paused, self.paused = self.paused, None
        return taken

    def to_json(self) -> str:
        """One line of JSON (no newline in it), versioned; TypeError for a value JSON cannot hold."""
        document: dict[str, Any] = {"v": JOURNAL_FORMAT if self.runs else 1}
        for name in _KEYED:
            value = getattr(self, name)
            if value:
                document[name] = value
        if self.paused is not None:
            document["paused"] = self.paused
        if self.runs:
            document["runs"] = [run.to_json_value() for run in self.runs]
        return codec.journal_dumps(document)

    def task_rows(self) -> dict[str, Row | None]:
        """The ``tasks`` rows to write (None: delete)."""
        return _TASKS.rows(self.tasks)

    def worker_rows(self) -> dict[str, Row | None]:
        """The ``workers`` rows to write (None: delete)."""
        return _WORKERS.rows(self.workers)

    @classmethod
    def from_json(cls, text: str) -> RowChanges:
        """The changes ``to_json`` wrote; CorruptStateError naming the problem when the shape is wrong."""
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise CorruptStateError(f"not JSON ({exc})") from None
        if not isinstance(document, dict):
            raise CorruptStateError(f"expected a JSON object, got {_shown(document)}")
        if document.get("v") not in _READ_FORMATS:
            raise CorruptStateError(
                f"format version {document.get('v')!r}, expected at most {JOURNAL_FORMAT}"
            )
        if document.get("v") == 1 and "runs" in document:
            raise CorruptStateError("runs in a line of format version 1")
        unknown = set(document) - {"v", "tasks", "workers", "resources", "batchers", "paused", "runs"}
        if unknown:
            raise CorruptStateError(f"unknown entries {sorted(unknown)}")
        changes = cls()
        changes.tasks = _record_values(_TASKS, document.get("tasks", {}))
        changes.workers = _record_values(_WORKERS, document.get("workers", {}))
        changes.resources = _keyed_rows("resources", schema.resources, "name", document.get("resources", {}))
        changes.batchers = _batcher_lists(document.get("batchers", {}))
        changes.runs = _task_runs(document.get("runs", []))
        paused = document.get("paused")
        if paused is not None and not isinstance(paused, bool):
            raise CorruptStateError(f"paused is {_shown(paused)}, expected true, false or null")
        changes.paused = paused
        return changes


def _record_values(kind: _RecordTable, value: Any) -> dict[str, Values | None]:
    """Journaled task or worker values, each checked to make a row that loads (CorruptStateError if not)."""
    if not isinstance(value, dict):
        raise CorruptStateError(f"{kind.name} is {_shown(value)}, expected an object of value lists")
    width = len(kind.table.c)  # the fields and seq
    later = len(schema.LATER_TASK_FIELDS) if kind is _TASKS else 0  # an older version's line lacks them
    for key, values in value.items():
        if values is None:
            continue
        where = f"{kind.name} row {key!r}"
        if not isinstance(values, list) or not width - later <= len(values) <= width:
            raise CorruptStateError(f"{where} is {_shown(values)}, expected a list of {width} values")
        if len(values) < width:  # the newer fields (last but seq) are None, as the migration leaves them
            values[-1:-1] = [None] * (width - len(values))
        try:
            row = kind.row(values)
        except (TypeError, ValueError) as exc:
            raise CorruptStateError(f"{where}: {exc}") from None
        _check_row(kind.table, key, row, {"id": key})
        if type(row["seq"]) is not int:
            raise CorruptStateError(f"{where} has seq {_shown(row['seq'])}, expected an integer")
        kind.decode(row)  # CorruptStateError naming the column that would not load
    return value


def _task_runs(value: Any) -> list[TaskRun]:
    """Journaled runs of equal tasks, each with values making a row that loads (else CorruptStateError)."""
    if not isinstance(value, list):
        raise CorruptStateError(f"runs is {_shown(value)}, expected a list of runs")
    runs = [TaskRun.from_json_value(run) for run in value]
    for run in runs:
        _record_values(_TASKS, {run.ids[0]: run.values})
    return runs


def _keyed_rows(name: str, table: Table, key: str, value: Any) -> dict[str, Row | None]:
    if not isinstance(value, dict):
        raise CorruptStateError(f"{name} is {_shown(value)}, expected an object of rows")
    for row_key, row in value.items():
        if row is not None:
            _check_row(table, row_key, row, {key: row_key})
    return value


def _batcher_lists(value: Any) -> dict[str, list[Row]]:
    if not isinstance(value, dict):
        raise CorruptStateError(f"batchers is {_shown(value)}, expected an object of row lists")
    for worker_id, rows in value.items():
        if not isinstance(rows, list):
            raise CorruptStateError(f"batchers of {worker_id!r} are {_shown(rows)}, expected a list of rows")
        for row in rows:
            _check_row(schema.batchers, worker_id, row, {"worker": worker_id})
    return value


def _check_row(table: Table, key: str, row: Any, expected: dict[str, str]) -> None:
    """A row has exactly the table's columns, scalar values, nulls only where allowed, and its key."""
    where = f"{table.name} row {key!r}"
    if not isinstance(row, dict):
        raise CorruptStateError(f"{where} is {_shown(row)}, expected an object")
    if row.keys() != set(table.c.keys()):
        raise CorruptStateError(f"{where} has columns {sorted(row)}, expected {sorted(table.c.keys())}")
    for column in table.c:
        value = row[column.name]
        if not isinstance(value, _SCALARS) or (value is None and not column.nullable):
            raise CorruptStateError(f"{where} column {column.name} is {_shown(value)}")
    for name, value in expected.items():
        if row[name] != value:
            raise CorruptStateError(f"{where} has {name} {_shown(row[name])}")


def _shown(value: Any) -> str:
    return f"{value!r:.80}"


# Runs one driver-level SQL text once per parameter set (``executemany``); see ``SqlStore``.
Runner = Callable[[str, Sequence[Any]], Any]


class _DriverStatement:
    """A statement compiled once to the driver's own SQL text and parameter style.

    A flush writes a few rows; SQLAlchemy's per-call handling of a compiled statement cost more than the
    database's own work, so the rows go straight to the driver. Only for columns whose values the driver
    takes as they are (text, numbers, booleans), which is every column of the state tables.
    """

    def __init__(self, statement: ClauseElement, dialect: Dialect) -> None:
        compiled = cast(SQLCompiler, statement.compile(dialect=dialect))
        self.sql = str(compiled)
        positional = compiled.positional
        self.order: tuple[str, ...] | None = tuple(compiled.positiontup or ()) if positional else None
        # a row's values in that order, as a tuple even for one column
        order = self.order or ()
        self._in_order: Callable[[Row], tuple[Any, ...]] = (
            operator.itemgetter(*order) if len(order) > 1 else lambda row: tuple(row[name] for name in order)
        )

    def run(self, run: Runner, rows: list[dict[str, Any]]) -> None:
        if self.order is None:
            run(self.sql, rows)
        else:
            in_order = self._in_order
            run(self.sql, [in_order(row) for row in rows])


class _TableWriter:
    """Prepared statements for one table keyed by one column."""

    def __init__(self, table: Table, key: str, dialect: Dialect, upsert: bool = True) -> None:
        self.table = table
        self.insert: Insert = table.insert()
        self.delete: Delete = table.delete().where(table.c[key] == bindparam("_key"))
        self.delete_all: Delete = table.delete()
        self.key = key
        statement = _upsert(table, dialect.name) if upsert else None
        self._upsert = _DriverStatement(statement, dialect) if statement is not None else None
        self._delete = _DriverStatement(self.delete, dialect)
        self._insert = _DriverStatement(self.insert, dialect)
        # Plain text columns (``Text`` ones hold ASCII JSON): the only place a value could be unstorable.
        self._text_columns = tuple(column.name for column in table.c if type(column.type) is String)

    def apply(self, run: Runner, changed: Mapping[str, Row | None]) -> None:
        """Write each changed key's new row; delete the rows of keys mapped to None."""
        if not changed:
            return
        gone = [{"_key": key} for key, row in changed.items() if row is None]
        if gone:
            self._delete.run(run, self.storable(gone, ("_key",)))
        rows = [row for row in changed.values() if row is not None]
        if rows:
            self.put(run, rows)

    def storable(self, rows: list[Row], columns: Sequence[str] | None = None) -> list[Row]:
        """``rows`` less any that no database could hold, each left out with an error naming it.

        The scheduler checks what it is sent, so this guards against a bug: one such row must never
        keep the rest of a flush (or the whole state file) from being written.
        """
        columns = self._text_columns if columns is None else columns
        kept = [row for row in rows if codec.unstorable(row, columns) is None]
        if len(kept) < len(rows):
            for row in rows:
                why = codec.unstorable(row, columns)
                if why is not None:
                    key = row.get(self.key, row.get("_key"))
                    logger.error(
                        "Scheduler state: %s row %s cannot be stored (%s); it is left out, the rest is kept",
                        self.table.name,
                        ascii(key),
                        why,
                    )
        return kept

    def put(self, run: Runner, rows: list[dict[str, Any]]) -> None:
        """Write ``rows``, replacing any with the same key (leaving out any no database could hold)."""
        rows = self.storable(rows)
        if not rows:
            return
        if self._upsert is not None:
            self._upsert.run(run, rows)
        else:
            self._delete.run(run, [{"_key": row[self.key]} for row in rows])
            self._insert.run(run, rows)

    def remove(self, run: Runner, keys: Iterable[str]) -> None:
        """Delete every row of ``keys``."""
        self._delete.run(run, self.storable([{"_key": key} for key in keys], ("_key",)))


def _upsert(table: Table, dialect: str) -> Insert | None:
    """``INSERT ... ON CONFLICT (primary key) DO UPDATE`` where the dialect has it."""
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    elif dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert  # type: ignore[assignment]
    else:
        return None
    statement = insert(table)
    keys = [column.name for column in table.primary_key]
    updates = {column.name: statement.excluded[column.name] for column in table.c if not column.primary_key}
    return statement.on_conflict_do_update(index_elements=keys, set_=updates)


class RowStore:
    """Reads and writes the state tables over one connection's dialect."""

    def __init__(self, dialect: Dialect) -> None:
        self._tasks = _TableWriter(schema.tasks, "id", dialect)
        self._workers = _TableWriter(schema.workers, "id", dialect)
        self._resources = _TableWriter(schema.resources, "name", dialect)
        self._batchers = _TableWriter(schema.batchers, "worker", dialect, upsert=False)  # rows per worker
        self._meta = _TableWriter(schema.meta, "key", dialect)
        self._task_order = Positions()
        self._worker_order = Positions()
        self._resource_order = Positions()

    def read_all(self, conn: Connection) -> Snapshot:
        """The stored state; a row that would not load is skipped with an error naming it (a driver
        error means the file itself is damaged)."""
        resources_t = schema.resources
        snapshot = Snapshot()
        snapshot.tasks = _read_records(conn, schema.tasks, codec.RowReader("tasks"))
        snapshot.workers = _read_records(conn, schema.workers, codec.RowReader("workers"))
        query = select(resources_t.c.name, resources_t.c.amount).order_by(resources_t.c.seq)
        for name, amount in conn.execute(query):
            loaded = _loaded(codec.decode_json, "resources", name, "amount", amount, "number")
            if loaded is not None:
                snapshot.resources[name] = loaded
        for row in conn.execute(select(schema.batchers)).mappings():
            batcher = _loaded(_batcher_of, row)
            if batcher is not None:
                snapshot.batchers.setdefault(row["worker"], {})[row["family"]] = batcher
        meta = schema.meta
        paused = conn.execute(select(meta.c.value).where(meta.c.key == schema.PAUSED_KEY)).scalar()
        snapshot.paused = paused == "true"
        self._task_order = Positions(task.id for task in snapshot.tasks)
        self._worker_order = Positions(worker.id for worker in snapshot.workers)
        self._resource_order = Positions(snapshot.resources)
        return snapshot

    def write_changes(self, run: Runner, state: SchedulerState, changes: ChangeSet) -> None:
        """Write the current rows of every changed record; delete those of removed ones.

        ``run`` executes driver SQL inside the caller's transaction. Tasks go ``WRITE_CHUNK`` at a time,
        so a flush that changed a million of them never holds a million rows.
        """
        for keys in _chunks(changes.tasks, WRITE_CHUNK):
            values = _changed(state.tasks, self._task_order, keys, _TASK_VALUES)
            self._tasks.apply(run, _TASKS.rows(values))
        others = ChangeSet(
            workers=changes.workers,
            resources=changes.resources,
            batchers=changes.batchers,
            paused=changes.paused,
        )
        self.write_rows(run, self.rows_for(state, others))

    def rows_for(self, state: SchedulerState, changes: ChangeSet) -> RowChanges:
        """The changed records' rows as they are now (with their ``seq``), and the rows to delete."""
        resources: dict[str, Row | None] = dict.fromkeys(changes.resources)
        for row in self._resource_rows(state, changes.resources):
            resources[row["name"]] = row
        return RowChanges(
            tasks=_changed(state.tasks, self._task_order, changes.tasks, _TASK_VALUES),
            workers=_changed(state.workers, self._worker_order, changes.workers, _WORKER_VALUES),
            resources=resources,
            batchers={worker_id: list(_batcher_rows(state, (worker_id,))) for worker_id in changes.batchers},
            paused=state.paused if changes.paused else None,
        )

    def compact_rows_for(
        self, state: SchedulerState, changes: ChangeSet, max_loose: int
    ) -> RowChanges | None:
        """``rows_for``, with runs of equal tasks journaled as runs (``store.runs``); None when more than
        ``max_loose`` tasks are in no run (such a flush is written another way)."""
        order = self._task_order
        grouped = group_runs(state.tasks, changes.tasks, order.of, order.forget, max_loose)
        if grouped is None:
            return None
        others = ChangeSet(
            workers=changes.workers,
            resources=changes.resources,
            batchers=changes.batchers,
            paused=changes.paused,
        )
        rows = self.rows_for(state, others)
        rows.tasks, rows.runs = grouped
        return rows

    def write_rows(self, run: Runner, rows: RowChanges) -> None:
        """Write ``rows`` with ``run``, which executes driver SQL inside the caller's transaction (tasks
        ``WRITE_CHUNK`` at a time; runs first, less the members ``tasks`` has a newer row of)."""
        for whole in rows.runs:
            task_run = whole.without(rows.tasks)
            if task_run is None:
                continue  # every member has a newer row in ``tasks``
            for start in range(0, len(task_run), WRITE_CHUNK):
                self._tasks.put(run, _run_rows(task_run, start, start + WRITE_CHUNK))
        for keys in _chunks(rows.tasks, WRITE_CHUNK):
            self._tasks.apply(run, _TASKS.rows({key: rows.tasks[key] for key in keys}))
        self._workers.apply(run, rows.worker_rows())
        self._resources.apply(run, rows.resources)
        if rows.batchers:
            self._batchers.remove(run, rows.batchers)
            batcher_rows = [row for worker_rows in rows.batchers.values() for row in worker_rows]
            if batcher_rows:
                self._batchers.put(run, batcher_rows)
        if rows.paused is not None:
            self._meta.put(run, [_paused_row(rows.paused)])

    def write_everything(self, conn: Connection, state: SchedulerState, changes: ChangeSet) -> None:
        """Make the tables hold exactly the state (the first write of a scheduler that did not load)."""
        for writer in (self._tasks, self._workers, self._resources, self._batchers):
            conn.execute(writer.delete_all)
        self._task_order, self._worker_order, self._resource_order = Positions(), Positions(), Positions()
        configured = state.config.resources
        runtime = [
            name
            for name, amount in state.resources.items()
            if name in changes.resources or configured.get(name) != amount
        ]
        for writer, rows in (
            (self._tasks, self._task_rows(state, state.tasks)),
            (self._workers, self._worker_rows(state, state.workers)),
            (self._resources, self._resource_rows(state, runtime)),
            (self._batchers, list(_batcher_rows(state, state.batchers))),
        ):
            rows = writer.storable(rows)
            if rows:
                conn.execute(writer.insert, rows)
        _write_paused(conn, state.paused)

    def _task_rows(self, state: SchedulerState, keys: Iterable[str]) -> list[dict[str, Any]]:
        return _ordered_rows(state.tasks, self._task_order, keys, codec.task_row)

    def _worker_rows(self, state: SchedulerState, keys: Iterable[str]) -> list[dict[str, Any]]:
        return _ordered_rows(state.workers, self._worker_order, keys, codec.worker_row)

    def _resource_rows(self, state: SchedulerState, names: Iterable[str]) -> list[dict[str, Any]]:
        order = self._resource_order
        return [
            {"name": name, "amount": codec.dumps(state.resources[name]), "seq": order.of(name)}
            for name in names
            if name in state.resources
        ]


def _run_rows(run: TaskRun, start: int, stop: int) -> list[Row]:
    """The rows of a run's members ``start`` to ``stop``: its one row, with each member's id and seq."""
    template = _TASKS.row(run.values)
    return [
        {**template, "id": task_id, "seq": seq}
        for task_id, seq in zip(run.ids[start:stop], run.seqs[start:stop], strict=True)
    ]


READ_CHUNK = 1024  # rows fetched and decoded at a time


def _read_records(conn: Connection, table: Table, read: codec.RowReader) -> list[Any]:
    """Every row of ``table`` in ``seq`` order, decoded by ``read`` (rows that would not load skipped).

    Rows are read on the driver's own cursor (SQLAlchemy's per-row handling cost more than the rest of
    reading one) a slice at a time, decoded a column at a time, and put in ``seq`` order here, when they
    are not in it already: the database's ``ORDER BY`` sorted whole rows on an unindexed column, a
    third of SQLite's read.
    """
    query = select(*(table.c[name] for name in read.names), table.c.seq)
    records: list[Any] = []
    seqs: list[float] = []
    cursor = conn.connection.cursor()
    try:
        cursor.execute(str(query.compile(dialect=conn.dialect)))
        while rows := cursor.fetchmany(READ_CHUNK):
            _read_slice(read, rows, records, seqs)
    finally:
        cursor.close()
    if all(map(operator.le, seqs, islice(seqs, 1, None))):
        return records
    return [records[n] for n in sorted(range(len(seqs)), key=seqs.__getitem__)]


def _read_slice(
    read: codec.RowReader, rows: Sequence[Sequence[Any]], records: list[Any], seqs: list[float]
) -> None:
    """Add a slice of rows' records and ``seq``s: decoded at once, or (when some row in it does not load,
    or has no integer ``seq``) row by row, leaving out what does not load with an error naming it."""
    slice_seqs = [row[-1] for row in rows]
    if all(type(seq) is int for seq in slice_seqs):
        try:
            records.extend(read.records(rows))
            seqs.extend(slice_seqs)
            return
        except (ValueError, TypeError):
            pass  # some row is damaged: the rows are read one by one below, which names it
    for seq, row in zip(slice_seqs, rows, strict=True):
        record = _loaded(read, row[:-1])
        if record is not None:
            records.append(record)
            seqs.append(seq if type(seq) in (int, float) else math.inf)  # a damaged seq: it goes last


def _loaded(decode: Callable[..., T], *row: Any) -> T | None:
    """``decode(*row)``, or None, with an error naming the row, when that one row would not load."""
    try:
        return decode(*row)
    except CorruptStateError as exc:
        logger.error(
            "Scheduler state: %s; that row is skipped (and left in the database as it is), the rest loads",
            exc,
        )
        return None


def _batcher_of(row: Mapping[str, Any]) -> tuple[list[str], float]:
    key = f"{row['worker']}/{row['family']}"
    names = codec.decode_json("batchers", key, "batched_args", row["batched_args"], "texts")
    size = codec.decode_json("batchers", key, "max_batch_size", row["max_batch_size"], "number")
    return names, size


def _batcher_rows(state: SchedulerState, worker_ids: Iterable[str]) -> Iterator[dict[str, Any]]:
    for worker_id in worker_ids:
        for family, (names, max_size) in state.batchers.get(worker_id, {}).items():
            yield {
                "worker": worker_id,
                "family": family,
                "batched_args": codec.dumps(list(names)),
                "max_batch_size": codec.dumps(max_size),
            }


def _paused_row(paused: bool) -> dict[str, Any]:
    return {"key": schema.PAUSED_KEY, "value": "true" if paused else "false"}


def _write_paused(conn: Connection, paused: bool) -> None:
    meta = schema.meta
    conn.execute(meta.delete().where(meta.c.key == schema.PAUSED_KEY))
    conn.execute(meta.insert(), [_paused_row(paused)])


def _ordered_rows(
    records: Mapping[str, Any], order: Positions, keys: Iterable[str], encode: Callable[[Any], Row]
) -> list[Row]:
    """Rows for the records still present (with their stable ``seq``); vanished keys leave the order."""

    def row(record: Any, seq: int) -> Row:
        encoded = encode(record)
        encoded["seq"] = seq
        return encoded

    return [encoded for encoded in _changed(records, order, keys, row).values() if encoded is not None]


WRITE_CHUNK = 1000  # rows encoded and handed to the driver at a time


def _chunks(keys: Iterable[str], size: int) -> Iterator[list[str]]:
    """``keys`` in lists of at most ``size``."""
    iterator = iter(keys)
    while chunk := list(islice(iterator, size)):
        yield chunk


def _values_of(values: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any, int], Values]:
    return lambda record, seq: (*values(record), seq)


_TASK_VALUES = _values_of(codec.task_values)
_WORKER_VALUES = _values_of(codec.worker_values)


def _changed(
    records: Mapping[str, Any], order: Positions, keys: Iterable[str], make: Callable[[Any, int], T]
) -> dict[str, T | None]:
    """``make(record, seq)`` for each key (``seq``: its stable place), or None for a vanished record
    (which leaves the order)."""
    changed: dict[str, T | None] = {}
    for key in keys:
        record = records.get(key)
        if record is None:
            order.forget(key)
            changed[key] = None
        else:
            changed[key] = make(record, order.of(key))
    return changed
