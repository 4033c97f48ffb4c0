"""When a schedule's runs are due, and what to do about them: pure functions of a ``now`` passed in.

A schedule's *slots* are the moments its cadence names (``cron`` in its timezone, or ``every`` N
seconds counted from the Unix epoch). Its *watermark* is the newest slot already decided: started,
skipped or passed over. ``decide`` looks at the slots after the watermark that are due by ``now`` and
says which one to start, which to record as skipped (a run was still going) and how far to move the
watermark; ``on_startup`` says what the slots missed while ``luigid`` was down become. Nothing here
reads the clock, starts a process or touches storage (``luigi.schedules.service`` does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Protocol
from zoneinfo import ZoneInfo

from croniter import croniter

__all__ = [
    "Cadence",
    "CronCadence",
    "Decision",
    "EveryCadence",
    "Missed",
    "ScheduleView",
    "Startup",
    "decide",
    "on_startup",
]

# Slots one decision records at most; more wait for the next tick (a loop blocked for a long time).
MAX_SLOTS_PER_DECISION = 100
# Slots counted one by one at most when saying how many were missed (a cron cadence has no formula).
MAX_COUNTED = 10_000
_TINY = timedelta(microseconds=1)


class Cadence(Protocol):
    """The slots of a schedule, as epoch seconds."""

    @property
    def description(self) -> str:
        """How the configuration said it: ``cron 0 6 * * *`` or ``every 30s``."""
        ...

    def next_after(self, moment: float) -> float:
        """The first slot strictly after ``moment``."""
        ...

    def last_at_or_before(self, moment: float) -> float:
        """The newest slot at or before ``moment``."""
        ...


@dataclass(frozen=True)
class EveryCadence:
    """``every = 30s``: the whole multiples of ``period`` seconds since 1970-01-01 00:00 UTC."""

    period: float
    spelled: str = ""

    @property
    def description(self) -> str:
        return f"every {self.spelled or f'{self.period:g}s'}"

    def next_after(self, moment: float) -> float:
        return (math.floor(moment / self.period) + 1) * self.period

    def last_at_or_before(self, moment: float) -> float:
        return math.floor(moment / self.period) * self.period


@dataclass(frozen=True)
class CronCadence:
    """``cron = 0 6 * * *``: the moments ``croniter`` finds for the expression, on ``zone``'s clock."""

    expression: str
    zone: ZoneInfo

    @property
    def description(self) -> str:
        return f"cron {self.expression}"

    def next_after(self, moment: float) -> float:
        start = datetime.fromtimestamp(moment, self.zone)
        return float(croniter(self.expression, start).get_next(datetime).timestamp())

    def last_at_or_before(self, moment: float) -> float:
        start = datetime.fromtimestamp(moment, self.zone) + _TINY  # get_prev is strict; include ``moment``
        return float(croniter(self.expression, start).get_prev(datetime).timestamp())


def slots_between(cadence: Cadence, after: float, until: float, limit: int) -> list[float]:
    """The slots ``s`` with ``after < s <= until``, oldest first, at most ``limit`` of them."""
    slots: list[float] = []
    slot = cadence.next_after(after)
    while slot <= until and len(slots) < limit:
        slots.append(slot)
        slot = cadence.next_after(slot)
    return slots


def count_between(cadence: Cadence, after: float, until: float) -> int:
    """How many slots lie in ``(after, until]`` (counted up to MAX_COUNTED for a cron cadence)."""
    if isinstance(cadence, EveryCadence):
        return max(0, math.floor(until / cadence.period) - math.floor(after / cadence.period))
    return len(slots_between(cadence, after, until, MAX_COUNTED))


@dataclass(frozen=True)
class ScheduleView:
    """What a decision needs to know about one schedule."""

    watermark: float  # every slot at or before it has been decided
    running: bool = False  # one of its runs (due or run-now) is still going
    paused: bool = False
    catching_up: bool = False  # running the slots missed while luigid was down, oldest first


@dataclass(frozen=True)
class Decision:
    """What to do now: start one slot, record others as skipped, move the watermark."""

    start: float | None = None
    skip: tuple[float, ...] = ()
    passed: float | None = None  # paused: the watermark moves here, nothing is recorded
    catching_up: bool = False

    @property
    def watermark(self) -> float | None:
        """The watermark after this decision, or None when it does not move."""
        decided = [slot for slot in (self.start, *self.skip, self.passed) if slot is not None]
        return max(decided) if decided else None


def decide(cadence: Cadence, view: ScheduleView, now: float) -> Decision:
    """What to do with the slots after the watermark that are due at ``now``.

    A paused schedule lets them pass unrecorded. While catching up, they wait their turn, oldest first,
    one run at a time. Otherwise the oldest starts when nothing runs, and every other due slot is
    recorded as skipped: a run still going is never started twice.
    """
    due = slots_between(cadence, view.watermark, now, MAX_SLOTS_PER_DECISION)
    if not due:
        return Decision(catching_up=view.catching_up and view.running)
    if view.paused:
        return Decision(passed=cadence.last_at_or_before(now))
    if view.catching_up:
        return Decision(catching_up=True) if view.running else Decision(start=due[0], catching_up=True)
    if view.running:
        return Decision(skip=tuple(due))
    return Decision(start=due[0], skip=tuple(due[1:]))


def next_wake(cadence: Cadence, view: ScheduleView) -> float:
    """When this schedule next needs a decision: its first slot after the watermark."""
    return cadence.next_after(view.watermark)


@dataclass(frozen=True)
class Missed:
    """Slots that passed while luigid was down and are not run (``catchup = false``)."""

    count: int
    first: float
    last: float


@dataclass(frozen=True)
class Startup:
    """A schedule's state when luigid starts: its watermark, whether it catches up, what it missed."""

    watermark: float
    catching_up: bool = False
    missed: Missed | None = None


def on_startup(cadence: Cadence, stored: float | None, started_at: float, catchup: bool) -> Startup:
    """What the slots between the stored watermark and ``started_at`` become.

    A schedule seen for the first time starts from ``started_at`` (nothing before it was ever due).
    With ``catchup`` the missed slots are run, oldest first; without, they are passed over as one
    ``Missed`` stretch and the schedule waits for its next slot.
    """
    if stored is None:
        return Startup(started_at)
    first = cadence.next_after(stored)
    if first > started_at:
        return Startup(stored)
    if catchup:
        return Startup(stored, catching_up=True)
    last = cadence.last_at_or_before(started_at)
    return Startup(last, missed=Missed(count_between(cadence, stored, started_at), first, last))


def local_time(moment: float, zone: ZoneInfo | timezone) -> datetime:
    """``moment`` (epoch seconds) as an aware datetime on ``zone``'s clock (what placeholders get)."""
    return datetime.fromtimestamp(moment, zone)
