"""A pipeline as users write it, checked (never run) by mypy and pyright in test_type_checkers.py.

A ``reveals`` comment says what the line's ``reveal_type`` must show (module prefixes dropped); a line with
a ``plugin-error`` comment is a mistake that only mypy with ``plugins = luigi.mypy`` reports, with that text.
Nothing else may be reported by either checker.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import luigi
from luigi import date_interval
from luigi.task import flatten

if TYPE_CHECKING:
    from typing_extensions import reveal_type


class Color(enum.Enum):
    RED = 1
    BLUE = 2


class Kinds(luigi.Task):
    """One parameter of each kind, read on an instance."""

    text = luigi.Parameter(default="x")
    plain = luigi.StrParameter(default="x")
    count = luigi.IntParameter(default=1)
    ratio = luigi.FloatParameter(default=0.5)
    flag = luigi.BoolParameter()
    day = luigi.DateParameter(default=datetime.date(2024, 1, 1))
    month = luigi.MonthParameter(default=datetime.date(2024, 1, 1))
    year = luigi.YearParameter(default=datetime.date(2024, 1, 1))
    hour = luigi.DateHourParameter(default=datetime.datetime(2024, 1, 1))
    minute = luigi.DateMinuteParameter(default=datetime.datetime(2024, 1, 1))
    second = luigi.DateSecondParameter(default=datetime.datetime(2024, 1, 1))
    interval = luigi.DateIntervalParameter(default=date_interval.Date(2024, 1, 1))
    delay = luigi.TimeDeltaParameter(default=datetime.timedelta(hours=1))
    upstream = luigi.TaskParameter(default=luigi.Task)
    color = luigi.EnumParameter(enum=Color, default=Color.RED)
    colors = luigi.EnumListParameter(enum=Color, default=(Color.RED,))
    options = luigi.DictParameter(default={})
    items = luigi.ListParameter(default=[])
    pair = luigi.TupleParameter(default=(1, 2))
    bounded = luigi.NumericalParameter(var_type=int, min_value=0, max_value=10, default=1)
    mode = luigi.ChoiceParameter(choices=["fast", "slow"], default="fast")
    level = luigi.ChoiceParameter(choices=[1, 2, 3], var_type=int, default=1)
    modes = luigi.ChoiceListParameter(choices=["fast", "slow"], default=())
    where = luigi.PathParameter(default=Path("."))
    maybe_text = luigi.OptionalParameter()
    maybe_plain = luigi.OptionalStrParameter()
    maybe_count = luigi.OptionalIntParameter()
    maybe_ratio = luigi.OptionalFloatParameter()
    maybe_flag = luigi.OptionalBoolParameter()
    maybe_day = luigi.OptionalDateParameter()
    maybe_options = luigi.OptionalDictParameter()
    maybe_items = luigi.OptionalListParameter()
    maybe_pair = luigi.OptionalTupleParameter()
    maybe_where = luigi.OptionalPathParameter()
    maybe_mode = luigi.OptionalChoiceParameter(choices=["fast", "slow"])
    maybe_bounded = luigi.OptionalNumericalParameter(var_type=float, min_value=0.0, max_value=1.0)

    def run(self) -> None:
        reveal_type(self.text)  # reveals: str
        reveal_type(self.plain)  # reveals: str
        reveal_type(self.count)  # reveals: int
        reveal_type(self.ratio)  # reveals: float
        reveal_type(self.flag)  # reveals: bool
        reveal_type(self.day)  # reveals: date
        reveal_type(self.month)  # reveals: date
        reveal_type(self.year)  # reveals: date
        reveal_type(self.hour)  # reveals: datetime
        reveal_type(self.minute)  # reveals: datetime
        reveal_type(self.second)  # reveals: datetime
        reveal_type(self.interval)  # reveals: DateInterval
        reveal_type(self.delay)  # reveals: timedelta
        reveal_type(self.upstream)  # reveals: type[Task]
        reveal_type(self.color)  # reveals: Color
        reveal_type(self.colors)  # reveals: tuple[Color, ...]
        reveal_type(self.options)  # reveals: Mapping[Any, Any]
        reveal_type(self.items)  # reveals: tuple[Any, ...]
        reveal_type(self.pair)  # reveals: tuple[Any, ...]
        reveal_type(self.bounded)  # reveals: int
        reveal_type(self.mode)  # reveals: str
        reveal_type(self.level)  # reveals: int
        reveal_type(self.modes)  # reveals: tuple[str, ...]
        reveal_type(self.where)  # reveals: Path
        reveal_type(self.maybe_text)  # reveals: str | None
        reveal_type(self.maybe_plain)  # reveals: str | None
        reveal_type(self.maybe_count)  # reveals: int | None
        reveal_type(self.maybe_ratio)  # reveals: float | None
        reveal_type(self.maybe_flag)  # reveals: bool | None
        reveal_type(self.maybe_day)  # reveals: date | None
        reveal_type(self.maybe_options)  # reveals: Mapping[Any, Any] | None
        reveal_type(self.maybe_items)  # reveals: tuple[Any, ...] | None
        reveal_type(self.maybe_pair)  # reveals: tuple[Any, ...] | None
        reveal_type(self.maybe_where)  # reveals: Path | None
        reveal_type(self.maybe_mode)  # reveals: str | None
        reveal_type(self.maybe_bounded)  # reveals: float | None
        # Values are their types: no checker complains about using them as such.
        print(self.count + 1, self.day.isoformat(), self.where.name, self.color.name, self.delay.seconds)


reveal_type(Kinds.count)  # reveals: IntParameter
reveal_type(Kinds.color)  # reveals: EnumParameter[Color]
reveal_type(Kinds().count)  # reveals: int


class Retries(luigi.Config):
    attempts = luigi.IntParameter(default=3)


reveal_type(Retries().attempts)  # reveals: int


class Extract(luigi.Task):
    day = luigi.DateParameter()

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(f"/tmp/extract-{self.day}.csv")

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write("a,b\n")


class Clean(luigi.Task):
    """Unannotated overrides, as most pipelines have them."""

    day = luigi.DateParameter()

    def requires(self):
        return {"raw": [Extract(day=self.day), Extract(day=self.day - datetime.timedelta(days=1))]}

    def output(self):
        return {"clean": luigi.LocalTarget("/tmp/clean.csv"), "rejects": [luigi.LocalTarget("/tmp/rej.csv")]}

    def run(self):
        for target in self.input()["raw"]:
            with target.open() as source, self.output()["clean"].open("w") as out:
                out.write(source.read())


class Report(luigi.Task):
    """Annotated overrides returning nested structures of tasks and targets."""

    day = luigi.DateParameter()
    copies = luigi.IntParameter(default=1)

    def requires(self) -> dict[str, list[Extract] | tuple[Clean, Extract]]:
        return {"extracts": [Extract(day=self.day)], "pair": (Clean(day=self.day), Extract(day=self.day))}

    def output(self) -> list[luigi.LocalTarget]:
        return [luigi.LocalTarget(f"/tmp/report-{n}.txt") for n in range(self.copies)]

    def run(self) -> None:
        lines = [target.path for target in self.input()["extracts"]]
        for target in self.output():
            with target.open("w") as out:
                out.write("\n".join(lines))


class Chain(luigi.Task):
    """A generator of requirements and dynamic dependencies yielded from run()."""

    day = luigi.DateParameter()

    def requires(self) -> Iterator[luigi.Task]:
        yield Extract(day=self.day)
        yield Report(day=self.day)

    def output(self) -> dict[str, luigi.Target]:
        return {"done": luigi.LocalTarget("/tmp/chain.done")}

    def run(self) -> Iterator[luigi.Task]:
        more = yield Clean(day=self.day)
        print(more)


class Everything(luigi.WrapperTask):
    def requires(self) -> list[luigi.Task]:
        return [Chain(day=datetime.date(2024, 1, 1)), Report(datetime.date(2024, 1, 1), 2)]


class Raw(luigi.ExternalTask):
    def output(self) -> tuple[luigi.LocalTarget, luigi.LocalTarget]:
        return luigi.LocalTarget("/data/a"), luigi.LocalTarget("/data/b")


def existing_outputs(task: luigi.Task) -> list[str]:
    """Code that handles any task goes through flatten(), which takes every structure."""
    return [str(target) for target in flatten(task.output()) if target.exists()]


DAY = datetime.date(2024, 1, 1)
luigi.build([Everything(), Raw(), Report(DAY)], local_scheduler=True)
Report(day=DAY, copies="2")  # plugin-error: "copies" to "Report" has incompatible type "str"; expected "int"
Kinds(color=1)  # plugin-error: "color" to "Kinds" has incompatible type "int"; expected "Color"
Kinds(maybe_count="1")  # plugin-error: expected "int | None"
Kinds(items=[1, 2], where="/tmp", colors=[Color.BLUE], mode="fast", maybe_count=None)
