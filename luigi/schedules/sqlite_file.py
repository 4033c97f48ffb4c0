"""What luigid's SQLite files beside its state share: open (created, or upgraded by their migrations),
close, and errors that name the file (the schedules' runs, the backfills)."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from luigi.database import Migration, StorageError, run_migrations, sqlite_engine

__all__ = ["SqliteFile", "first_line"]


def first_line(exc: BaseException) -> str:
    """The first line of a database error (the driver's own message when SQLAlchemy wraps one)."""
    original = getattr(exc, "orig", None)
    return str(original if original is not None else exc).splitlines()[0]


class SqliteFile(abc.ABC):
    """One SQLite file (``path``), opened by ``open()``; every error is a StorageError naming it."""

    what = "state"  # how messages name the file: "the <what> <path>"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._engine: Engine | None = None
        self._conn: Connection | None = None

    @property
    def is_open(self) -> bool:
        return self._conn is not None

    @property
    @abc.abstractmethod
    def migrations(self) -> Sequence[Migration]:
        """The file's migrations, oldest first."""

    @abc.abstractmethod
    def _version(self) -> int:
        """The schema version the open file has (0: new)."""

    @abc.abstractmethod
    def _record_version(self, conn: Connection, migration: Migration) -> None:
        """Record that ``migration`` has been applied."""

    def open(self) -> None:
        """Create or upgrade the file; StorageError naming the file when it cannot be used."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._engine = sqlite_engine(f"sqlite:///{self.path}")
            self._conn = self._engine.connect()
            with self._conn.begin():
                found = self._version()
                run_migrations(self._conn, self.migrations, found, self._too_new, self._record_version)
        except (OSError, SQLAlchemyError) as exc:
            self.close()
            raise StorageError(f"Cannot open the {self.what} {self.path}: {first_line(exc)}") from exc

    def close(self) -> None:
        """Release the file (safe to call twice)."""
        if self._conn is not None:
            self._conn.close()
        if self._engine is not None:
            self._engine.dispose()
        self._conn = self._engine = None

    def _connection(self) -> Connection:
        if self._conn is None:
            raise StorageError(f"The {self.what} {self.path} is not open")
        return self._conn

    def _too_new(self, found: int, latest: int) -> StorageError:
        return StorageError(
            f"The {self.what} {self.path} has schema version {found}, but this luigi reads versions up "
            f"to {latest}. Upgrade luigi, or move the file aside."
        )
