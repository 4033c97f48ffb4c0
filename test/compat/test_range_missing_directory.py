"""A Range over outputs whose directory does not exist yet: every datetime is missing (LUIGI_COMPAT j.10).

The Range tools find existing outputs by listing their directories; before the first run those
directories are absent, and that must read as "nothing done yet", not as an error.
"""

from __future__ import annotations

import os
from datetime import date, datetime

import pytest

import luigi
from luigi.local_target import LocalFileSystem
from luigi.tools.range import RangeDaily, RangeHourly

# RangeBase.param_name is a plain Parameter defaulting to None, so Luigi warns about its type: not ours here.
pytestmark = pytest.mark.filterwarnings('ignore:Parameter "param_name" with value "None"')


class ListingFileSystem(LocalFileSystem):
    """The local disk as a remote store behaves: listing a directory that is not there raises."""

    def listdir(self, path):
        return [os.path.join(path, name) for name in os.listdir(path)]


class StoredTarget(luigi.LocalTarget):
    fs = ListingFileSystem()


class DailyNested(luigi.Task):
    """Writes ``<root>/YYYY/MM/DD/data.tsv``."""

    date = luigi.DateParameter()
    root = luigi.Parameter()

    def output(self):
        return luigi.LocalTarget(f"{self.root}/{self.date:%Y/%m/%d}/data.tsv")

    def run(self):
        with self.output().open("w") as out:
            out.write("done\n")


class DailyStored(luigi.Task):
    """Writes ``<root>/YYYY-MM-DD/part-0`` through a filesystem whose listing of a missing path raises."""

    date = luigi.DateParameter()
    root = luigi.Parameter()

    def output(self):
        return StoredTarget(f"{self.root}/{self.date:%Y-%m-%d}/part-0")


class HourlyFlat(luigi.Task):
    """Writes ``<root>/hour-YYYY-MM-DDTHH.tsv``."""

    hour = luigi.DateHourParameter()
    root = luigi.Parameter()

    def output(self):
        return luigi.LocalTarget(f"{self.root}/hour-{self.hour:%Y-%m-%dT%H}.tsv")


def test_a_daily_range_under_a_directory_that_does_not_exist_is_all_missing(tmp_path):
    root = str(tmp_path / "not" / "made" / "yet")
    days = [datetime(2024, 3, day) for day in (1, 2, 3)]
    range_task = RangeDaily(of=DailyNested, of_params={"root": root}, start=date(2024, 3, 1))
    assert range_task.missing_datetimes(days) == days


def test_an_hourly_range_whose_flat_directory_does_not_exist_is_all_missing(tmp_path):
    root = str(tmp_path / "absent")
    hours = [datetime(2024, 3, 1, hour) for hour in (22, 23)] + [datetime(2024, 3, 2, 0)]
    range_task = RangeHourly(of=HourlyFlat, of_params={"root": root}, start=datetime(2024, 3, 1, 22))
    assert range_task.missing_datetimes(hours) == hours


def test_a_filesystem_that_refuses_to_list_a_missing_directory_is_not_asked_to(tmp_path):
    (tmp_path / "2024-03-02").mkdir()
    (tmp_path / "2024-03-02" / "part-0").write_text("")
    days = [datetime(2024, 3, day) for day in (1, 2, 3)]
    range_task = RangeDaily(of=DailyStored, of_params={"root": str(tmp_path)}, start=date(2024, 3, 1))
    assert range_task.missing_datetimes(days) == [datetime(2024, 3, 1), datetime(2024, 3, 3)]
    for day in days:  # one day at a time, each directory's glob is a plain path
        assert range_task.missing_datetimes([day]) == ([] if day.day == 2 else [day])


def test_building_the_range_before_its_directory_exists_runs_every_day(tmp_path):
    root = tmp_path / "fresh"
    range_task = RangeDaily(
        of=DailyNested,
        of_params={"root": str(root)},
        start=date(2024, 3, 1),
        stop=date(2024, 3, 4),
        now=int(datetime(2024, 3, 10).timestamp()),
    )
    assert [task.date for task in range_task.requires()] == [date(2024, 3, day) for day in (1, 2, 3)]
    assert luigi.build([range_task], local_scheduler=True)
    assert sorted(str(path.relative_to(root)) for path in root.rglob("*.tsv")) == [
        "2024/03/01/data.tsv",
        "2024/03/02/data.tsv",
        "2024/03/03/data.tsv",
    ]
