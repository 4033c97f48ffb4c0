"""Errors of the database task history; ``luigid`` reports them in one line and exits (StateStoreError)."""

from __future__ import annotations

from luigi.scheduler.store.base import StateStoreError


class TaskHistoryError(StateStoreError):
    """The task-history database cannot be used as configured; the message names it and the fix."""


class HistorySchemaError(TaskHistoryError):
    """The task-history database has a schema this luigi cannot use (newer, or not a history schema)."""
