"""A backfill: one task family over a range of days or hours, run by ``luigid`` as Luigi's own
``RangeDaily``/``RangeHourly`` command. Pure: the request checked, the ``luigi`` arguments, the count.

The range is ``[start, stop)`` as Luigi's Range tasks read it (``stop`` exclusive). ``--now`` is pinned to
``stop`` and ``--days-back``/``--hours-back`` to the range's length, so the window is exactly the range
(Luigi's default 100-day window would clip an older ``start``) and a resumed run has the same task id.
"""

from __future__ import annotations

import calendar
import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

__all__ = ["MAX_INSTANCES", "BackfillError", "BackfillRequest", "KINDS"]

KINDS = ("daily", "hourly")
MAX_INSTANCES = 100_000  # days or hours in one backfill: a typo in a year should not flood the scheduler
MAX_CONCURRENCY = 256
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_FORMATS = {"daily": ("%Y-%m-%d", "2024-01-31"), "hourly": ("%Y-%m-%dT%H", "2024-01-31T05")}
_STEPS = {"daily": timedelta(days=1), "hourly": timedelta(hours=1)}


class BackfillError(ValueError):
    """A backfill request that cannot be run; the message names the field and the fix."""


@dataclass(frozen=True)
class BackfillRequest:
    """What ``backfill_start`` was asked: checked by ``checked``."""

    module: str
    family: str
    kind: str
    start: str
    stop: str
    params: dict[str, Any]
    concurrency: int

    @classmethod
    def checked(
        cls,
        module: str,
        family: str,
        start: str,
        stop: str,
        kind: str = "daily",
        params: dict[str, Any] | None = None,
        concurrency: int = 1,
    ) -> BackfillRequest:
        """The request, or BackfillError naming the first bad field."""
        if kind not in KINDS:
            raise BackfillError(f"kind: {kind!r} is not a backfill kind; write 'daily' or 'hourly'")
        for field, value in (("module", module), ("family", family)):
            if not _NAME.match(value):
                raise BackfillError(
                    f"{field}: {value!r} is not a Python name; write e.g. 'pipeline' and 'DailyReport'"
                )
        first, end = _moment(kind, "start", start), _moment(kind, "stop", stop)
        if end <= first:
            raise BackfillError(
                f"stop: {stop} is not after start {start} (stop is exclusive: the range is [start, stop))"
            )
        request = cls(module, family, kind, start, stop, dict(params or {}), concurrency)
        if request.total > MAX_INSTANCES:
            raise BackfillError(
                f"start/stop: the range holds {request.total} {kind} instances, more than "
                f"{MAX_INSTANCES}; split it into smaller backfills"
            )
        if not 1 <= concurrency <= MAX_CONCURRENCY:
            raise BackfillError(
                f"concurrency: {concurrency} is not between 1 and {MAX_CONCURRENCY} (workers)"
            )
        return request

    @property
    def total(self) -> int:
        """How many days (or hours) the range holds."""
        span = _moment(self.kind, "stop", self.stop) - _moment(self.kind, "start", self.start)
        return span // _STEPS[self.kind]

    @property
    def range_family(self) -> str:
        return "RangeDaily" if self.kind == "daily" else "RangeHourly"

    def arguments(self, idle_seconds: int) -> list[str]:
        """The ``luigi`` arguments (without ``--scheduler-url``) that run the backfill; its worker waits
        up to ``idle_seconds`` for days it cannot run yet (held by a lost worker, waiting for a retry)."""
        now = calendar.timegm(_moment(self.kind, "stop", self.stop).timetuple())
        back = "--days-back" if self.kind == "daily" else "--hours-back"
        argv = ["--module", self.module, self.range_family, "--of", self.family]
        argv += ["--start", self.start, "--stop", self.stop, "--now", str(now)]
        argv += [back, str(self.total), "--task-limit", str(self.total)]
        if self.params:
            argv += ["--of-params", json.dumps(self.params, sort_keys=True)]
        # keep-alive: after a kill -9, a day the killed child was running fails once the scheduler sees
        # its worker gone, and is retried after retry_delay; the child waits for it rather than exit.
        argv += ["--workers", str(self.concurrency), "--worker-keep-alive"]
        return [*argv, "--worker-max-keep-alive-idle-duration", f"{idle_seconds} seconds"]

    def as_json(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "family": self.family,
            "kind": self.kind,
            "start": self.start,
            "stop": self.stop,
            "params": self.params,
            "concurrency": self.concurrency,
        }


def _moment(kind: str, field: str, text: str) -> datetime:
    pattern, example = _FORMATS[kind]
    try:
        return datetime.strptime(text, pattern)
    except ValueError:
        raise BackfillError(
            f"{field}: {text!r} is not a {kind} point in time; write it as {example}"
        ) from None
