"""Task history: where the scheduler reports task transitions, e.g. to a database (see db_task_history).

The scheduler passes its own task records, which have ``id``, ``family``, ``params`` and ``status``.
A history also answers the queries of the history pages; the ones here are those of a history that
records nothing, so every page works (empty) whichever history the scheduler has.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class HistoryStatus:
    """How recording is going: what waits to be written, what was written, and what was lost and why.

    Attributes:
        recording: whether anything is recorded at all (False for ``NopHistory``).
        where: the database, password hidden (None when not recording).
        buffered: events waiting to be written.
        written: events written since start.
        dropped: events not recorded because the buffer was full during an outage.
        rejected: events the database refused (the log says why).
        outage_since: when the database stopped answering (epoch seconds), None while it answers.
        last_error: the last database error, for the pages.
    """

    recording: bool
    where: str | None = None
    buffered: int = 0
    written: int = 0
    dropped: int = 0
    rejected: int = 0
    outage_since: float | None = None
    last_error: str | None = None

    @property
    def lost(self) -> int:
        """Events that will never be in the database."""
        return self.dropped + self.rejected


class StoredTask:
    """A task as a history records it (Luigi's name): its record, status, host; ``record_id`` once saved."""

    def __init__(self, task: Any, status: str, host: str | None = None) -> None:
        self._task = task
        self.status = status
        self.host = host
        self.record_id: int | None = None

    @property
    def task_family(self) -> str:
        return str(self._task.family)

    @property
    def parameters(self) -> Any:
        return self._task.params


class TaskHistory(abc.ABC):
    """Receives PENDING, RUNNING and finished (DONE or FAILED) events for every scheduled task."""

    @abc.abstractmethod
    def task_scheduled(self, task: Any) -> None:
        """The task was reported PENDING."""

    @abc.abstractmethod
    def task_started(self, task: Any, worker_host: str | None) -> None:
        """The task was granted to a worker on ``worker_host``."""

    @abc.abstractmethod
    def task_finished(self, task: Any, successful: bool) -> None:
        """The task ended: DONE when ``successful``, else FAILED."""

    # -- lifecycle: a history that writes in the background says when everything is written ------------

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every event reported so far is stored; False if ``timeout`` passed first."""
        return True

    def close(self, timeout: float | None = None) -> None:  # noqa: B027 - optional, a no-op by default
        """Store what can be stored, then release the database."""

    def status(self) -> HistoryStatus:
        """How recording is going (for the pages and the logs)."""
        return HistoryStatus(recording=False)

    # -- queries (the history pages); a history that records nothing finds nothing ---------------------

    def find_all_by_parameters(
        self, task_name: str, session: Any = None, **task_params: Any
    ) -> Sequence[Any]:
        """Recorded tasks named ``task_name`` whose parameters include ``task_params``, newest first."""
        return []

    def find_all_by_name(self, task_name: str, session: Any = None) -> Sequence[Any]:
        """Recorded tasks named ``task_name``, newest first."""
        return []

    def find_latest_runs(self, session: Any = None) -> Sequence[Any]:
        """Tasks with an event in the last 24 hours, the most recently active first."""
        return []

    def find_all_runs(self, session: Any = None) -> Sequence[Any]:
        """Every recorded task."""
        return []

    def find_all_events(self, session: Any = None) -> Sequence[Any]:
        """Every recorded event."""
        return []

    def find_task_by_id(self, id: int, session: Any = None) -> Any:
        """The recorded task with this database id, or None."""
        return None

    def find_task_by_task_id(self, task_id: str, session: Any = None) -> Any:
        """The latest record of the task with this luigi task id, or None."""
        return None

    def find_runs_by_name(self, task_name: str, limit: int = 500) -> Sequence[Any]:
        """The last ``limit`` runs (attempts) of tasks named ``task_name``, oldest first."""
        return []

    def find_task_names(self) -> Sequence[tuple[str, int]]:
        """Every recorded task name with its number of records, by name."""
        return []

    def find_records_by_parameters(
        self, task_name: str, task_params: dict[str, Any], limit: int
    ) -> Sequence[Any]:
        """Like ``find_all_by_parameters`` (parameters as a dict), at most ``limit`` records."""
        return list(self.find_all_by_parameters(task_name, None, **task_params))[:limit]

    def find_latest_records(self, limit: int) -> Sequence[Any]:
        """Like ``find_latest_runs``, at most ``limit`` records."""
        return list(self.find_latest_runs())[:limit]


class NopHistory(TaskHistory):
    """History that records nothing (``[scheduler] record_task_history = false``)."""

    def task_scheduled(self, task: Any) -> None:
        """Ignored."""

    def task_started(self, task: Any, worker_host: str | None) -> None:
        """Ignored."""

    def task_finished(self, task: Any, successful: bool) -> None:
        """Ignored."""
