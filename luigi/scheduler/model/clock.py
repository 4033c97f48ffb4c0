"""The scheduler's only source of time: a callable returning seconds since the epoch."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

Clock = Callable[[], float]


def system_time() -> float:
    """Wall-clock seconds, resolved at call time so patching `luigi.scheduler.time` or `time.time` applies."""
    package = sys.modules.get("luigi.scheduler")
    time_module = getattr(package, "time", time) if package is not None else time
    return float(time_module.time())


class ManualClock:
    """A clock that moves only when told to: tests drive retry, removal and disconnect delays with it."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = float(start)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` and return the new time."""
        self.now += seconds
        return self.now

    def set(self, when: float) -> None:
        """Jump to an absolute time (backwards too, as NTP can)."""
        self.now = float(when)
