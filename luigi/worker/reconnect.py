"""Riding out a scheduler restart: retry calls that found the scheduler unreachable, for a while.

Luigi's worker exits when the scheduler cannot be reached; here it backs off and asks again for up to
``[worker] scheduler_unreachable_timeout`` seconds (0 restores Luigi's give-up-at-once behaviour).
"""

from __future__ import annotations

import http.client
import logging
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from luigi.rpc import RPCError, retry_delay

logger = logging.getLogger("luigi-interface")

T = TypeVar("T")

MAX_BACKOFF = 30.0  # seconds between attempts at most, however long the scheduler stays away

# Looked up at call time so that tests can replace them without waiting for real.
sleep: Callable[[float], None] = time.sleep
monotonic: Callable[[], float] = time.monotonic


def is_unreachable(error: BaseException) -> bool:
    """Whether ``error`` means the scheduler did not answer (or answered 5xx), not that it refused."""
    if not isinstance(error, RPCError):
        return False
    if error.status is not None:
        return error.status >= 500
    return isinstance(error.sub_exception, (OSError, http.client.HTTPException))


class SchedulerRetrier:
    """Calls the scheduler, retrying with capped, jittered backoff while it is unreachable.

    Past ``timeout`` seconds of failures (or at once when ``timeout`` is 0) the RPCError is raised.
    """

    def __init__(self, timeout: float, rng: random.Random | None = None) -> None:
        if timeout < 0:
            raise ValueError(
                f"[worker] scheduler_unreachable_timeout must be 0 or more seconds, got {timeout!r}"
            )
        self.timeout = float(timeout)
        self._rng = rng if rng is not None else random.Random()

    def call(self, what: str, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``function(*args, **kwargs)``, retried while the scheduler is unreachable; ``what`` names it."""
        started: float | None = None
        attempt = 0
        while True:
            try:
                result = function(*args, **kwargs)
            except RPCError as exc:
                if not is_unreachable(exc) or self.timeout <= 0:
                    raise
                now = monotonic()
                if started is None:
                    started = now
                    logger.warning(
                        "Scheduler unreachable during %s (%s); retrying for up to %g s",
                        what,
                        exc,
                        self.timeout,
                    )
                if now - started >= self.timeout:
                    logger.error("Scheduler still unreachable after %g s; giving up", now - started)
                    raise
                attempt += 1
                sleep(retry_delay(attempt, MAX_BACKOFF, self._rng))
                continue
            if started is not None:
                logger.info(
                    "Scheduler reachable again after %.1f s; resuming %s", monotonic() - started, what
                )
            return result
