"""When a schedule run is late: not ended well (exit status 0) by its start plus its deadline, told as
soon as nothing can change it, and never for a run without a deadline."""

from __future__ import annotations

from dataclasses import replace

import pytest

from luigi.schedules.deadlines import verdict
from luigi.schedules.store import RunOutcome, RunRecord

START = 1000.0
DEADLINE = 60.0
DUE = START + DEADLINE


def run(outcome: RunOutcome, ended: float | None = None, exit_code: int | None = None, **more) -> RunRecord:
    values = dict(
        id=1,
        schedule="nightly",
        kind="slot",
        slot=START,
        scheduled_time=START,
        outcome=outcome.value,
        claimed=START - 0.5,
        started=START,
        ended=ended,
        pid=42,
        exit_code=exit_code,
        meaning=None,
        log_bytes=None,
        note=None,
        deadline=DEADLINE,
    )
    return RunRecord(**{**values, **more})


def test_a_run_still_going_is_undecided_before_its_deadline_and_late_from_it():
    going = run(RunOutcome.RUNNING)
    assert verdict(going, DUE - 0.001) is None
    assert verdict(going, DUE) is True
    assert verdict(run(RunOutcome.STARTING), DUE + 5) is True


def test_a_run_that_ended_with_status_0_by_its_deadline_is_on_time():
    assert verdict(run(RunOutcome.ENDED, ended=START + 5, exit_code=0), START + 5) is False
    assert verdict(run(RunOutcome.ENDED, ended=DUE, exit_code=0), DUE + 100) is False


def test_a_run_that_ended_with_status_0_after_its_deadline_is_late():
    assert verdict(run(RunOutcome.ENDED, ended=DUE + 0.5, exit_code=0), DUE + 0.5) is True


@pytest.mark.parametrize(
    ("outcome", "exit_code"),
    [
        (RunOutcome.ENDED, 30),  # failed
        (RunOutcome.ENDED, -9),  # killed
        (RunOutcome.STOPPED, -15),
        (RunOutcome.LOST, None),
    ],
)
def test_a_run_that_ended_any_other_way_before_its_deadline_is_late_at_once(outcome, exit_code):
    assert verdict(run(outcome, ended=START + 5, exit_code=exit_code), START + 5) is True


def test_a_run_whose_process_never_started_counts_from_its_claim_and_is_late():
    never = run(RunOutcome.NOT_STARTED, ended=START, started=None)
    assert never.due == START - 0.5 + DEADLINE
    assert verdict(never, START) is True


def test_a_run_without_a_deadline_is_never_judged():
    plain = replace(run(RunOutcome.ENDED, ended=START + 1, exit_code=4), deadline=None)
    assert plain.due is None
    assert verdict(plain, DUE + 1000) is None
    assert verdict(replace(run(RunOutcome.RUNNING), deadline=None), DUE + 1000) is None
