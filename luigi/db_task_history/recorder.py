"""Turning the scheduler's transitions into rows: one ``tasks`` row per task id, events, and runs.

``HistoryEvent.capture`` copies what is needed from the scheduler's live task record (cheap: it runs on
the request path). ``Recorder.write`` applies a batch of events inside the writer's transaction:

- each event appends a ``task_events`` row to the task's record (created, with its parameters, when the
  task id was never recorded; otherwise its newest record is reused, as Luigi's one record per task);
- RUNNING opens a ``task_runs`` row (host, worker, retry number); DONE and FAILED close it with the
  duration, and FAILED with the error text and exception type; a FAILED without a start is a run too.

A batch is applied in memory first and then written with a handful of multi-row statements (a run that
starts and ends within the batch is inserted once, complete), so the writer's cost per event stays small.
What the writer knows about a task (its row, its open run) is kept in a bounded LRU cache, so memory
does not grow with the number of tasks ever seen; a miss is answered from the database.
"""

from __future__ import annotations

import datetime
import json
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import Connection, Table, bindparam, insert, select, update

from luigi.db_task_history import schema
from luigi.task_status import DONE, FAILED, PENDING, RUNNING

MAX_ERROR_CHARS = 64 * 1024
_IN_CHUNK = 500  # task ids per "IN (...)" lookup, well under every database's bound-parameter limit
_KEPT_ID_TAIL = 10  # the hash at the end of a luigi task id
_RECENT_RUNS = 50  # runs read back to restore a task's retry number after a cache miss
LOST_RUN_ERROR = "No result was reported for this run: its worker was lost, or the scheduler restarted."
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::\s|:?$)")

_tasks: Table = schema.tasks  # type: ignore[assignment]
_params: Table = schema.task_parameters  # type: ignore[assignment]
_events: Table = schema.task_events  # type: ignore[assignment]
_runs: Table = schema.task_runs  # type: ignore[assignment]


class HistoryEvent(NamedTuple):
    """One transition as the history stores it, copied off the scheduler's task record.

    A named tuple: it is built on the scheduler's request path, where every microsecond counts.
    """

    task_id: str
    name: str
    params: dict[str, Any]
    status: str
    at: float
    host: str | None = None
    worker: str | None = None
    expl: Any = None

    @classmethod
    def capture(cls, task: Any, status: str, at: float, host: str | None = None) -> HistoryEvent:
        """The event for the scheduler's ``task`` becoming ``status`` at ``at`` (public parameters only)."""
        # Hidden parameters (passwords...) are never recorded; most tasks declare no visibility at all.
        params = task.public_params if getattr(task, "param_visibilities", None) else dict(task.params or {})
        return cls(
            str(task.id),
            task.family or "",
            params,
            status,
            at,
            host,
            task.worker_running,
            task.expl if status == FAILED else None,
        )


# Multi-row inserts go without RETURNING (SQLite would send them row by row to keep the order); the
# ids of new tasks are read back by task id, and only runs still open at a batch's end need theirs.
_INSERT_TASK = insert(_tasks).returning(_tasks.c.id)
_INSERT_RUN = insert(_runs).returning(_runs.c.id)
_UPDATE_HOST = update(_tasks).where(_tasks.c.id == bindparam("b_id")).values(host=bindparam("b_host"))
_UPDATE_RUN = (
    update(_runs)
    .where(_runs.c.id == bindparam("b_id"))
    .values(
        status=bindparam("b_status"),
        finished=bindparam("b_finished"),
        duration=bindparam("b_duration"),
        error=bindparam("b_error"),
        exception_type=bindparam("b_exception_type"),
    )
)


@dataclass(slots=True, eq=False)
class _KnownTask:
    """What the writer remembers of one recorded task."""

    row_id: int
    name: str | None = None
    host: str | None = None
    run_id: int | None = None  # the open run, when it is stored
    run_row: dict[str, Any] | None = None  # the open run, while it waits in this batch
    run_started: datetime.datetime | None = None
    run_started_at: float | None = None  # epoch seconds, when known: durations immune to DST changes
    failures: int = 0  # failed runs since the last success: the next run's retry number

    @property
    def running(self) -> bool:
        return self.run_id is not None or self.run_row is not None


