"""How RangeDaily and its siblings learn which instances are missing: bulk_complete, listings, complete()."""

from __future__ import annotations

import os
from datetime import date, datetime, timezone

import pytest

from luigi.local_target import LocalFileSystem, LocalTarget
from luigi.parameter import DateHourParameter, DateMinuteParameter, DateParameter, MonthParameter, Parameter
from luigi.target import FileSystem, FileSystemTarget, Target
from luigi.task import MixinNaiveBulkComplete, Task
from luigi.tools.range import (
    RangeByMinutes,
    RangeDaily,
    RangeDailyBase,
    RangeHourly,
    RangeMonthly,
    infer_bulk_complete_from_fs,
    most_common,
)

NOW = int(datetime(2024, 1, 10, 12, 30, tzinfo=timezone.utc).timestamp())


class CountingFileSystem(LocalFileSystem):
    """The local filesystem, remembering every listdir and exists call."""

    def __init__(self) -> None:
        self.listed: list[str] = []
        self.asked: list[str] = []

    def listdir(self, path):
        self.listed.append(path)
        return super().listdir(path)

    def exists(self, path):
        self.asked.append(path)
        return super().exists(path)


class ShallowFileSystem(CountingFileSystem):
    """Lists only the immediate children of a directory, as some remote filesystems do."""

    def listdir(self, path):
        self.listed.append(path)
        return [os.path.join(path, name) for name in os.listdir(path)] if os.path.isdir(path) else []


def local_output(fs: FileSystem, *parts: str) -> LocalTarget:
    target = LocalTarget(os.path.join(*parts))
    target.fs = fs  # type: ignore[misc]
    return target


def touch(path) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write("done\n")


def dump_task(fs: FileSystem) -> type[Task]:
    """A daily task writing ``<root>/<year>/<month>/dump-<date>.txt`` on ``fs``."""

    class Dump(Task):
        root = Parameter()
        day = DateParameter()

        def output(self):
            return local_output(fs, self.root, f"{self.day:%Y}", f"{self.day:%m}", f"dump-{self.day}.txt")

    return Dump


def required_days(range_task: Task) -> list[int]:
    return [task.day.day for task in range_task.requires()]


# -- filesystem listings ---------------------------------------------------------------------------------


def test_range_daily_learns_the_missing_days_from_a_few_directory_listings(tmp_path):
    fs = CountingFileSystem()
    dump = dump_task(fs)
    for day in (date(2023, 12, 28), date(2024, 1, 2), date(2024, 1, 3), date(2024, 1, 9)):
        touch(tmp_path / f"{day:%Y}" / f"{day:%m}" / f"dump-{day}.txt")
    touch(tmp_path / "2024" / "01" / "dump-2024-01-05.txt.tmp")  # a half-written file is not an output
    range_task = RangeDaily(of=dump, of_params={"root": str(tmp_path)}, start=date(2023, 12, 26), now=NOW)
    missing = [task.day for task in range_task.requires()]
    assert missing == [date(2023, 12, d) for d in (26, 27, 29, 30, 31)] + [
        date(2024, 1, d) for d in (1, 4, 5, 6, 7, 8, 10)
    ]
    assert sorted(fs.listed) == [f"{tmp_path}/2023/12/", f"{tmp_path}/2024/01/"]
    assert fs.asked == []


def test_a_range_whose_outputs_do_not_exist_yet_is_entirely_missing(tmp_path):
    fs = CountingFileSystem()
    range_task = RangeDaily(
        of=dump_task(fs), of_params={"root": str(tmp_path / "new")}, start=date(2024, 1, 1), now=NOW
    )
    assert required_days(range_task) == list(range(1, 11))


def test_directory_outputs_count_as_present_when_they_hold_files(tmp_path):
    fs = CountingFileSystem()

    class Partitioned(Task):
        day = DateParameter()

        def output(self):
            return local_output(fs, str(tmp_path), f"day={self.day}")

    touch(tmp_path / "day=2024-01-04" / "part-00000")
    touch(tmp_path / "day=2024-01-07" / "part-00000")
    range_task = RangeDaily(of=Partitioned, start=date(2024, 1, 1), now=NOW)
    assert required_days(range_task) == [1, 2, 3, 5, 6, 8, 9, 10]
    assert fs.listed == [f"{tmp_path}/"]


def test_a_listing_that_is_not_recursive_is_completed_by_asking_for_the_paths_below_it(tmp_path):
    fs = ShallowFileSystem()

    class Nested(Task):
        day = DateParameter()

        def output(self):
            return local_output(fs, str(tmp_path), f"{self.day}", "part-0")

    touch(tmp_path / "2024-01-03" / "part-0")
    os.makedirs(tmp_path / "2024-01-05")  # started, but the output file never appeared
    range_task = RangeDaily(of=Nested, start=date(2024, 1, 1), now=NOW)
    assert required_days(range_task) == [1, 2, 4, 5, 6, 7, 8, 9, 10]
    assert sorted(fs.asked) == [f"{tmp_path}/2024-01-03/part-0", f"{tmp_path}/2024-01-05/part-0"]


