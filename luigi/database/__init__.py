"""What the scheduler's state store and the task history share: the storage error, SQLite engines set up
alike, and one runner of numbered schema migrations. Neither side imports the other.

Only ``StorageError`` is imported eagerly: the rest needs SQLAlchemy, which ``import luigi`` (through the
scheduler's store interface) must not pay for until a database is actually opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from luigi._lazy import lazy_names
from luigi.database.errors import StorageError

if TYPE_CHECKING:
    from luigi.database.migrations import Migration, run_migrations
    from luigi.database.sqlite import SQLITE_BUSY_TIMEOUT_MS, sqlite_engine

__all__ = ["SQLITE_BUSY_TIMEOUT_MS", "Migration", "StorageError", "run_migrations", "sqlite_engine"]

_LAZY = {
    "Migration": "luigi.database.migrations",
    "run_migrations": "luigi.database.migrations",
    "SQLITE_BUSY_TIMEOUT_MS": "luigi.database.sqlite",
    "sqlite_engine": "luigi.database.sqlite",
}


__getattr__ = lazy_names(__name__, _LAZY, globals())
