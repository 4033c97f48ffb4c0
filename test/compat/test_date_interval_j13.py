"""Luigi compatibility, j.13: comparing date intervals of different kinds, and Custom's missing neighbours."""

from __future__ import annotations

import datetime
import operator

import pytest

import luigi
from luigi import date_interval as di

COMPARISONS = [operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]


@pytest.mark.parametrize("compare", COMPARISONS, ids=lambda op: op.__name__)
@pytest.mark.parametrize(
    ("left", "right"),
    [
        (di.Date(2024, 1, 1), di.Week(2024, 1)),
        (di.Month(2024, 1), di.Year(2024)),
        (di.Date(2024, 1, 1), di.Custom(datetime.date(2024, 1, 1), datetime.date(2024, 1, 2))),
    ],
)
def test_intervals_of_different_kinds_raise_a_type_mismatch(compare, left, right):
    with pytest.raises(TypeError, match="^Date interval type mismatch$"):
        compare(left, right)
    with pytest.raises(TypeError, match="^Date interval type mismatch$"):
        compare(right, left)


@pytest.mark.parametrize("other", ["2024-01", None, 5, datetime.date(2024, 1, 1)])
def test_an_interval_is_never_equal_to_something_else(other):
    month = di.Month(2024, 1)
    assert (month == other) is False
    assert (month != other) is True


def test_intervals_of_one_kind_compare_by_their_dates():
    assert di.Month(2024, 1) < di.Month(2024, 2) <= di.Month(2024, 2)
    assert di.Month(2024, 3) == di.Month.parse("2024-03")
    assert sorted([di.Year(2025), di.Year(2023)]) == [di.Year(2023), di.Year(2025)]


@pytest.mark.parametrize("step", ["next", "prev"])
def test_a_custom_interval_has_no_neighbours(step):
    custom = di.Custom.parse("2024-01-01-2024-01-08")
    with pytest.raises(NotImplementedError):
        getattr(custom, step)()


def test_other_kinds_still_step():
    assert di.Week(2024, 1).next() == di.Week(2024, 2)
    assert di.Date(2024, 3, 1).prev() == di.Date(2024, 2, 29)


def test_tasks_over_custom_intervals_run_and_summarise():
    class OverInterval(luigi.Task):
        interval = luigi.DateIntervalParameter()

        def complete(self):
            return getattr(self, "finished", False)

        def run(self):
            self.finished = True

    class Both(luigi.WrapperTask):
        def requires(self):
            return [
                OverInterval(interval=di.Custom.parse("2024-01-01-2024-01-08")),
                OverInterval(interval=di.Custom.parse("2024-01-08-2024-01-15")),
            ]

    result = luigi.build([Both()], local_scheduler=True, detailed_summary=True, log_level="ERROR")
    assert result.scheduling_succeeded
    assert "2 OverInterval(interval=2024-01-01-2024-01-08,2024-01-08-2024-01-15)" in result.summary_text
