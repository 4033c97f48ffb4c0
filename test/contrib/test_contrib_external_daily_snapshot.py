"""luigi.contrib.external_daily_snapshot: a pipeline depends on the newest complete daily dump."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

import luigi
from luigi.contrib.external_daily_snapshot import ExternalDailySnapshot


@pytest.fixture
def dump_class(tmp_path):
    """A daily dump (one file per day and ``param`` under this test's directory) and its ``write`` helper.

    A class of the test's own: the snapshot cache is per process and keyed by class.
    """

    class DataDump(ExternalDailySnapshot):
        param = luigi.Parameter()
        a = luigi.Parameter(default="a")
        b = luigi.Parameter(default="b")

        def output(self):
            return luigi.LocalTarget(tmp_path / "dumps" / self.param / f"{self.date:%Y-%m-%d}.tsv")

    def write(day: datetime.date, param: str = "xyz") -> None:
        path = tmp_path / "dumps" / param / f"{day:%Y-%m-%d}.tsv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"dump of {day}\n")

    return DataDump, write


def report_task(dump_class, report: Path, **latest_kwargs):
    """A task copying whatever ``dump_class.latest(**latest_kwargs)`` finds into ``report``."""

    class Report(luigi.Task):
        def requires(self):
            return dump_class.latest(**latest_kwargs)

        def output(self):
            return luigi.LocalTarget(report)

        def run(self):
            with self.input().open("r") as dump, self.output().open("w") as out:
                out.write(dump.read())

    return Report()


def test_a_pipeline_reads_the_newest_complete_dump_within_the_lookback(dump_class, tmp_path):
    DataDump, write = dump_class
    write(datetime.date(2012, 1, 1))
    write(datetime.date(2011, 12, 20))
    report = tmp_path / "report.tsv"

    task = report_task(DataDump, report, date=datetime.date(2012, 1, 10), param="xyz")

    assert luigi.build([task], local_scheduler=True) is True
    assert report.read_text() == "dump of 2012-01-01\n"
    assert task.requires().date == datetime.date(2012, 1, 1)


def test_without_a_complete_dump_the_oldest_day_tried_is_required_and_the_run_waits(dump_class, tmp_path):
    DataDump, _ = dump_class
    report = tmp_path / "report.tsv"

    task = report_task(DataDump, report, date=datetime.date(2012, 1, 11), lookback=5, param="xyz")

    assert task.requires() == DataDump(date=datetime.date(2012, 1, 7), param="xyz")
    result = luigi.build([task], local_scheduler=True, detailed_summary=True)
    assert result.status is luigi.LuigiStatusCode.MISSING_EXT
    assert not report.exists()


def test_the_answer_is_kept_for_the_process_whatever_the_keyword_order(dump_class):
    DataDump, write = dump_class
    write(datetime.date(2012, 1, 1))
    first = DataDump.latest(date=datetime.date(2012, 1, 10), param="xyz", a="1", b="2")
    write(datetime.date(2012, 1, 5))  # a newer dump lands after the first answer

    again = DataDump.latest(b="2", param="xyz", a="1", date=datetime.date(2012, 1, 10))
    other_param = DataDump.latest(date=datetime.date(2012, 1, 10), param="xyz", a="other", b="2")

    assert first.date == again.date == datetime.date(2012, 1, 1)
    assert other_param.date == datetime.date(2012, 1, 5)


def test_date_defaults_to_today(dump_class):
    DataDump, write = dump_class
    yesterday = datetime.date.today() - datetime.timedelta(days=1)
    write(yesterday, param="today")

    assert DataDump.latest(param="today").date == yesterday


def test_a_lookback_below_one_is_refused_naming_it(dump_class):
    DataDump, _ = dump_class

    with pytest.raises(
        ValueError, match=r"DataDump.latest\(lookback=0\): lookback must be a whole number >= 1"
    ):
        DataDump.latest(param="xyz", lookback=0)
