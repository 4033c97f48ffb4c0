"""Retention: forget runs and events older than ``[task_history] keep_days``.

Events and runs before the cut-off go; then every task record left with neither, and its parameters.
The writer calls this on a timer, between batches, so it never races its own inserts.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from sqlalchemy import Connection, Table, and_, delete, exists, func, select

from luigi.db_task_history import schema

_tasks: Table = schema.tasks  # type: ignore[assignment]
_params: Table = schema.task_parameters  # type: ignore[assignment]
_events: Table = schema.task_events  # type: ignore[assignment]
_runs: Table = schema.task_runs  # type: ignore[assignment]


@dataclass(frozen=True)
class Pruned:
    """How many rows one pruning removed."""

    events: int
    runs: int
    tasks: int

    def __bool__(self) -> bool:
        return bool(self.events or self.runs or self.tasks)


def prune(conn: Connection, cutoff: datetime.datetime) -> Pruned:
    """Delete what happened before ``cutoff`` (naive local time, as stored) in the caller's transaction."""
    events = conn.execute(delete(_events).where(_events.c.ts < cutoff)).rowcount
    when = func.coalesce(_runs.c.finished, _runs.c.started)
    runs = conn.execute(delete(_runs).where(when < cutoff)).rowcount
    orphan = and_(
        ~exists(select(_events.c.id).where(_events.c.task_id == _tasks.c.id)),
        ~exists(select(_runs.c.id).where(_runs.c.task_id == _tasks.c.id)),
    )
    conn.execute(delete(_params).where(_params.c.task_id.in_(select(_tasks.c.id).where(orphan))))
    tasks = conn.execute(delete(_tasks).where(orphan)).rowcount
    return Pruned(events=max(events, 0), runs=max(runs, 0), tasks=max(tasks, 0))
