"""The client's one retry policy: capped exponential backoff, and optionally riding out a restart.

A request that got no answer, or a 5xx one, is asked again up to ``[core] rpc_retry_attempts`` times,
waiting at most ``[core] rpc_retry_wait`` seconds between attempts. With a ride-out
(``[worker] scheduler_unreachable_timeout``, which ``luigi.build`` gives the client of its worker) it then
keeps asking, at most ``MAX_BACKOFF`` seconds apart (or ``rpc_retry_wait``, if lower, so that a worker can
be back within a short ``worker_disconnect_delay`` of a restart), until the scheduler has been unreachable
that long:
Luigi's worker exits at once instead (a ride-out of 0). Answers refusing a request are never retried.

Only a scheduler that has answered during this run (any HTTP answer, a 5xx too) is ridden out: one that
never did is most likely a wrong URL or a luigid that is not running, so the client gives up after the
ordinary attempts (no later than Luigi's client would) with ``NoSchedulerError``, whose one line names
the URL and the fix.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from luigi.rpc.errors import NoSchedulerError, RPCError, SchedulerHTTPError, TransientError, describe
from luigi.rpc.hooks import rpc_logger

__all__ = [
    "MAX_BACKOFF",
    "RetryPolicy",
    "RetrySettings",
    "checked_ride_out",
    "is_unreachable",
    "real_sleep",
    "retry_delay",
]

T = TypeVar("T")

_FIRST_RETRY_WAIT = 1.0  # seconds; doubled after each failed attempt, up to the cap
MAX_BACKOFF = 30.0  # seconds between ride-out attempts at most, however long the scheduler stays away


def retry_delay(attempt: int, cap: float, rng: random.Random) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1-based): doubling from 1 s, at most ``cap``.

    The wait is drawn from the upper half of that ceiling so that many workers retrying after one
    scheduler restart do not all come back in the same instant.
    """
    if cap <= 0:
        return 0.0
    ceiling = min(cap, _FIRST_RETRY_WAIT * 2 ** (attempt - 1))
    return rng.uniform(ceiling / 2, ceiling)


def is_unreachable(error: BaseException) -> bool:
    """Whether ``error`` means the scheduler did not answer (or answered 5xx), not that it refused."""
    if not isinstance(error, RPCError):
        return False
    if error.status is not None:
        return error.status >= 500
    import http.client  # here: the worker imports this module without loading the HTTP client

    return isinstance(error.sub_exception, (OSError, http.client.HTTPException))


def checked_ride_out(timeout: float) -> float:
    """``timeout`` as seconds to ride out, or ValueError naming the option when it is negative."""
    if timeout < 0:
        raise ValueError(f"[worker] scheduler_unreachable_timeout must be 0 or more seconds, got {timeout!r}")
    return float(timeout)


def real_sleep(seconds: float) -> None:
    time.sleep(seconds)  # looked up at call time so that patching ``time.sleep`` reaches it


class RetrySettings(Protocol):
    """Where a policy reads, at each request, how many attempts, the cap of the wait between them and
    whether to log them: the client's attributes of Luigi's names, which users' tests set."""

    _rpc_retry_attempts: int
    _rpc_retry_wait: float
    _rpc_log_retries: bool


@dataclass
class RetryPolicy:
    """How often, and how long, one request is asked again while the scheduler does not answer it.

    ``sleep``, ``clock`` and ``rng`` are injectable so tests wait for nothing.
    """

    url: str  # named in messages
    settings: RetrySettings
    ride_out: float = 0.0  # seconds to keep asking an unreachable scheduler after the attempts (0: none)
    sleep: Callable[[float], None] = real_sleep
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)
    answered: bool = False  # whether the scheduler has answered at all (HTTP, any status) during this run

    @property
    def attempts(self) -> int:
        """Attempts before giving up (or riding out), at least one."""
        return max(1, int(self.settings._rpc_retry_attempts))

    @property
    def wait(self) -> float:
        """The cap of the backoff between ordinary attempts, in seconds."""
        return float(self.settings._rpc_retry_wait)

    def run(self, what: str, attempt: Callable[[], T], ride_out: bool = True) -> T:
        """``attempt()``'s result; it raises TransientError for a failure worth asking again.

        Raises RPCError once the attempts (and, when ``ride_out``, the ride-out) are used up, or
        NoSchedulerError when the scheduler has never answered during this run.
        """
        failure: BaseException | None = None
        started: float | None = None  # when the first attempt failed
        attempts = self.attempts
        for number in range(1, attempts + 1):
            try:
                return self._answer_of(attempt)
            except TransientError as exc:
                failure = exc.cause
                if started is None:
                    started = self.clock()
            if number < attempts:
                self._wait_before_retry(number, what, failure)
        if not self.answered:
            raise NoSchedulerError(self.url, attempts, failure)
        error = self._gave_up(failure)
        if not ride_out or self.ride_out <= 0 or started is None:
            raise error
        return self._ride_out(what, attempt, error, started)

    def _answer_of(self, attempt: Callable[[], T]) -> T:
        """``attempt()``, noting whether an HTTP answer came back: any answer, a 5xx too (luigid that
        cannot save its state answers 503 until the disk is freed), shows a server is there."""
        try:
            result = attempt()
        except TransientError as exc:
            if isinstance(exc.cause, SchedulerHTTPError):
                self.answered = True
            raise
        except RPCError:  # an answer refusing the request: the scheduler is there
            self.answered = True
            raise
        self.answered = True
        return result

    def _ride_out(self, what: str, attempt: Callable[[], T], error: RPCError, started: float) -> T:
        """Keep asking, the backoff still growing, until the scheduler answers or has been unreachable
        for ``ride_out`` seconds since the first failed attempt."""
        rpc_logger().warning(
            "Scheduler unreachable during %s (%s); retrying for up to %g s", what, error, self.ride_out
        )
        number = self.attempts - 1
        while self.clock() - started < self.ride_out:
            number += 1
            self.sleep(retry_delay(number, self._ride_out_cap(), self.rng))
            try:
                result = self._answer_of(attempt)
            except TransientError as exc:
                error = self._gave_up(exc.cause)
                continue
            back_after = self.clock() - started
            rpc_logger().info("Scheduler reachable again after %.1f s; resuming %s", back_after, what)
            return result
        rpc_logger().error("Scheduler still unreachable after %g s; giving up", self.clock() - started)
        raise error

    def _ride_out_cap(self) -> float:
        """The longest wait between ride-out attempts: ``MAX_BACKOFF``, or the ordinary cap if lower."""
        return min(MAX_BACKOFF, self.wait) if self.wait > 0 else MAX_BACKOFF

    def _gave_up(self, failure: BaseException | None) -> RPCError:
        status = failure.status if isinstance(failure, SchedulerHTTPError) else None
        return RPCError(
            f"Errors ({self.attempts} attempts) when connecting to remote scheduler {self.url!r}: "
            f"{describe(failure)}",
            failure,
            status=status,
        )

    def _wait_before_retry(self, attempt: int, what: str, failure: BaseException | None) -> None:
        delay = retry_delay(attempt, self.wait, self.rng)
        if self.settings._rpc_log_retries:
            rpc_logger().warning(
                "Failed connecting to remote scheduler %r (%s, attempt %d of %d): %s; retrying in %.1f s",
                self.url,
                what,
                attempt,
                self.attempts,
                describe(failure),
                delay,
            )
        self.sleep(delay)