class _TaskCache:
    """A bounded LRU map from luigi task id to what the writer knows of its record."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self._items: OrderedDict[str, _KnownTask] = OrderedDict()

    def get(self, task_id: str) -> _KnownTask | None:
        known = self._items.get(task_id)
        if known is not None:
            self._items.move_to_end(task_id)
        return known

    def put(self, task_id: str, known: _KnownTask) -> None:
        self._items[task_id] = known
        self._items.move_to_end(task_id)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


@dataclass
class _Batch:
    """Rows collected while applying a batch in memory, written together at its end."""

    events: list[dict[str, Any]] = field(default_factory=list)
    new_runs: list[tuple[_KnownTask, dict[str, Any]]] = field(default_factory=list)
    run_updates: list[dict[str, Any]] = field(default_factory=list)
    hosts: dict[int, str] = field(default_factory=dict)

    def write(self, conn: Connection) -> None:
        """Insert and update everything the batch collected, a statement per kind of row."""
        ended = [row for task, row in self.new_runs if task.run_row is not row]
        if ended:
            conn.execute(insert(_runs), ended)
        for task, row in self.new_runs:
            if task.run_row is row:  # still open at the end of the batch: later events update it by id
                task.run_id, task.run_row = conn.execute(_INSERT_RUN, row).scalar_one(), None
        if self.run_updates:
            conn.execute(_UPDATE_RUN, self.run_updates)
        if self.hosts:
            conn.execute(
                _UPDATE_HOST, [{"b_id": row_id, "b_host": host} for row_id, host in self.hosts.items()]
            )
        if self.events:
            conn.execute(insert(_events), self.events)


class Recorder:
    """Applies batches of events to the database; keeps only a bounded cache between batches."""

    def __init__(self, cache_size: int = 20_000) -> None:
        self._cache = _TaskCache(cache_size)

    def forget(self) -> None:
        """Drop the cache (after a failed transaction or pruning, the rows it names may be gone)."""
        self._cache.clear()

    @property
    def cached(self) -> int:
        """How many tasks the cache holds (bounded by its capacity)."""
        return len(self._cache)

    def write(self, conn: Connection, events: Sequence[HistoryEvent]) -> None:
        """Store ``events`` in order, in the caller's transaction (on failure call ``forget``)."""
        known = self._known_tasks(conn, events)
        self._create_tasks(conn, [e for e in _first_of_each_task(events) if e.task_id not in known], known)
        batch = _Batch()
        for event in events:
            task = known[event.task_id]
            ts = timestamp(event.at)
            batch.events.append({"task_id": task.row_id, "event_name": event.status, "ts": ts})
            if event.status == RUNNING:
                self._start_run(task, event, ts, batch)
            elif event.status in (DONE, FAILED):
                self._finish_run(task, event, ts, batch)
            elif event.status == PENDING and task.running:  # back to PENDING without a result
                self._close_run(task, event.at, PENDING, None, batch)
        batch.write(conn)
        for task_id, task in known.items():
            self._cache.put(task_id, task)

    # -- finding or creating the tasks' records ---------------------------------------------------------

    def _known_tasks(self, conn: Connection, events: Sequence[HistoryEvent]) -> dict[str, _KnownTask]:
        """What is known of the batch's tasks: from the cache, else their newest record in the database.

        Looked up in a few queries; the batch keeps its own map so the cache may evict freely.
        """
        known: dict[str, _KnownTask] = {}
        unknown: list[str] = []
        for task_id in dict.fromkeys(event.task_id for event in events):
            cached = self._cache.get(task_id)
            if cached is not None:
                known[task_id] = cached
            else:
                unknown.append(task_id)
        for start in range(0, len(unknown), _IN_CHUNK):
            stored = {task_id: fit_task_id(task_id) for task_id in unknown[start : start + _IN_CHUNK]}
            rows = conn.execute(
                select(_tasks.c.id, _tasks.c.task_id, _tasks.c.name, _tasks.c.host)
                .where(_tasks.c.task_id.in_(list(stored.values())))
                .order_by(_tasks.c.id)
            ).all()
            newest = {row.task_id: row for row in rows}  # ordered by id: the newest record wins
            for task_id, stored_id in stored.items():
                row = newest.get(stored_id)
                if row is not None:
                    known[task_id] = self._restore(conn, _KnownTask(row.id, row.name, row.host))
        return known

    def _restore(self, conn: Connection, known: _KnownTask) -> _KnownTask:
        """An existing record's open run and retry number, read back from its latest runs."""
        runs = conn.execute(
            select(_runs.c.id, _runs.c.status, _runs.c.started)
            .where(_runs.c.task_id == known.row_id)
            .order_by(_runs.c.id.desc())
            .limit(_RECENT_RUNS)
        ).all()
        if runs and runs[0].status == RUNNING:
            known.run_id, known.run_started = runs[0].id, runs[0].started
            runs = runs[1:]
        for run in runs:
            if run.status != FAILED:
                break
            known.failures += 1
        return known

    def _create_tasks(
        self, conn: Connection, firsts: list[HistoryEvent], known: dict[str, _KnownTask]
    ) -> None:
        """One record per new task id, with its parameters, in two statements."""
        if not firsts:
            return
        rows = [
            {
                "task_id": fit_task_id(e.task_id),
                "name": fit(e.name, schema.NAME_LENGTH),
                "host": None,
            }
            for e in firsts
        ]
        stored = [row["task_id"] for row in rows]
        if len(set(stored)) == len(stored):
            conn.execute(insert(_tasks), rows)
            newest = _newest_record_ids(conn, stored)
            ids = [newest[task_id] for task_id in stored]
        else:  # ids too long that were cut to the same text: their rows cannot be told apart afterwards
            ids = [conn.execute(_INSERT_TASK, row).scalar_one() for row in rows]
        params: list[dict[str, Any]] = []
        for event, row, row_id in zip(firsts, rows, ids, strict=True):
            known[event.task_id] = _KnownTask(row_id, row["name"])
            fitted: dict[str | None, str] = {}  # names cut to the same text keep the first value
            for name, value in event.params.items():
                fitted.setdefault(fit(str(name), schema.NAME_LENGTH), clean(str(value)))
            params.extend({"task_id": row_id, "name": name, "value": value} for name, value in fitted.items())
        if params:
            conn.execute(insert(_params), params)

    # -- runs -------------------------------------------------------------------------------------------

    def _start_run(self, task: _KnownTask, event: HistoryEvent, ts: datetime.datetime, batch: _Batch) -> None:
        if task.running:  # the previous run never reported its end
            self._close_run(task, event.at, FAILED, LOST_RUN_ERROR, batch)
        host = fit(event.host, schema.HOST_LENGTH)
        if host is not None and host != task.host:
            task.host = batch.hosts[task.row_id] = host
        task.run_row = self._run_row(task, event, RUNNING, started=ts)
        task.run_started, task.run_started_at = ts, event.at
        batch.new_runs.append((task, task.run_row))

    def _finish_run(
        self, task: _KnownTask, event: HistoryEvent, ts: datetime.datetime, batch: _Batch
    ) -> None:
        error = error_text(event.expl) if event.status == FAILED else None
        if task.running:
            self._close_run(task, event.at, event.status, error, batch)
        elif event.status == FAILED:  # failed before it ever ran (e.g. its completeness check raised)
            row = self._run_row(task, event, FAILED, started=None)
            row.update(
                finished=ts,
                error=error,
                exception_type=fit(exception_type(error), schema.EXCEPTION_TYPE_LENGTH),
            )
            batch.new_runs.append((task, row))
            task.failures += 1
        if event.status == DONE:
            task.failures = 0

    def _close_run(self, task: _KnownTask, at: float, status: str, error: str | None, batch: _Batch) -> None:
        ts = timestamp(at)
        if task.run_started_at is not None:
            duration: float | None = at - task.run_started_at
        else:  # restored from the database: only the stored local times are known
            duration = (ts - task.run_started).total_seconds() if task.run_started is not None else None
        values = {
            "status": status,
            "finished": ts,
            "duration": duration,
            "error": error,
            "exception_type": fit(exception_type(error), schema.EXCEPTION_TYPE_LENGTH),
        }
        if task.run_row is not None:
            task.run_row.update(values)
        else:
            batch.run_updates.append({"b_id": task.run_id, **{f"b_{k}": v for k, v in values.items()}})
        task.run_id, task.run_row, task.run_started, task.run_started_at = None, None, None, None
        if status == FAILED:
            task.failures += 1

    @staticmethod
    def _run_row(
        task: _KnownTask, event: HistoryEvent, status: str, started: datetime.datetime | None
    ) -> dict[str, Any]:
        """A complete ``task_runs`` row (every column, as multi-row inserts need)."""
        return {
            "task_id": task.row_id,
            "name": task.name if task.name is not None else fit(event.name, schema.NAME_LENGTH),
            "status": status,
            "retry": task.failures,
            "started": started,
            "finished": None,
            "duration": None,
            "host": task.host,
            "worker": fit(event.worker, schema.WORKER_LENGTH),
            "exception_type": None,
            "error": None,
        }


