"""Reading the history back: Luigi's query API, and the bounded queries the pages and chart use.

Each function takes an open ``Session``. Records come with their parameters, events and runs loaded,
so they stay usable after the session closes (as the pages use them).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session, selectinload

from luigi.db_task_history.recorder import fit_task_id
from luigi.db_task_history.schema import TaskEvent, TaskParameter, TaskRecord, TaskRun

_LATEST_WINDOW = datetime.timedelta(hours=24)


def _records() -> Select[TaskRecord]:
    return select(TaskRecord).options(
        selectinload(TaskRecord.parameters),
        selectinload(TaskRecord.events),
        selectinload(TaskRecord.runs),
    )


def find_all_by_parameters(
    session: Session, task_name: str, task_params: dict[str, Any], limit: int | None = None
) -> list[TaskRecord]:
    """Records named ``task_name`` having every parameter of ``task_params`` (compared as text)."""
    query = _records().where(TaskRecord.name == task_name)
    for name, value in task_params.items():
        has_value = select(TaskParameter.task_id).where(
            TaskParameter.name == name, TaskParameter.value == str(value)
        )
        query = query.where(TaskRecord.id.in_(has_value))
    query = query.order_by(TaskRecord.id.desc())
    if limit is not None:
        query = query.limit(limit)
    return list(session.scalars(query))


def find_latest_runs(session: Session, now: datetime.datetime, limit: int | None = None) -> list[TaskRecord]:
    """Records with an event in the 24 hours before ``now``, the most recently active first."""
    last_event = func.max(TaskEvent.ts).label("last_event")
    recent = (
        select(TaskEvent.task_id, last_event)
        .where(TaskEvent.ts >= now - _LATEST_WINDOW)
        .group_by(TaskEvent.task_id)
        .subquery()
    )
    query = (
        _records()
        .join(recent, recent.c.task_id == TaskRecord.id)
        .order_by(recent.c.last_event.desc(), TaskRecord.id.desc())
    )
    if limit is not None:
        query = query.limit(limit)
    return list(session.scalars(query))


def find_all_runs(session: Session) -> list[TaskRecord]:
    """Every record, oldest first."""
    return list(session.scalars(_records().order_by(TaskRecord.id)))


def find_all_events(session: Session) -> list[TaskEvent]:
    """Every event, oldest first."""
    return list(session.scalars(select(TaskEvent).order_by(TaskEvent.ts, TaskEvent.id)))


def find_task_by_id(session: Session, record_id: int) -> TaskRecord | None:
    """The record with this primary key."""
    return session.scalars(_records().where(TaskRecord.id == record_id)).first()


def find_task_by_task_id(session: Session, task_id: str) -> TaskRecord | None:
    """The newest record of the luigi task ``task_id``."""
    stored = fit_task_id(task_id)  # long ids are stored cut to the column
    query = _records().where(TaskRecord.task_id == stored).order_by(TaskRecord.id.desc()).limit(1)
    return session.scalars(query).first()


def find_runs_by_name(session: Session, task_name: str, limit: int) -> list[TaskRun]:
    """The last ``limit`` runs of tasks named ``task_name``, oldest first, each with its task record."""
    query = (
        select(TaskRun)
        .options(selectinload(TaskRun.task).selectinload(TaskRecord.parameters))
        .where(TaskRun.name == task_name)
        .order_by(TaskRun.id.desc())
        .limit(limit)
    )
    return list(reversed(session.scalars(query).all()))


def find_task_names(session: Session) -> Sequence[tuple[str, int]]:
    """Every task name with how many records it has, by name."""
    query = (
        select(TaskRecord.name, func.count(TaskRecord.id))
        .where(TaskRecord.name.is_not(None))
        .group_by(TaskRecord.name)
        .order_by(TaskRecord.name)
    )
    return [(str(name), int(count)) for name, count in session.execute(query)]