def test_range_hourly_infers_missing_hours_from_listings(tmp_path):
    fs = CountingFileSystem()

    class HourlyLog(Task):
        hour = DateHourParameter()

        def output(self):
            return local_output(fs, str(tmp_path), f"{self.hour:%Y-%m-%d}", f"{self.hour:%H}.log")

    for hour in (3, 4, 11):
        touch(tmp_path / "2024-01-10" / f"{hour:02d}.log")
    range_task = RangeHourly(of=HourlyLog, start=datetime(2024, 1, 10), now=NOW)
    assert [task.hour.hour for task in range_task.requires()] == [0, 1, 2, 5, 6, 7, 8, 9, 10, 12]
    assert fs.listed == [f"{tmp_path}/2024-01-10/"]


def test_range_by_minutes_infers_missing_slots_from_listings(tmp_path):
    fs = CountingFileSystem()

    class Snapshot(Task):
        at = DateMinuteParameter()

        def output(self):
            return local_output(fs, str(tmp_path), f"snap-{self.at:%Y%m%dT%H%M}.json")

    touch(tmp_path / "snap-20240110T1015.json")
    range_task = RangeByMinutes(of=Snapshot, start=datetime(2024, 1, 10, 9), minutes_interval=15, now=NOW)
    assert [f"{task.at:%H:%M}" for task in range_task.requires()] == [
        "09:00", "09:15", "09:30", "09:45", "10:00", "10:30", "10:45",
        "11:00", "11:15", "11:30", "11:45", "12:00", "12:15",
    ]  # fmt: skip
    # 12:30 is `now` itself, and the window ends just before it.
    assert fs.listed == [f"{tmp_path}/"]


def test_range_monthly_infers_missing_months_from_listings(tmp_path):
    fs = CountingFileSystem()

    class MonthlyTotals(Task):
        month = MonthParameter()

        def output(self):
            return local_output(fs, str(tmp_path), f"totals-{self.month:%Y-%m}.csv")

    touch(tmp_path / "totals-2023-03.csv")
    touch(tmp_path / "totals-2023-09.csv")
    range_task = RangeMonthly(of=MonthlyTotals, start=date(2023, 1, 1), now=NOW)
    assert [f"{task.month:%Y-%m}" for task in range_task.requires()] == [
        f"2023-{month:02d}" for month in (1, 2, 4, 5, 6, 7, 8, 10, 11, 12)
    ]
    assert fs.listed == [f"{tmp_path}/"]


# -- infer_bulk_complete_from_fs directly ----------------------------------------------------------------


class DictFileSystem(FileSystem):
    """An in-memory filesystem of file paths, recording listings."""

    def __init__(self, files: set[str]) -> None:
        self.files = files
        self.listed: list[str] = []

    def exists(self, path):
        return path in self.files

    def remove(self, path, recursive=True, skip_trash=True):
        self.files.discard(path)

    def listdir(self, path):
        self.listed.append(path)
        return sorted(name for name in self.files if name.startswith(path))


class DictTarget(FileSystemTarget):
    def __init__(self, path: str, fs: DictFileSystem) -> None:
        super().__init__(path)
        self._fs = fs

    @property
    def fs(self):
        return self._fs

    def open(self, mode="r"):
        raise NotImplementedError


def dict_fs_task(fs: DictFileSystem, template: str) -> type[Task]:
    class Stored(Task):
        day = DateParameter()

        def output(self):
            return DictTarget(template.format(day=self.day), fs)

    return Stored


def test_a_handful_of_paths_is_checked_one_by_one_instead_of_listed():
    fs = DictFileSystem({"/data/2024-01-02.csv"})
    stored = dict_fs_task(fs, "/data/{day}.csv")
    datetimes = [datetime(2024, 1, day) for day in (1, 2, 3)]
    missing = infer_bulk_complete_from_fs(
        datetimes, lambda d: stored(day=d.date()), lambda d: d.strftime("(%Y).*(%m).*(%d)")
    )
    assert missing == [datetime(2024, 1, 1), datetime(2024, 1, 3)]
    assert fs.listed == []


def test_outputs_at_the_top_of_a_filesystem_are_checked_one_by_one_rather_than_listing_everything():
    fs = DictFileSystem({"s3://bucket-2024-01-02/out.csv"})
    stored = dict_fs_task(fs, "s3://bucket-{day}/out.csv")
    datetimes = [datetime(2024, 1, day) for day in range(1, 11)]
    missing = infer_bulk_complete_from_fs(datetimes, lambda d: stored(day=d.date()))
    assert datetime(2024, 1, 2) not in missing and len(missing) == 9
    assert fs.listed == []


