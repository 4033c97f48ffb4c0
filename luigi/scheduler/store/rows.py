"""Reading the whole state from the tables, and writing changed records back as rows.

A changed record's row is upserted (``INSERT ... ON CONFLICT DO UPDATE`` on SQLite and PostgreSQL,
delete then insert elsewhere); a removed record's row is deleted. Statements are built once per
connection, so a flush costs little more than the driver's own work. Each row carries ``seq``, the
record's place in the scheduler's dicts, so that loading restores their insertion order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Executable, Table, bindparam, select

from luigi.scheduler.changes import ChangeSet
from luigi.scheduler.records import TaskRecord, WorkerRecord
from luigi.scheduler.state import SchedulerState
from luigi.scheduler.store import codec, schema


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


class _TableWriter:
    """Prepared statements for one table keyed by one column."""

    def __init__(self, table: Table, key: str, dialect: str) -> None:
        self.table = table
        self.insert: Executable = table.insert()
        self.delete: Executable = table.delete().where(table.c[key] == bindparam("_key"))
        self.delete_all: Executable = table.delete()
        self.key = key
        self.upsert = _upsert(table, dialect)

    def replace(self, conn: Connection, keys: Iterable[str], rows: list[dict[str, Any]]) -> None:
        """Delete the rows of ``keys`` that have no new row, and write ``rows``."""
        written = {row[self.key] for row in rows}
        gone = [{"_key": key} for key in keys if key not in written]
        if gone:
            conn.execute(self.delete, gone)
        if not rows:
            return
        if self.upsert is not None:
            conn.execute(self.upsert, rows)
        else:
            conn.execute(self.delete, [{"_key": row[self.key]} for row in rows])
            conn.execute(self.insert, rows)


def _upsert(table: Table, dialect: str) -> Executable | None:
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

    def __init__(self, dialect: str) -> None:
        self._tasks = _TableWriter(schema.tasks, "id", dialect)
        self._workers = _TableWriter(schema.workers, "id", dialect)
        self._resources = _TableWriter(schema.resources, "name", dialect)
        self._batchers = _TableWriter(schema.batchers, "worker", "")  # several rows per worker
        self._task_order = Positions()
        self._worker_order = Positions()
        self._resource_order = Positions()

    def read_all(self, conn: Connection) -> Snapshot:
        """The stored state (raises CorruptStateError or a driver error when the data is damaged)."""
        tasks_t, workers_t, resources_t = schema.tasks, schema.workers, schema.resources
        snapshot = Snapshot()
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
        self._task_order = Positions(task.id for task in snapshot.tasks)
        self._worker_order = Positions(worker.id for worker in snapshot.workers)
        self._resource_order = Positions(snapshot.resources)
        return snapshot

    def write_changes(self, conn: Connection, state: SchedulerState, changes: ChangeSet) -> None:
        """Write the current rows of every changed record; delete those of removed ones."""
        self._tasks.replace(conn, changes.tasks, self._task_rows(state, changes.tasks))
        self._workers.replace(conn, changes.workers, self._worker_rows(state, changes.workers))
        self._resources.replace(conn, changes.resources, self._resource_rows(state, changes.resources))
        if changes.batchers:
            rows = list(_batcher_rows(state, changes.batchers))
            conn.execute(self._batchers.delete, [{"_key": worker_id} for worker_id in changes.batchers])
            if rows:
                conn.execute(self._batchers.insert, rows)
        if changes.paused:
            _write_paused(conn, state.paused)

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


def _ordered_rows(
    records: Mapping[str, Any], order: Positions, keys: Iterable[str], encode: Callable[[Any], dict[str, Any]]
) -> list[dict[str, Any]]:
    """Rows for the records still present (with their stable ``seq``); vanished keys leave the order."""
    rows = []
    for key in keys:
        record = records.get(key)
        if record is None:
            order.forget(key)
        else:
            row = encode(record)
            row["seq"] = order.of(key)
            rows.append(row)
    return rows
