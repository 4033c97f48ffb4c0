"""The state store under trouble: mutating calls answer 503 while it cannot be written; reads go on.

When a flush fails (disk full, read-only volume, database gone), the changes stay marked in memory and
the call that made them answers 503, so the client rides it out as it rides out a restart. Until a flush
works again, a mutating call first retries the pending flush and, if that fails, is refused with 503
before it changes anything, so memory never runs far ahead of the disk. Reads answer as usual. The cause
is logged when it first appears (or changes) and when writes work again; the server's timers keep
retrying, so luigid resumes by itself. Only a change that was flushed is ever acknowledged.
"""

from __future__ import annotations

import logging
import weakref

from luigi.server.errors import ClientError
from luigi.server.served import ServedScheduler

logger = logging.getLogger("luigi.server")

UNAVAILABLE = 503


class StoreHealth:
    """Whether the last flush of one scheduler failed, and with what (to log each cause once)."""

    def __init__(self) -> None:
        self.failure: str | None = None

    def failed(self, exc: BaseException) -> None:
        cause = f"{type(exc).__name__}: {exc}"
        if cause != self.failure:
            logger.error("luigid cannot save its state (%s); refusing changes with 503 until it can", cause)
        self.failure = cause

    def worked(self) -> None:
        if self.failure is not None:
            logger.info("luigid can save its state again; accepting changes")
        self.failure = None


_HEALTH: weakref.WeakKeyDictionary[ServedScheduler, StoreHealth] = weakref.WeakKeyDictionary()


def health_of(scheduler: ServedScheduler) -> StoreHealth:
    """The store health of ``scheduler`` (created on first use)."""
    health = _HEALTH.get(scheduler)
    if health is None:
        health = _HEALTH[scheduler] = StoreHealth()
    return health


def flush(scheduler: ServedScheduler) -> bool:
    """Flush the scheduler's changes; False (logged once per cause) when they could not be saved."""
    health = health_of(scheduler)
    try:
        scheduler.flush()
    except Exception as exc:  # whatever the store raised: the changes stay marked for the next flush
        health.failed(exc)
        return False
    health.worked()
    return True


def refusal(scheduler: ServedScheduler) -> ClientError:
    """The 503 for a change that cannot be saved now."""
    cause = health_of(scheduler).failure or "unknown cause"
    return ClientError(
        UNAVAILABLE,
        f"luigid cannot save its state ({cause}); the change was not accepted. Free the disk or fix the "
        "state store; clients retry until it works again",
    )


def check_writable(scheduler: ServedScheduler) -> None:
    """Before a mutating call: while saving fails, retry the pending flush, and refuse (503) if it fails."""
    if health_of(scheduler).failure is not None and not flush(scheduler):
        raise refusal(scheduler)
