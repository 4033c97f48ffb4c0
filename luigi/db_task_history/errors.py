"""Errors of the database task history; ``luigid`` reports them in one line and exits (StorageError)."""

from __future__ import annotations

from luigi.database import StorageError


class TaskHistoryError(StorageError):
    """The task-history database cannot be used as configured; the message names it and the fix."""


class HistorySchemaError(TaskHistoryError):
    """The task-history database has a schema this luigi cannot use (newer, or not a history schema)."""
