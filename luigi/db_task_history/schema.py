"""The task-history tables: Luigi's ``tasks``, ``task_parameters``, ``task_events``, and our additions.

Luigi's three tables keep their names and columns, so a database Luigi wrote can be opened and appended
to. What Luigi did not record (duration, host, worker, error, exception type, retry number) lives in the
added ``task_runs`` table, one row per attempt; ``luigi_history_schema`` numbers the applied migrations.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, Float, ForeignKey, Index, Integer, String, Text, desc
from sqlalchemy.orm import DeclarativeBase, Mapped, attribute_keyed_dict, mapped_column, relationship

# Column widths of Luigi's schema: values are cut to fit, so PostgreSQL never rejects a row for length.
TASK_ID_LENGTH = 200
NAME_LENGTH = 128
HOST_LENGTH = 128
EVENT_NAME_LENGTH = 20
WORKER_LENGTH = 255
EXCEPTION_TYPE_LENGTH = 255


class Base(DeclarativeBase):
    """The declarative base of every history table."""


class TaskParameter(Base):
    """One parameter of a recorded task (``task_parameters``)."""

    __tablename__ = "task_parameters"

    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"), primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)
    value: Mapped[str | None] = mapped_column(Text)

    def __repr__(self) -> str:
        return f"TaskParameter(task_id={self.task_id}, name={self.name!r}, value={self.value!r})"


class TaskEvent(Base):
    """One status change of a recorded task (``task_events``): PENDING, RUNNING, DONE or FAILED."""

    __tablename__ = "task_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"), index=True)
    event_name: Mapped[str] = mapped_column(String(EVENT_NAME_LENGTH))
    ts: Mapped[datetime] = mapped_column(DateTime, index=True, nullable=False)

    def __repr__(self) -> str:
        return f"TaskEvent(task_id={self.task_id}, event_name={self.event_name!r}, ts={self.ts!r})"


class TaskRecord(Base):
    """One scheduled task (``tasks``): its parameters, its events (newest first) and its runs (ours)."""

    __tablename__ = "tasks"

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[str | None] = mapped_column(String(TASK_ID_LENGTH), index=True)
    name: Mapped[str | None] = mapped_column(String(NAME_LENGTH), index=True)
    host: Mapped[str | None] = mapped_column(String(HOST_LENGTH))

    parameters: Mapped[dict[str, TaskParameter]] = relationship(
        collection_class=attribute_keyed_dict("name"), cascade="all, delete-orphan"
    )
    events: Mapped[list[TaskEvent]] = relationship(
        order_by=[TaskEvent.ts.desc(), TaskEvent.id.desc()], cascade="all, delete-orphan"
    )
    runs: Mapped[list[TaskRun]] = relationship(
        order_by=lambda: desc(TaskRun.id), cascade="all, delete-orphan", back_populates="task"
    )

    def __repr__(self) -> str:
        return f"TaskRecord(id={self.id}, task_id={self.task_id!r}, name={self.name!r}, host={self.host!r})"


class TaskRun(Base):
    """One attempt at running a task (``task_runs``, ours): from RUNNING to DONE or FAILED.

    ``status`` is RUNNING while the attempt is open. ``retry`` counts the failed attempts just before
    this one (0 for a first try). A failure reported without a start has no ``started``.
    """

    __tablename__ = "task_runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"), index=True)
    name: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    status: Mapped[str] = mapped_column(String(EVENT_NAME_LENGTH))
    retry: Mapped[int] = mapped_column(Integer, default=0)
    started: Mapped[datetime | None] = mapped_column(DateTime)
    finished: Mapped[datetime | None] = mapped_column(DateTime)
    duration: Mapped[float | None] = mapped_column(Float)
    host: Mapped[str | None] = mapped_column(String(HOST_LENGTH))
    worker: Mapped[str | None] = mapped_column(String(WORKER_LENGTH))
    exception_type: Mapped[str | None] = mapped_column(String(EXCEPTION_TYPE_LENGTH))
    error: Mapped[str | None] = mapped_column(Text)

    task: Mapped[TaskRecord] = relationship(back_populates="runs")

    __table_args__ = (
        Index("ix_task_runs_name_started", "name", "started"),
        Index("ix_task_runs_finished", "finished"),
    )

    @property
    def when(self) -> datetime | None:
        """When the attempt started, or ended for one that never reported a start."""
        return self.started or self.finished

    def __repr__(self) -> str:
        return f"TaskRun(id={self.id}, name={self.name!r}, status={self.status!r}, retry={self.retry})"


class SchemaVersion(Base):
    """One applied migration (``luigi_history_schema``): the highest number is the schema version."""

    __tablename__ = "luigi_history_schema"

    version: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    description: Mapped[str] = mapped_column(String(200))
    applied_at: Mapped[datetime] = mapped_column(DateTime)


tasks = TaskRecord.__table__
task_parameters = TaskParameter.__table__
task_events = TaskEvent.__table__
task_runs = TaskRun.__table__
schema_versions = SchemaVersion.__table__