def _newest_record_ids(conn: Connection, stored_ids: list[str | None]) -> dict[str | None, int]:
    """The newest ``tasks.id`` of each stored task id (a few ``IN`` queries)."""
    newest: dict[str | None, int] = {}
    for start in range(0, len(stored_ids), _IN_CHUNK):
        chunk = stored_ids[start : start + _IN_CHUNK]
        query = select(_tasks.c.id, _tasks.c.task_id).where(_tasks.c.task_id.in_(chunk)).order_by(_tasks.c.id)
        newest.update((row.task_id, row.id) for row in conn.execute(query))
    return newest


def _first_of_each_task(events: Sequence[HistoryEvent]) -> list[HistoryEvent]:
    """The first event of every task id, in order."""
    firsts: dict[str, HistoryEvent] = {}
    for event in events:
        firsts.setdefault(event.task_id, event)
    return list(firsts.values())


def timestamp(at: float) -> datetime.datetime:
    """Epoch seconds as the naive local time Luigi's ``task_events.ts`` holds."""
    return datetime.datetime.fromtimestamp(at)


def fit(value: str | None, length: int) -> str | None:
    """``value`` cleaned and cut to a column of ``length`` characters."""
    if value is None:
        return None
    value = clean(value)
    return value if len(value) <= length else value[: length - 1] + "\u2026"


