"""Typed parameters declared on a Task: values normalized, task ids from serialized values, config parsed."""

from __future__ import annotations

import datetime
import enum
import re

import pytest

import luigi.parameter as lp
from luigi import configuration
from luigi.freezing import FrozenOrderedDict

task = pytest.importorskip("luigi.task")


class Speed(enum.Enum):
    SLOW = 1
    FAST = 2


def _typed_task_class() -> type:
    class Typed(task.Task):
        day = lp.DateParameter()
        count = lp.IntParameter(default=1)
        verbose = lp.BoolParameter()
        speed = lp.EnumParameter(enum=Speed, default=Speed.SLOW)
        options = lp.DictParameter(default={})
        items = lp.ListParameter(default=[])
        wait = lp.TimeDeltaParameter(default=datetime.timedelta(minutes=5))
        label = lp.OptionalStrParameter()

    return Typed


def test_task_values_are_normalized_and_hashable():
    typed_cls = _typed_task_class()
    instance = typed_cls(day=datetime.datetime(2024, 3, 5, 12), options={"a": [1, 2]}, items=[1, [2]])
    assert instance.day == datetime.date(2024, 3, 5)
    assert instance.verbose is False
    assert instance.label is None
    assert isinstance(instance.options, FrozenOrderedDict)
    assert instance.options == {"a": (1, 2)}
    assert instance.items == (1, (2,))
    hash(instance)


def test_task_round_trips_through_its_string_parameters():
    typed_cls = _typed_task_class()
    instance = typed_cls(
        day=datetime.date(2024, 3, 5),
        count=3,
        verbose=True,
        speed=Speed.FAST,
        options={"k": "v"},
        items=[1, 2],
        wait=datetime.timedelta(hours=1, seconds=2),
        label="x",
    )
    str_params = instance.to_str_params()
    assert str_params["day"] == "2024-03-05"
    assert str_params["verbose"] == "True"
    assert str_params["speed"] == "FAST"
    assert str_params["wait"] == "0 w 0 d 1 h 0 m 2 s"
    assert typed_cls.from_str_params(str_params) == instance


def test_equal_values_give_the_same_task_id():
    typed_cls = _typed_task_class()
    first = typed_cls(day=datetime.date(2024, 3, 5), options={"a": 1, "b": 2})
    second = typed_cls(day=datetime.datetime(2024, 3, 5, 23), options=FrozenOrderedDict(a=1, b=2))
    assert first.task_id == second.task_id


def test_config_values_are_parsed_by_the_parameter_type():
    typed_cls = _typed_task_class()
    config = configuration.get_config()
    config.set("Typed", "count", "7")
    config.set("Typed", "options", '{"from": "config"}')
    instance = typed_cls(day=datetime.date(2024, 3, 5))
    assert instance.count == 7
    assert instance.options == {"from": "config"}


def test_a_bad_config_value_names_the_entry_and_the_value():
    typed_cls = _typed_task_class()
    configuration.get_config().set("Typed", "count", "many")
    with pytest.raises(ValueError, match=r"Error when parsing the default value of 'count'") as caught:
        typed_cls(day=datetime.date(2024, 3, 5))
    # Luigi's text on top; the chained cause names the entry and the value.
    assert re.search(r"\[Typed\] count = 'many'.*'many' is not a valid integer", str(caught.value.__cause__))


def test_optional_parameter_on_a_task_warns_on_a_wrong_type():
    class WithOptional(task.Task):
        size = lp.OptionalIntParameter()

    with pytest.warns(lp.OptionalParameterTypeWarning, match='"size" with value "big"'):
        WithOptional(size="big")
