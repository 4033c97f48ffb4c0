"""Durable scheduler state: the ``StateStore`` interface, ``NullStore`` and the SQLAlchemy ``SqlStore``.

``luigid`` builds ``Scheduler(store=open_store_from_config())`` and calls ``scheduler.flush()`` after
each request (a SQLite file journals the changes, and ``scheduler.checkpoint()`` folds the journal into
it); the in-process local scheduler keeps the ``NullStore`` (nothing tracked, nothing written).
SQLAlchemy is imported only when a ``SqlStore`` is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from luigi.scheduler.store.base import (
    CorruptStateError,
    NullStore,
    StateStore,
    StateStoreError,
    StateVersionError,
)

if TYPE_CHECKING:
    from luigi.scheduler.settings import SchedulerConfig
    from luigi.scheduler.store.sql import SqlStore

__all__ = [
    "CorruptStateError",
    "NullStore",
    "SqlStore",
    "StateStore",
    "StateStoreError",
    "StateVersionError",
    "open_store_from_config",
]


def open_store_from_config(state_path: str | None = None, config: SchedulerConfig | None = None) -> SqlStore:
    """The durable store for ``luigid``: SQLite at ``state_path`` with the extension ``.sqlite``.

    Without ``state_path``, ``[scheduler] state_url`` (a SQLAlchemy URL) is used when set, else
    ``[scheduler] state_path``. The database itself is opened by the first ``Scheduler.load()``.
    """
    from luigi.scheduler.store.sql import SqlStore

    return SqlStore.from_config(state_path, config)


def __getattr__(name: str) -> Any:
    if name == "SqlStore":
        from luigi.scheduler.store.sql import SqlStore

        return SqlStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
