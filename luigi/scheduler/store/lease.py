"""The active ``luigid``'s lease in a PostgreSQL state database: who may serve and write the state.

Several ``luigid`` processes on the same ``[scheduler] state_url`` share one row of ``luigid_lease``.
The one whose id is in it, while the row has not expired, is the active one; the others are standbys.
The holder renews the row with a conditional ``UPDATE`` in its own short transaction; a standby takes it
with the same statement once it has expired. The database's clock (``now()``) alone decides expiry, so
the hosts' clocks never matter. Each write of the state checks, in its own transaction, that the writer
still holds the lease (``fence``): an active that was paused past its lease cannot overwrite the state
its successor loaded.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError

from luigi.scheduler.store.base import StateStoreError

__all__ = ["LEASE_NAME", "LeaseLostError", "LeaseTable", "LeaseView"]

logger = logging.getLogger("luigi.scheduler")

LEASE_NAME = "active"
_NOW = "EXTRACT(EPOCH FROM now())"
# The row exists from the first look on (expired, so whoever asks first takes it).
_CREATE_ROW = text(
    "INSERT INTO luigid_lease (name, holder, address, expires) VALUES (:name, '', NULL, 0) "
    "ON CONFLICT (name) DO NOTHING"
)
# Renew our own lease, or take one that has run out: one statement, so two standbys never both win.
_TAKE = text(
    f"UPDATE luigid_lease SET holder = :holder, address = :address, expires = {_NOW} + :seconds "
    f"WHERE name = :name AND (holder = :holder OR expires <= {_NOW}) RETURNING expires - {_NOW}"
)
_LOOK = text(f"SELECT holder, address, expires - {_NOW} FROM luigid_lease WHERE name = :name")
_RELEASE = text(f"UPDATE luigid_lease SET expires = {_NOW} - 1 WHERE name = :name AND holder = :holder")
# FOR SHARE: a standby's taking UPDATE waits until the write that checked this has committed.
_FENCE = text(
    f"SELECT 1 FROM luigid_lease WHERE name = :name AND holder = :holder AND expires > {_NOW} FOR SHARE"
)


class LeaseLostError(StateStoreError):
    """This luigid no longer holds the active lease: it must not write the state (a standby took over)."""


@dataclass(frozen=True)
class LeaseView:
    """One look at the lease: whether we hold it now, for how many seconds more (on the database's
    clock), and who holds it otherwise (their id and address, when known)."""

    held: bool
    seconds_left: float
    holder: str | None
    address: str | None


class LeaseTable:
    """The lease row on one engine, for the luigid ``holder`` reachable at ``address``.

    Its calls are blocking database round trips, made from one thread at a time (the standby's keeper);
    ``fence`` runs inside the state store's own write transaction.
    """

    def __init__(self, engine: Engine, holder: str, address: str | None, seconds: float) -> None:
        if engine.dialect.name != "postgresql":
            raise StateStoreError(
                f"A standby luigid needs the state in PostgreSQL ([scheduler] state_url), not "
                f"{engine.dialect.name}"
            )
        self.engine = engine
        self.holder = holder
        self.address = address
        self.seconds = float(seconds)
        self._conn: Connection | None = None
        self._lock = threading.Lock()

    def take(self) -> LeaseView:
        """Renew our lease, or take it if it ran out; else who holds it. DBAPIError when unreachable."""
        params = {"name": LEASE_NAME, "holder": self.holder, "address": self.address, "seconds": self.seconds}
        with self._lock, self._transaction() as conn:
            conn.execute(_CREATE_ROW, {"name": LEASE_NAME})
            left = conn.execute(_TAKE, params).scalar()
            if left is not None:
                return LeaseView(True, float(left), self.holder, self.address)
            row = conn.execute(_LOOK, {"name": LEASE_NAME}).one()
        holder, address, left = row
        return LeaseView(False, float(left), holder or None, address)

    def release(self) -> None:
        """Let the lease run out now (a clean stop), so a standby takes over at its next look."""
        with self._lock:
            try:
                with self._transaction() as conn:
                    conn.execute(_RELEASE, {"name": LEASE_NAME, "holder": self.holder})
            except DBAPIError as exc:  # it runs out by itself within the lease's length anyway
                logger.warning("Could not release the active luigid lease (it expires by itself): %s", exc)

    def fence(self, conn: Connection) -> None:
        """Inside a state write's transaction: LeaseLostError unless we still hold an unexpired lease."""
        if conn.execute(_FENCE, {"name": LEASE_NAME, "holder": self.holder}).first() is None:
            raise LeaseLostError(
                "This luigid is no longer the active one (its lease ran out or was taken over); the change "
                "was not written. Workers follow the active luigid."
            )

    def close(self) -> None:
        """Close the lease's connection."""
        with self._lock:
            self._drop()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Connection]:
        if self._conn is None:
            self._conn = self.engine.connect()
        try:
            with self._conn.begin():
                yield self._conn
        except DBAPIError:
            self._drop()  # a broken connection is opened again at the next look
            raise

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(DBAPIError):
                conn.close()
