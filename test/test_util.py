"""``luigi.util``: inherits, requires, copies, delegates, common_params, previous (COMPAT b.4)."""

from __future__ import annotations

import datetime

import pytest

import luigi.parameter as p
from luigi import date_interval
from luigi.mock import MockFileSystem, MockTarget
from luigi.task import Task, WrapperTask
from luigi.util import common_params, copies, delegates, get_previous_completed, inherits, previous, requires


class Parent(Task):
    date = p.DateParameter()
    region = p.Parameter(default="eu")

    def output(self):
        return MockTarget(f"parent/{self.date}/{self.region}")


class SizedParent(Task):
    size = p.IntParameter(default=1)


def test_inherits_copies_missing_parameters_and_keeps_own_ones():
    @inherits(Parent)
    class Child(Task):
        region = p.Parameter(default="us")
        extra = p.Parameter(default="x")

    names = [name for name, _ in Child.get_params()]
    assert set(names) == {"date", "region", "extra"}
    child = Child(date=datetime.date(2024, 1, 2))
    assert child.region == "us"
    assert child.clone_parent() == Parent(date=datetime.date(2024, 1, 2), region="us")


def test_inherits_several_parents_gives_clone_parents_as_a_list():
    @inherits(Parent, SizedParent)
    class Child(Task):
        pass

    child = Child(date=datetime.date(2024, 1, 2), size=5)
    assert child.clone_parents() == [Parent(date=datetime.date(2024, 1, 2)), SizedParent(size=5)]
    assert child.clone_parent() == Parent(date=datetime.date(2024, 1, 2))
    assert child.clone_parent(region="jp").region == "jp"


def test_inherits_by_keyword_gives_clone_parents_as_a_dict():
    @inherits(main=Parent, other=SizedParent)
    class Child(Task):
        pass

    child = Child(date=datetime.date(2024, 1, 2))
    assert child.clone_parents() == {"main": Parent(date=datetime.date(2024, 1, 2)), "other": SizedParent()}
    assert not hasattr(child, "clone_parent")


def test_inherits_and_requires_reject_no_tasks_or_mixed_forms():
    for decorator in (inherits, requires):
        with pytest.raises(TypeError):
            decorator()
        with pytest.raises(TypeError):
            decorator(Parent, other=SizedParent)


def test_requires_one_parent_returns_that_task():
    @requires(Parent)
    class Child(Task):
        pass

    child = Child(date=datetime.date(2024, 1, 2))
    assert child.requires() == Parent(date=datetime.date(2024, 1, 2))
    assert child.input().path == "parent/2024-01-02/eu"


def test_requires_several_parents_returns_a_list_and_keywords_a_dict():
    @requires(Parent, SizedParent)
    class Listed(Task):
        pass

    @requires(main=Parent)
    class Named(Task):
        pass

    day = datetime.date(2024, 1, 2)
    assert Listed(date=day).requires() == [Parent(date=day), SizedParent()]
    assert Named(date=day).requires() == {"main": Parent(date=day)}


def test_copies_writes_the_input_lines_to_the_output():
    MockFileSystem().clear()
    day = datetime.date(2024, 1, 2)
    with Parent(date=day).output().open("w") as handle:
        handle.write("one\ntwo\n")

    @copies(Parent)
    class Copy(Task):
        def output(self):
            return MockTarget(f"copy/{self.date}")

    copy = Copy(date=day)
    assert copy.requires() == Parent(date=day)
    copy.run()
    with copy.output().open("r") as handle:
        assert handle.read() == "one\ntwo\n"


def test_delegates_adds_subtask_deps_and_runs_subtasks_first():
    ran = []

    class Leaf(Task):
        def run(self):
            ran.append("leaf")

    class Sub(Task):
        def requires(self):
            return Leaf()

        def run(self):
            ran.append("sub")

    @delegates
    class Main(WrapperTask):
        def subtasks(self):
            return [Sub()]

        def requires(self):
            return SizedParent()

        def run(self):
            ran.append("main")

    main = Main()
    assert main.task_family == "Main"
    assert main.deps() == [SizedParent(), Leaf()]
    main.run()
    assert ran == ["sub", "main"]


def test_delegates_requires_a_subtasks_method():
    class NoSubtasks(Task):
        pass

    with pytest.raises(AttributeError, match="subtasks"):
        delegates(NoSubtasks)


def test_common_params_gives_the_values_both_tasks_declare():
    class Wider(Task):
        date = p.DateParameter()
        region = p.Parameter(default="eu")
        unrelated = p.Parameter(default="u")

    day = datetime.date(2024, 1, 2)
    assert common_params(Wider(date=day, region="us"), Parent) == {"date": day, "region": "us"}
    with pytest.raises(TypeError):
        common_params(Wider(date=day), Parent(date=day))


@pytest.mark.parametrize(
    ("param", "value", "expected"),
    [
        (p.DateParameter(), datetime.date(2024, 3, 1), datetime.date(2024, 2, 29)),
        (p.DateParameter(interval=7), datetime.date(1970, 1, 15), datetime.date(1970, 1, 8)),
        (p.DateHourParameter(), datetime.datetime(2024, 1, 1, 0), datetime.datetime(2023, 12, 31, 23)),
        (p.DateMinuteParameter(), datetime.datetime(2024, 1, 1, 10, 0), datetime.datetime(2024, 1, 1, 9, 59)),
        (
            p.DateSecondParameter(),
            datetime.datetime(2024, 1, 1, 0, 0, 0),
            datetime.datetime(2023, 12, 31, 23, 59, 59),
        ),
        (p.MonthParameter(), datetime.date(2024, 1, 1), datetime.date(2023, 12, 1)),
        (p.YearParameter(), datetime.date(2024, 1, 1), datetime.date(2023, 1, 1)),
        (p.DateIntervalParameter(), date_interval.Week(2024, 1), date_interval.Week(2023, 52)),
    ],
)
def test_previous_steps_the_date_parameter_back_one_period(param, value, expected):
    task_cls = type("Dated", (Task,), {"when": param, "label": p.Parameter(default="keep")})
    earlier = previous(task_cls(when=value, label="mine"))
    assert earlier.when == expected
    assert earlier.label == "mine"


def test_previous_needs_exactly_one_date_parameter():
    class NoDate(Task):
        x = p.Parameter(default="x")

    class TwoDates(Task):
        a = p.DateParameter(default=datetime.date(2024, 1, 1))
        b = p.DateParameter(default=datetime.date(2024, 1, 1))

    with pytest.raises(NotImplementedError):
        previous(NoDate())
    with pytest.raises(NotImplementedError, match="a, b"):
        previous(TwoDates())


def test_get_previous_completed_walks_back_until_a_complete_task():
    done = {datetime.date(2024, 1, 7)}

    class Daily(Task):
        date = p.DateParameter()

        def complete(self):
            return self.date in done

    found = get_previous_completed(Daily(date=datetime.date(2024, 1, 10)))
    assert found == Daily(date=datetime.date(2024, 1, 7))
    assert get_previous_completed(Daily(date=datetime.date(2024, 1, 10)), max_steps=2) is None
