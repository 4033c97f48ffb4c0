"""How RangeDaily and its siblings learn which instances are missing: bulk_complete, listings, complete()."""

from __future__ import annotations

import fnmatch
import os
from datetime import date, datetime, timezone

import pytest

from luigi.local_target import LocalFileSystem, LocalTarget
from luigi.parameter import DateHourParameter, DateMinuteParameter, DateParameter, Parameter
from luigi.target import FileSystem, FileSystemTarget, Target
from luigi.task import MixinNaiveBulkComplete, Task, WrapperTask
from luigi.tools.range import (
    RangeByMinutes,
    RangeDaily,
    RangeDailyBase,
    RangeHourly,
    _constrain_glob,
    _get_filesystems_and_globs,
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


class GlobbingFileSystem(FileSystem):
    """An in-memory store whose exists/listdir take globs, as HDFS, S3 and GCS do; it records every call."""

    def __init__(self, paths: set[str]) -> None:
        self.paths = paths
        self.asked: list[str] = []
        self.listed: list[str] = []

    def exists(self, path):
        self.asked.append(path)
        return any(fnmatch.fnmatch(stored, path + "/*") or stored == path for stored in self.paths)

    def listdir(self, path):
        self.listed.append(path)
        return sorted(stored for stored in self.paths if fnmatch.fnmatch(stored, path + "/*"))

    def remove(self, path, recursive=True, skip_trash=True):
        raise NotImplementedError


class Stored(FileSystemTarget):
    def __init__(self, path: str, fs: FileSystem) -> None:
        super().__init__(path)
        self._fs = fs

    @property
    def fs(self):
        return self._fs

    def open(self, mode="r"):
        raise NotImplementedError


def local_output(fs: FileSystem, *parts: str) -> LocalTarget:
    target = LocalTarget(os.path.join(*parts))
    target.fs = fs  # type: ignore[misc]
    return target


def touch(path) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write("done\n")


def dump_task(fs: FileSystem) -> type[Task]:
    """A daily task writing ``<root>/<year>/<month>/<day>/dump.txt`` on ``fs``."""

    class Dump(Task):
        root = Parameter()
        day = DateParameter()

        def output(self):
            return local_output(
                fs, self.root, f"{self.day:%Y}", f"{self.day:%m}", f"{self.day:%d}", "dump.txt"
            )

    return Dump


def output_paths(range_task: Task, days: range) -> set[str]:
    return {
        range_task.of(root=range_task.of_params["root"], day=date(2024, 1, d)).output().path for d in days
    }


def required_days(range_task: Task) -> list[int]:
    return [task.day.day for task in range_task.requires()]


# -- the pure helpers (LUIGI_COMPAT j.10) ------------------------------------------------------------------

NESTED = "/d/[0-9][0-9][0-9][0-9]/[0-9][0-9]/[0-9][0-9]"


def test_constrain_glob_splits_down_to_the_paths_when_few():
    paths = ["/d/2015/01/05", "/d/2015/01/06", "/d/2015/02/07"]
    assert sorted(_constrain_glob(NESTED, paths)) == ["/d/2015/01/05", "/d/2015/01/06", "/d/2015/02/07"]


def test_constrain_glob_writes_a_digit_set_where_a_split_would_pass_the_limit():
    paths = [f"/d/2015/0{month}/1{day}" for month in range(1, 10) for day in range(4)]
    assert _constrain_glob(NESTED, paths) == ["/d/2015/0[1-9]/[0-9][0-9]"]


def test_a_digit_set_that_is_not_contiguous_is_listed_digit_by_digit():
    assert _constrain_glob("/d/[0-9]", ["/d/1", "/d/3"], limit=1) == ["/d/[13]"]
    assert _constrain_glob("/d/x", ["/d/x"]) == ["/d/x"]


def test_get_filesystems_and_globs_yields_a_directory_glob_per_output():
    fs = GlobbingFileSystem(set())

    class Two(Task):
        day = DateParameter()

        def output(self):
            return [Stored(f"/d/{self.day:%Y/%m/%d}/x.tsv", fs), Stored(f"/e/v1/{self.day}.csv", fs)]

    found = list(
        _get_filesystems_and_globs(lambda dt: Two(day=dt.date()), lambda dt: dt.strftime("(%Y).*(%m).*(%d)"))
    )
    assert found == [(fs, NESTED), (fs, "/e/v1")]


def test_get_filesystems_and_globs_refuses_outputs_it_cannot_reason_about():
    fs = GlobbingFileSystem(set())

    class Varying(Task):
        day = DateParameter()

        def output(self):
            return [Stored(f"/d/{self.day}", fs)] * (1 if self.day.year == 2000 else 2)

    class NotOnAFileSystem(Task):
        day = DateParameter()

        def output(self):
            return Target.__new__(type("Flag", (Target,), {"exists": lambda self: True}))

    class Dateless(Task):
        day = DateParameter()

        def output(self):
            return Stored("/d/latest", fs)

    daily = lambda dt: dt.strftime("(%Y).*(%m).*(%d)")  # noqa: E731
    cases = [
        (Varying, "Outputs must be consistent over time, sorry; was"),
        (NotOnAFileSystem, "Output targets must be instances of FileSystemTarget; was"),
        (Dateless, "Couldn't deduce datehour representation in output path '/d/latest'"),
    ]
    for task_cls, message in cases:
        with pytest.raises(NotImplementedError, match=message.replace("(", r"\(").replace("'", "'")):
            list(_get_filesystems_and_globs(lambda dt, cls=task_cls: cls(day=dt.date()), daily))


def test_most_common_gives_the_most_frequent_item_and_its_count():
    assert most_common(["a", "b", "b", "c", "b"]) == ("b", 3)


# -- inference from listings -------------------------------------------------------------------------------


def test_a_remote_filesystem_is_asked_only_about_the_narrowed_globs_never_each_output():
    stored = {f"/logs/2024/01/{day:02d}/dump.txt" for day in (2, 3, 7, 10)}
    fs = GlobbingFileSystem(stored)

    class Log(Task):
        day = DateParameter()

        def output(self):
            return Stored(f"/logs/{self.day:%Y/%m/%d}/dump.txt", fs)

    range_task = RangeDaily(of=Log, start=date(2024, 1, 1), now=NOW)
    assert [task.day.day for task in range_task.requires()] == [1, 4, 5, 6, 8, 9]
    assert fs.asked == ["/logs/2024/01/0[1-9]", "/logs/2024/01/1[0]"]
    assert fs.listed == ["/logs/2024/01/0[1-9]", "/logs/2024/01/1[0]"]


def test_a_glob_that_does_not_exist_is_not_listed_and_its_days_are_missing():
    fs = GlobbingFileSystem({"/logs/2024/01/10/dump.txt"})

    class Log(Task):
        day = DateParameter()

        def output(self):
            return Stored(f"/logs/{self.day:%Y/%m/%d}/dump.txt", fs)

    missing = infer_bulk_complete_from_fs(
        [datetime(2024, 1, d) for d in (8, 9, 10)],
        lambda dt: Log(day=dt.date()),
        lambda dt: dt.strftime("(%Y).*(%m).*(%d)"),
    )
    assert missing == [datetime(2024, 1, 8), datetime(2024, 1, 9)]
    assert fs.listed == ["/logs/2024/01/10"]


def test_range_daily_on_the_local_disk_lists_directories_and_never_asks_for_an_output(tmp_path):
    fs = CountingFileSystem()
    dump = dump_task(fs)
    for day in (2, 3, 7, 10):
        touch(tmp_path / "2024" / "01" / f"{day:02d}" / "dump.txt")
    range_task = RangeDaily(of=dump, of_params={"root": str(tmp_path)}, start=date(2024, 1, 1), now=NOW)
    assert required_days(range_task) == [1, 4, 5, 6, 8, 9]
    assert fs.listed and all(os.path.isdir(path) for path in fs.listed)
    assert not set(fs.asked) & output_paths(range_task, range(1, 11))


def test_a_range_whose_outputs_do_not_exist_yet_is_entirely_missing(tmp_path):
    fs = CountingFileSystem()
    range_task = RangeDaily(
        of=dump_task(fs), of_params={"root": str(tmp_path)}, start=date(2024, 1, 1), now=NOW
    )
    assert required_days(range_task) == list(range(1, 11))


def test_a_task_without_outputs_is_judged_by_its_requirements_outputs(tmp_path):
    fs = CountingFileSystem()
    dump = dump_task(fs)

    class Both(WrapperTask):
        day = DateParameter()

        def requires(self):
            return dump(root=str(tmp_path), day=self.day)

    touch(tmp_path / "2024" / "01" / "09" / "dump.txt")
    range_task = RangeDaily(of=Both, start=date(2024, 1, 8), now=NOW)
    assert required_days(range_task) == [8, 10]
    assert fs.listed


def test_range_hourly_infers_missing_hours_from_listings(tmp_path):
    fs = CountingFileSystem()

    class Hourly(Task):
        hour = DateHourParameter()

        def output(self):
            return local_output(fs, str(tmp_path), f"{self.hour:%Y-%m-%d}", f"{self.hour:%H}.log")

    for hour in (3, 4, 11):
        touch(tmp_path / "2024-01-10" / f"{hour:02d}.log")
    range_task = RangeHourly(of=Hourly, start=datetime(2024, 1, 10, 0), now=NOW)
    assert [task.hour.hour for task in range_task.requires()] == [0, 1, 2, 5, 6, 7, 8, 9, 10, 12]
    assert fs.listed == [str(tmp_path / "2024-01-10")]


def test_range_by_minutes_infers_missing_slots_from_listings(tmp_path):
    fs = CountingFileSystem()

    class Sampled(Task):
        at = DateMinuteParameter()

        def output(self):
            return local_output(fs, str(tmp_path), f"{self.at:%Y%m%d}", f"{self.at:%H%M}.csv")

    touch(tmp_path / "20240110" / "1215.csv")
    range_task = RangeByMinutes(of=Sampled, start=datetime(2024, 1, 10, 12, 0), minutes_interval=15, now=NOW)
    assert [f"{task.at:%H:%M}" for task in range_task.requires()] == ["12:00"]  # 12:30 is now: excluded
    assert fs.listed == [str(tmp_path / "20240110")]


def test_a_task_with_its_own_complete_is_still_judged_by_its_listed_outputs_as_in_luigi(tmp_path):
    fs = CountingFileSystem()

    class Checked(Task):
        day = DateParameter()

        def output(self):
            return local_output(fs, str(tmp_path), f"{self.day}.txt")

        def complete(self):
            return False

    for day in (8, 9):
        touch(tmp_path / f"2024-01-{day:02d}.txt")
    assert required_days(RangeDaily(of=Checked, start=date(2024, 1, 7), now=NOW)) == [7, 10]


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


@pytest.mark.parametrize("range_cls", [RangeDaily, RangeDailyBase])
def test_every_daily_range_agrees_on_what_is_missing(tmp_path, range_cls):
    fs = CountingFileSystem()
    dump = dump_task(fs)
    touch(tmp_path / "2024" / "01" / "04" / "dump.txt")
    range_task = range_cls(of=dump, of_params={"root": str(tmp_path)}, start=date(2024, 1, 1), now=NOW)
    assert required_days(range_task) == [1, 2, 3, 5, 6, 7, 8, 9, 10]


def test_a_task_with_no_outputs_at_all_is_asked_whether_it_is_complete():
    class Outputless(Task):
        day = DateParameter()

        def complete(self):
            return self.day.day == 9

    assert required_days(RangeDaily(of=Outputless, start=date(2024, 1, 8), now=NOW)) == [8, 10]
