"""A graceful stop: what SIGTERM and SIGINT mean to a running worker.

The first signal stops the worker asking for work and gives its running tasks ``[worker] shutdown_grace``
seconds to finish (as a container runtime gives a container); then, or at a second signal, the tasks
still running are killed with their process trees and reported FAILED with ``STOPPED_REASON``, so the
scheduler can hand them out again at once. SIGUSR1 keeps Luigi's meaning (finish, take nothing new) and is
not handled here.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

logger = logging.getLogger("luigi-interface")

STOPPED_REASON = "worker stopped"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class GracefulStop:
    """The stop state of one ``Worker.run``: when the grace ends, and the signal handlers that set it.

    ``on_first()`` is called at the first signal (stop asking for work); ``on_now()`` when the grace is
    over or a second signal came (kill now; it may raise into an in-process task, in the main thread).
    """

    def __init__(self, grace: float, on_first: Callable[[], None], on_now: Callable[[], None]) -> None:
        self.grace = max(0.0, grace)
        self._on_first = on_first
        self._on_now = on_now
        self._signals = 0
        self._deadline: float | None = None
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._active = False

    @property
    def requested(self) -> bool:
        """Whether a stop signal came."""
        return self._deadline is not None

    def is_due(self) -> bool:
        """Whether the running tasks must be killed now (the grace is over, or a second signal came)."""
        return self._deadline is not None and time.monotonic() >= self._deadline

    def remaining(self, longest: float) -> float:
        """How long the loop may wait: ``longest``, or less when the grace ends sooner."""
        if self._deadline is None:
            return longest
        return max(0.0, min(longest, self._deadline - time.monotonic()))

    @contextmanager
    def handling_signals(self, install: bool) -> Iterator[None]:
        """Handle SIGTERM and SIGINT during the block (``install`` False, or not the main thread: not)."""
        previous = self._install() if install else {}
        self._active = True
        try:
            yield
        finally:
            with self._lock:
                self._active = False
                if self._timer is not None:
                    self._timer.cancel()
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _install(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        return {signum: signal.signal(signum, self.handle_signal) for signum in STOP_SIGNALS}

    def handle_signal(self, signum: int, frame: FrameType | None) -> None:
        """First signal: stop taking work, kill after the grace; second: kill now."""
        self._signals += 1
        name = signal.Signals(signum).name
        if self._signals == 1 and self.grace > 0:
            logger.info(
                "Received %s: taking no new work; running tasks have %ss to finish (send again: stop now)",
                name,
                self.grace,
            )
            self._deadline = time.monotonic() + self.grace
            self._start_timer()
            self._on_first()
            return
        logger.info("Received %s: stopping now, killing the running tasks", name)
        self._deadline = time.monotonic()
        self._on_first()
        self._on_now()

    def _start_timer(self) -> None:
        """When the grace ends, signal the main thread (a task running in it is interrupted there)."""
        main = threading.main_thread().ident
        if main is None:
            return

        def grace_over() -> None:
            with self._lock:
                if self._active:
                    signal.pthread_kill(main, signal.SIGTERM)

        self._timer = threading.Timer(self.grace, grace_over)
        self._timer.daemon = True
        self._timer.start()
