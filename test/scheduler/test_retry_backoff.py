"""Retries with backoff (issue 16, point 3): the scheduler computes when a failed task may run again.

``retry_backoff`` fixed (Luigi's), linear or exponential over ``retry_delay``, capped by
``retry_max_delay`` and spread by ``retry_jitter``; per task through ``retry_policy_dict`` (the task's
properties), else ``[scheduler]``. A client sending none of it gets the configured defaults.
"""

from __future__ import annotations

import pytest
from helpers.scheduler import make_scheduler, status_of

from luigi.scheduler import SchedulerConfig
from luigi.task_status import FAILED, PENDING


def _fail_and_measure(sch, clock, task_id, policy=None):
    """Fail the task once more and return how long until the scheduler retries it."""
    sch.add_task(worker="w", task_id=task_id, status=PENDING, runnable=True, retry_policy_dict=policy)
    assert sch.get_work(worker="w")["task_id"] == task_id
    sch.add_task(worker="w", task_id=task_id, status=FAILED, retry_policy_dict=policy)
    failed_at = clock()
    retry_at = sch.task_detail(task_id)["task"]["retry"]["at"]
    clock.set(retry_at - 0.01)
    sch.prune()
    assert status_of(sch, task_id) == FAILED
    clock.set(retry_at + 0.01)
    sch.prune()
    assert status_of(sch, task_id) == PENDING
    return round(retry_at - failed_at, 6)


@pytest.mark.parametrize(
    ("backoff", "expected"),
    [("fixed", [10, 10, 10, 10]), ("linear", [10, 20, 30, 40]), ("exponential", [10, 20, 40, 80])],
)
def test_each_backoff_grows_the_delay_as_named(backoff, expected):
    sch, clock = make_scheduler(retry_delay=10, retry_backoff=backoff)
    assert [_fail_and_measure(sch, clock, "T") for _ in expected] == expected


def test_the_delay_is_capped_by_retry_max_delay():
    sch, clock = make_scheduler(retry_delay=10, retry_backoff="exponential", retry_max_delay=25)
    assert [_fail_and_measure(sch, clock, "T") for _ in range(4)] == [10, 20, 25, 25]


def test_jitter_spreads_delays_within_the_fraction_and_the_same_way_each_time():
    delays = []
    for _run in range(2):
        sch, clock = make_scheduler(retry_delay=100, retry_jitter=0.2)
        delays.append([_fail_and_measure(sch, clock, f"T{i}") for i in range(20)])
    assert delays[0] == delays[1]
    assert all(80 <= delay <= 120 for delay in delays[0])
    assert len(set(delays[0])) > 10


def test_a_tasks_policy_overrides_the_scheduler_defaults():
    sch, clock = make_scheduler(retry_delay=900)
    policy = {"retry_backoff": "linear", "retry_delay": 5, "retry_count": 10}
    assert [_fail_and_measure(sch, clock, "T", policy) for _ in range(3)] == [5, 10, 15]
    assert sch.task_detail("T")["task"].get("retry") is None  # PENDING now: no retry to show


def test_task_detail_says_which_retry_of_how_many_and_when():
    sch, clock = make_scheduler(retry_delay=30, retry_count=5)
    sch.add_task(worker="w", task_id="T", status=PENDING, runnable=True)
    sch.get_work(worker="w")
    sch.add_task(worker="w", task_id="T", status=FAILED)
    assert sch.task_detail("T")["task"]["retry"] == {"number": 1, "of": 5, "at": clock() + 30}


def test_a_luigi_client_sending_no_backoff_gets_luigis_fixed_delay():
    sch, clock = make_scheduler()
    luigi_policy = {"retry_count": None, "disable_hard_timeout": None, "disable_window": None}
    assert [_fail_and_measure(sch, clock, "T", luigi_policy) for _ in range(2)] == [900, 900]


def test_an_unknown_backoff_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="retry_backoff must be one of fixed, linear, exponential"):
        SchedulerConfig(retry_backoff="quadratic")
    sch, _ = make_scheduler()
    with pytest.raises(ValueError, match="retry_backoff must be one of"):
        sch.add_task(worker="w", task_id="T", status=PENDING, retry_policy_dict={"retry_backoff": "soon"})
