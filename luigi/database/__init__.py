"""What the scheduler's state store and the task history share: the storage error, SQLite engines set up
alike, and one runner of numbered schema migrations. Neither side imports the other."""

from luigi.database.errors import StorageError
from luigi.database.migrations import Migration, run_migrations
from luigi.database.sqlite import SQLITE_BUSY_TIMEOUT_MS, sqlite_engine

__all__ = ["SQLITE_BUSY_TIMEOUT_MS", "Migration", "StorageError", "run_migrations", "sqlite_engine"]
