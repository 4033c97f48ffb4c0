"""Whether a schedule run was late: a pure function of the run's record and a ``now`` passed in.

A run with a ``deadline`` is *on time* when it ended well (exit status 0) at or before its start plus
the deadline, and *late* otherwise. The verdict is known as soon as it cannot change: at the deadline
for a run still going, and at its end for a run that ended before it (well: on time; any other way:
failed, killed, stopped, lost or never started, late at once, since it can no longer end well in time).
Nothing here reads the clock or touches storage (``luigi.schedules.service`` does).
"""

from __future__ import annotations

from luigi.schedules.store import RunOutcome, RunRecord

__all__ = ["verdict"]

_OPEN = (RunOutcome.STARTING.value, RunOutcome.RUNNING.value)


def verdict(run: RunRecord, now: float) -> bool | None:
    """True when ``run`` is late, False when it was on time, None while it cannot be told yet (or it has
    no deadline)."""
    due = run.due
    if due is None:
        return None
    if run.outcome in _OPEN:
        return True if now >= due else None
    ended_well = run.outcome == RunOutcome.ENDED.value and run.exit_code == 0
    return not (ended_well and run.ended is not None and run.ended <= due)
