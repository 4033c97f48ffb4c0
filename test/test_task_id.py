"""Task ids must be byte-for-byte Luigi's: ``Family_<summary>_<hash10>`` (COMPAT b.2)."""

from __future__ import annotations

import datetime
import enum
import hashlib
import json
import pathlib
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import luigi.parameter as p
from luigi import date_interval
from luigi.parameter import ParameterVisibility
from luigi.task import Task, task_id_str
from luigi.task_register import Register


def expected_id(family: str, serialized: dict[str, str]) -> str:
    """The id rule written out independently of the implementation."""
    digest = hashlib.md5(
        json.dumps(serialized, separators=(",", ":"), sort_keys=True).encode("utf-8")
    ).hexdigest()
    first_three = [serialized[name][:16] for name in sorted(serialized)[:3]]
    summary = re.sub(r"[^A-Za-z0-9_]", "_", "_".join(first_three))
    return f"{family}_{summary}_{digest[:10]}"


class Colour(enum.Enum):
    red = 1
    green = 2


# (parameter declaration, value given to the constructor, serialized string that enters the id)
CASES = [
    ("str", p.Parameter(), "hello", "hello"),
    ("str_with_symbols", p.Parameter(), "a b/c:d-e.f", "a b/c:d-e.f"),
    ("long_str", p.Parameter(), "x" * 40, "x" * 40),
    ("unicode", p.Parameter(), "caf\u00e9 \u2603", "caf\u00e9 \u2603"),
    ("empty_str", p.Parameter(), "", ""),
    ("int", p.IntParameter(), 42, "42"),
    ("negative_int", p.IntParameter(), -7, "-7"),
    ("float", p.FloatParameter(), 1.5, "1.5"),
    ("bool_true", p.BoolParameter(), True, "True"),
    ("bool_false", p.BoolParameter(), False, "False"),
    ("date", p.DateParameter(), datetime.date(2024, 1, 5), "2024-01-05"),
    ("date_hour", p.DateHourParameter(), datetime.datetime(2024, 1, 5, 13), "2024-01-05T13"),
    ("date_minute", p.DateMinuteParameter(), datetime.datetime(2024, 1, 5, 13, 7), "2024-01-05T1307"),
    ("date_second", p.DateSecondParameter(), datetime.datetime(2024, 1, 5, 13, 7, 9), "2024-01-05T130709"),
    ("month", p.MonthParameter(), datetime.date(2024, 3, 1), "2024-03"),
    ("year", p.YearParameter(), datetime.date(2024, 1, 1), "2024"),
    ("week_interval", p.DateIntervalParameter(), date_interval.Week(2024, 1), "2024-W01"),
    ("timedelta", p.TimeDeltaParameter(), datetime.timedelta(days=1, hours=2), "0 w 1 d 2 h 0 m 0 s"),
    ("list", p.ListParameter(), [1, 2], "[1, 2]"),
    ("dict", p.DictParameter(), {"a": 1, "b": [1, 2]}, '{"a": 1, "b": [1, 2]}'),
    ("tuple", p.TupleParameter(), ((1, 2), (3, 4)), "[[1, 2], [3, 4]]"),
    ("enum", p.EnumParameter(enum=Colour), Colour.green, "green"),
    ("choice", p.ChoiceParameter(choices=["a", "b"]), "b", "b"),
    ("optional_none", p.OptionalParameter(), None, ""),
    ("path", p.PathParameter(), pathlib.Path("/tmp/data.csv"), "/tmp/data.csv"),
]


@pytest.mark.parametrize(("name", "param", "value", "serialized"), CASES, ids=[case[0] for case in CASES])
def test_task_id_of_one_parameter_follows_luigis_rule(name, param, value, serialized):
    task_cls = type("Single", (Task,), {name: param})
    task = task_cls(**{name: value})
    assert task.task_id == expected_id("Single", {name: serialized})
    assert task.to_str_params(only_significant=True, only_public=True) == {name: serialized}


def test_task_without_parameters_has_empty_summary():
    class Foo(Task):
        pass

    assert Foo().task_id == "Foo__99914b932b"


def test_task_ids_verified_by_hand():
    class Bar(Task):
        x = p.Parameter()
        y = p.IntParameter(default=3)

    class Report(Task):
        date = p.DateParameter()

    assert Bar(x="a").task_id == "Bar_a_3_deb467bcec"
    assert Report(date=datetime.date(2024, 1, 5)).task_id == "Report_2024_01_05_1937f21902"


def test_summary_uses_first_three_parameters_by_name_truncated_to_16_chars():
    class Many(Task):
        d = p.Parameter()
        c = p.Parameter()
        b = p.Parameter()
        a = p.Parameter()

    task = Many(a="A" * 20, b="b-b", c="c", d="never in summary")
    assert task.task_id.startswith("Many_" + "A" * 16 + "_b_b_c_")
    assert task.task_id == expected_id("Many", {"a": "A" * 20, "b": "b-b", "c": "c", "d": "never in summary"})


def test_non_ascii_characters_each_become_one_underscore_and_are_escaped_in_the_hash():
    # json.dumps escapes non-ASCII (ensure_ascii), so the hash is over '{"s":"\u00e9t\u00e9"}'.
    assert task_id_str("T", {"s": "\u00e9t\u00e9"}) == "T__t__385cb88fb0"


def test_insignificant_hidden_and_private_parameters_are_left_out_of_the_id():
    class Mixed(Task):
        shown = p.Parameter()
        quiet = p.Parameter(significant=False)
        hidden = p.Parameter(visibility=ParameterVisibility.HIDDEN)
        secret = p.Parameter(visibility=ParameterVisibility.PRIVATE)

    task = Mixed(shown="s", quiet="q", hidden="h", secret="x")
    assert task.task_id == expected_id("Mixed", {"shown": "s"})
    assert task.task_id == Mixed(shown="s", quiet="other", hidden="other", secret="other").task_id


def test_namespaced_family_keeps_its_dots_in_the_id():
    class Job(Task):
        task_namespace = "my.ns"
        n = p.IntParameter()

    assert Job(n=1).task_id == expected_id("my.ns.Job", {"n": "1"})
    assert Job(n=1).task_id.startswith("my.ns.Job_1_")


def test_task_id_str_is_the_public_helper():
    assert task_id_str("Foo", {}) == "Foo__99914b932b"
    assert task_id_str("Foo", {"b": "2", "a": "1"}) == expected_id("Foo", {"a": "1", "b": "2"})


class Quad(Task):
    """Module-level so hypothesis examples share one class."""

    w = p.Parameter()
    x = p.Parameter()
    y = p.Parameter()
    z = p.Parameter()


_values = st.text(max_size=30)
_kwargs = st.fixed_dictionaries({"w": _values, "x": _values, "y": _values, "z": _values})


@settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kwargs=_kwargs, order=st.permutations(["w", "x", "y", "z"]))
def test_task_id_does_not_depend_on_keyword_order(kwargs, order):
    Register.disable_instance_cache()
    try:
        reordered = {name: kwargs[name] for name in order}
        assert Quad(**reordered).task_id == Quad(**kwargs).task_id == expected_id("Quad", kwargs)
    finally:
        Register.clear_instance_cache()


@settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=_kwargs, second=_kwargs)
def test_distinct_parameter_values_give_distinct_task_ids(first, second):
    if first == second:
        assert Quad(**first).task_id == Quad(**second).task_id
    else:
        assert Quad(**first).task_id != Quad(**second).task_id
