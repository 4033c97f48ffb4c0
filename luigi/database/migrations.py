"""Numbered schema migrations: each takes a database from version N-1 to N, in the caller's transaction."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection


@dataclass(frozen=True)
class Migration:
    """One numbered step from the schema ``version - 1`` to ``version``."""

    version: int
    description: str
    apply: Callable[[Connection], None]


def run_migrations(
    conn: Connection,
    migrations: Sequence[Migration],
    found: int,
    too_new: Callable[[int, int], Exception],
    record: Callable[[Connection, Migration], None],
) -> int:
    """Apply every migration above version ``found``, in order, and ``record`` each; returns ``found``.

    Raises ``too_new(found, latest)`` when the database was written by a newer luigi (nothing is changed).
    """
    latest = migrations[-1].version
    if found > latest:
        raise too_new(found, latest)
    for migration in migrations:
        if migration.version > found:
            migration.apply(conn)
            record(conn, migration)
    return found