def test_outputs_on_several_filesystems_are_listed_on_each():
    logs = DictFileSystem({"/logs/2024-01-03.log"})
    stats = DictFileSystem({"/stats/2024-01-03.json", "/stats/2024-01-04.json"})

    class Both(Task):
        day = DateParameter()

        def output(self):
            return {
                "log": DictTarget(f"/logs/{self.day}.log", logs),
                "stats": DictTarget(f"/stats/{self.day}.json", stats),
            }

    datetimes = [datetime(2024, 1, day) for day in range(1, 9)]
    missing = infer_bulk_complete_from_fs(datetimes, lambda d: Both(day=d.date()))
    assert datetime(2024, 1, 3) not in missing and len(missing) == 7
    assert logs.listed == ["/logs/"] and stats.listed == ["/stats/"]


# -- falling back to complete() --------------------------------------------------------------------------


def test_a_task_with_its_own_complete_is_asked_directly_not_inferred_from_its_outputs(tmp_path):
    fs = CountingFileSystem()
    done = {date(2024, 1, 8)}

    class Checked(Task):
        day = DateParameter()

        def output(self):
            return local_output(fs, str(tmp_path), f"{self.day}.txt")

        def complete(self):
            return self.day in done

    for day in range(1, 11):
        touch(tmp_path / f"2024-01-{day:02d}.txt")  # existence alone would call every day complete
    range_task = RangeDaily(of=Checked, start=date(2024, 1, 7), now=NOW)
    assert required_days(range_task) == [7, 9, 10]
    assert fs.listed == []


def test_outputs_that_are_not_filesystem_targets_fall_back_to_complete():
    class Flag(Target):
        def __init__(self, up: bool) -> None:
            self.up = up

        def exists(self):
            return self.up

    class Flagged(Task):
        day = DateParameter()

        def output(self):
            return Flag(self.day.day % 3 == 0)

    range_task = RangeDaily(of=Flagged, start=date(2024, 1, 1), now=NOW)
    assert required_days(range_task) == [1, 2, 4, 5, 7, 8, 10]


# -- bulk_complete ---------------------------------------------------------------------------------------


def test_bulk_complete_answers_for_the_whole_range_when_the_class_implements_it():
    calls: list[list[date]] = []

    class Warehouse(Task):
        region = Parameter()
        day = DateParameter()

        @classmethod
        def bulk_complete(cls, parameter_tuples):
            days = list(parameter_tuples)
            calls.append(days)
            return [day for day in days if cls(day).region == "eu" and day.day % 2 == 0]

        def complete(self):
            raise AssertionError("complete() is not asked when bulk_complete answers")

    range_task = RangeDaily(of=Warehouse, of_params={"region": "eu"}, start=date(2024, 1, 5), now=NOW)
    assert range_task.requires() == [Warehouse(region="eu", day=date(2024, 1, d)) for d in (5, 7, 9)]
    assert calls == [[date(2024, 1, d) for d in range(5, 11)]]


def test_naive_bulk_complete_builds_instances_with_of_params_whatever_the_parameter_order():
    done = {date(2024, 1, 9)}

    class Naive(MixinNaiveBulkComplete, Task):
        region = Parameter()
        day = DateParameter()

        def complete(self):
            return self.region == "us" and self.day in done

    range_task = RangeDaily(of=Naive, of_params={"region": "us"}, start=date(2024, 1, 8), now=NOW)
    assert range_task.requires() == [
        Naive(region="us", day=date(2024, 1, 8)),
        Naive(region="us", day=date(2024, 1, 10)),
    ]


def test_the_base_ranges_ask_each_instance_and_ignore_bulk_complete():
    class Slow(Task):
        day = DateParameter()

        @classmethod
        def bulk_complete(cls, parameter_tuples):
            raise AssertionError("RangeDailyBase does not use bulk_complete")

        def complete(self):
            return self.day.day == 9

    assert required_days(RangeDailyBase(of=Slow, start=date(2024, 1, 8), now=NOW)) == [8, 10]


def test_most_common_gives_the_most_frequent_item_and_its_count():
    assert most_common(["a", "b", "b", "c", "b"]) == ("b", 3)


def test_outputs_with_their_own_exists_are_not_inferred_from_listings(tmp_path):
    class NeedsMarker(LocalTarget):
        def exists(self):
            return os.path.exists(os.path.join(self.path, "_SUCCESS"))

    class Marked(Task):
        day = DateParameter()

        def output(self):
            return NeedsMarker(str(tmp_path / f"{self.day}"))

    touch(tmp_path / "2024-01-09" / "part-0")  # the directory exists, the marker does not
    touch(tmp_path / "2024-01-10" / "_SUCCESS")
    assert required_days(RangeDaily(of=Marked, start=date(2024, 1, 8), now=NOW)) == [8, 9]


@pytest.mark.parametrize("range_cls", [RangeDaily, RangeDailyBase])
def test_every_daily_range_agrees_on_what_is_missing(tmp_path, range_cls):
    fs = CountingFileSystem()
    dump = dump_task(fs)
    touch(tmp_path / "2024" / "01" / "dump-2024-01-04.txt")
    range_task = range_cls(of=dump, of_params={"root": str(tmp_path)}, start=date(2024, 1, 1), now=NOW)
    assert required_days(range_task) == [1, 2, 3, 5, 6, 7, 8, 9, 10]
