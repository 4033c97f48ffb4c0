"""A backfill request checked and turned into Luigi's Range command, and its progress counted from the
scheduler's state (pure: no luigid, no child)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.scheduler import START, ManualClock

from luigi.scheduler import Scheduler
from luigi.scheduler.backfills import NoBackfills
from luigi.scheduler.settings import SchedulerConfig
from luigi.schedules.backfill import BackfillError, BackfillRequest
from luigi.task_status import DONE, PENDING, UNKNOWN


def test_a_daily_range_is_luigis_range_daily_with_its_window_pinned_to_the_range():
    request = BackfillRequest.checked(
        "pipeline", "Report", "2024-01-30", "2024-02-02", params={"region": "eu"}
    )
    assert request.total == 3
    assert request.arguments(600) == [
        *("--module", "pipeline", "RangeDaily", "--of", "Report", "--start", "2024-01-30"),
        *("--stop", "2024-02-02", "--now", "1706832000", "--days-back", "3", "--task-limit", "3"),
        *("--of-params", '{"region": "eu"}', "--workers", "1", "--worker-keep-alive"),
        *("--worker-max-keep-alive-idle-duration", "600 seconds"),
    ]


def test_an_hourly_range_counts_hours_and_uses_range_hourly():
    request = BackfillRequest.checked(
        "p", "Hourly", "2024-03-31T22", "2024-04-01T02", kind="hourly", concurrency=4
    )
    arguments = request.arguments(60)
    assert request.total == 4
    assert arguments[2] == "RangeHourly" and "--of-params" not in arguments
    assert arguments[arguments.index("--hours-back") + 1] == "4"
    assert arguments[arguments.index("--workers") + 1] == "4"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"start": "2024-02-30"}, "start: '2024-02-30' is not a daily point in time; write it as 2024-01-31"),
        ({"stop": "2024-01-01"}, "stop: 2024-01-01 is not after start 2024-01-01 (stop is exclusive"),
        ({"kind": "hourly"}, "start: '2024-01-01' is not a hourly point in time"),
        ({"family": "Day; rm"}, "family: 'Day; rm' is not a Python name"),
        ({"stop": "2400-01-01"}, "start/stop: the range holds 137331 daily instances, more than 100000"),
        ({"concurrency": 257}, "concurrency: 257 is not between 1 and 256 (workers)"),
    ],
)
def test_a_bad_request_names_the_field_and_the_fix(arguments, message):
    call = {"module": "m", "family": "Day", "start": "2024-01-01", "stop": "2024-01-06", **arguments}
    with pytest.raises(BackfillError) as refused:
        BackfillRequest.checked(**call)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


class ListingDesk(NoBackfills):
    """Lists ``entries`` and answers with the progress the scheduler counted for them."""

    def __init__(self, entries: list[dict[str, Any]]) -> None:
        self.entries = entries

    def backfill_list(self, progress: Any) -> list[dict[str, Any]]:
        return [{**entry, "done": progress(self.entries).get(entry["id"])} for entry in self.entries]


ENTRY = {"id": 7, "kind": "daily", "family": "Day", "start": "2024-01-01", "stop": "2024-01-06", "total": 5}
RANGE = {"of": "Day", "start": "2024-01-01", "stop": "2024-01-06", "of_params": json.dumps({"region": "eu"})}
WORKER = "w1"


def progress_of(entry: dict[str, Any], range_status: str = "PENDING") -> int | None:
    """``backfill_list``'s done for ``entry`` on a scheduler where day 1 is DONE, another RUNNING, the third
    PENDING, and the Range task (its dependencies: those three) is ``range_status``."""
    scheduler = Scheduler(SchedulerConfig(), clock=ManualClock(START), backfills=ListingDesk([entry]))
    for day, status in (("d1", DONE), ("d2", PENDING), ("d3", PENDING)):
        scheduler.add_task(task_id=day, status=status, family="Day", params={}, worker=WORKER)
    scheduler.add_task(
        task_id="r",
        status=range_status,
        family="RangeDaily",
        params=RANGE,
        deps=["d1", "d2", "d3"],
        worker=WORKER,
    )
    scheduler.get_work(worker=WORKER)  # one of d2, d3 RUNNING: not done
    (listed,) = scheduler.backfill_list()
    return listed["done"]


def test_done_is_the_days_not_required_plus_the_required_ones_done():
    assert progress_of({**ENTRY, "params": {"region": "eu"}}) == 5 - 3 + 1


def test_a_done_range_task_counts_the_whole_range():
    assert progress_of({**ENTRY, "params": {"region": "eu"}}, range_status=DONE) == 5


def test_a_range_task_that_failed_scheduling_counts_nothing():
    assert progress_of({**ENTRY, "params": {"region": "eu"}}, range_status=UNKNOWN) is None


@pytest.mark.parametrize(
    "other",
    [{"params": {"region": "us"}}, {"kind": "hourly"}, {"family": "Other"}, {"start": "2024-01-02"}],
)
def test_another_parameter_set_unit_family_or_range_is_not_this_backfills_range_task(other):
    assert progress_of({**ENTRY, "params": {"region": "eu"}, **other}) is None
