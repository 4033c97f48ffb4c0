"""The interface between the scheduler and where its state is kept, and the store that keeps nothing."""

from __future__ import annotations

import abc
from typing import ClassVar

from luigi.database import StorageError
from luigi.scheduler.model.changes import ChangeSet
from luigi.scheduler.model.state import SchedulerState


class StateStoreError(StorageError):
    """The scheduler state cannot be opened, read or written; the message names the place and the fix."""


class CorruptStateError(StateStoreError):
    """The stored state is damaged or not ours (wrong format, wrong tables, rows of the wrong shape)."""


class StateVersionError(StateStoreError):
    """The stored state was written by a newer version of luigi than this one."""


class StateStore(abc.ABC):
    """Where a scheduler keeps its state across restarts.

    The scheduler marks what it changes (``SchedulerState.changes``) when ``tracks_changes`` is true,
    and hands the marks to ``record_changes`` at each ``Scheduler.flush()``.
    """

    tracks_changes: ClassVar[bool] = True

    @abc.abstractmethod
    def load(self, state: SchedulerState) -> None:
        """Replace the state's records (tasks, workers, resources, batchers, paused) with the stored ones."""

    @abc.abstractmethod
    def record_changes(self, state: SchedulerState, changes: ChangeSet) -> None:
        """Make durable, all or nothing, the current persisted fields of every record in ``changes``."""

    def fold(self, due_only: bool = False, limit: int | None = None) -> None:  # noqa: B027 - no journal: nothing to do
        """Write changes kept in a journal into the database: all, at most ``limit`` keys, or with
        ``due_only`` a short slice if enough are waiting."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release files and connections (the store is not used afterwards)."""


class NullStore(StateStore):
    """Keeps nothing: the in-process local scheduler, where no change tracking is done at all."""

    tracks_changes: ClassVar[bool] = False

    def load(self, state: SchedulerState) -> None:
        """Nothing to load: the state is left as it is."""

    def record_changes(self, state: SchedulerState, changes: ChangeSet) -> None:
        """Nothing to write."""

    def close(self) -> None:
        """Nothing to release."""