def fit_task_id(task_id: str) -> str:
    """A task id cut to its column, keeping its end: Luigi's ids end in a hash of the parameters."""
    task_id = clean(task_id)
    if len(task_id) <= schema.TASK_ID_LENGTH:
        return task_id
    return task_id[: schema.TASK_ID_LENGTH - _KEPT_ID_TAIL - 1] + "\u2026" + task_id[-_KEPT_ID_TAIL:]


def clean(value: str) -> str:
    """``value`` without NUL characters, which PostgreSQL text columns refuse."""
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


def error_text(expl: Any) -> str | None:
    """The failure explanation a worker sent (a JSON string of the traceback) as text, its tail if long."""
    if expl is None or expl == "":
        return None
    if isinstance(expl, str):
        try:
            decoded = json.loads(expl)
        except ValueError:
            decoded = expl
        text = decoded if isinstance(decoded, str) else json.dumps(decoded, default=str)
    else:
        text = json.dumps(expl, default=str)
    text = clean(text)
    if len(text) > MAX_ERROR_CHARS:
        text = "\u2026" + text[-MAX_ERROR_CHARS:]
    return text


def exception_type(error: str | None) -> str | None:
    """The exception class a Python traceback ends with (``ValueError``, ``pkg.mod.MyError``), or None."""
    if not error or "Traceback (most recent call last)" not in error:
        return None
    for line in reversed(error.strip().splitlines()):
        if not line or line[0].isspace():
            continue
        match = _EXCEPTION_LINE.match(line)
        if match:
            return match.group(1)
    return None
