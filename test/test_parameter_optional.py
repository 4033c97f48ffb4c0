"""Optional* parameters: None as default, '' on the wire, and type warnings for anything else."""

from __future__ import annotations

import datetime
import warnings
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from luigi.freezing import FrozenOrderedDict
from luigi.parameter import (
    OptionalBoolParameter,
    OptionalChoiceParameter,
    OptionalDateParameter,
    OptionalDictParameter,
    OptionalFloatParameter,
    OptionalIntParameter,
    OptionalListParameter,
    OptionalNumericalParameter,
    OptionalParameter,
    OptionalParameterMixin,
    OptionalParameterTypeWarning,
    OptionalPathParameter,
    OptionalStrParameter,
    OptionalTupleParameter,
    Parameter,
)

# (parameter, a string it parses, the normalized value that gives, a value of the wrong type)
CASES = [
    (OptionalParameter(), "text", "text", 5),
    (OptionalStrParameter(), "text", "text", 5),
    (OptionalIntParameter(), "42", 42, "42"),
    (OptionalFloatParameter(), "1.5", 1.5, "1.5"),
    (OptionalBoolParameter(), "true", True, "true"),
    (OptionalPathParameter(), "a/b.txt", Path("a/b.txt"), 5),
    (OptionalDateParameter(), "2024-03-05", datetime.date(2024, 3, 5), "2024-03-05"),
    (OptionalDictParameter(), '{"a": 1}', FrozenOrderedDict(a=1), "{}"),
    (OptionalListParameter(), "[1, 2]", (1, 2), "[1, 2]"),
    (OptionalTupleParameter(), "[[1, 2]]", ((1, 2),), "[[1, 2]]"),
    (OptionalChoiceParameter(choices=["a", "b"]), "b", "b", 1),
    (OptionalNumericalParameter(var_type=int, min_value=0, max_value=10), "3", 3, 3.0),
]
IDS = [type(case[0]).__name__ for case in CASES]


@pytest.mark.parametrize(("param", "text", "value", "wrong"), CASES, ids=IDS)
def test_optional_parameters_parse_the_empty_string_to_none(param, text, value, wrong):
    assert param.parse("") is None


@pytest.mark.parametrize(("param", "text", "value", "wrong"), CASES, ids=IDS)
def test_optional_parameters_serialize_none_as_the_empty_string(param, text, value, wrong):
    assert param.serialize(None) == ""
    assert param.normalize(None) is None


@pytest.mark.parametrize(("param", "text", "value", "wrong"), CASES, ids=IDS)
def test_optional_parameters_default_to_none(param, text, value, wrong):
    assert param._default is None


@pytest.mark.parametrize(("param", "text", "value", "wrong"), CASES, ids=IDS)
def test_optional_parameters_parse_like_their_base_type_and_round_trip(param, text, value, wrong):
    parsed = param.parse(text)
    assert param.normalize(parsed) == value  # ListParameter.parse gives a list; normalize freezes it
    assert param.normalize(param.parse(param.serialize(parsed))) == param.normalize(parsed)


@pytest.mark.parametrize(("param", "text", "value", "wrong"), CASES, ids=IDS)
def test_optional_parameters_pass_non_strings_through_parse(param, text, value, wrong):
    assert param.parse(value) is value


@pytest.mark.parametrize(("param", "text", "value", "wrong"), CASES, ids=IDS)
def test_optional_parameters_warn_on_a_value_of_the_wrong_type(param, text, value, wrong):
    with pytest.warns(
        OptionalParameterTypeWarning,
        match=rf'{type(param).__name__} "p" with value ".*" is not of (any )?type.* or None\.$',
    ):
        param._warn_on_wrong_param_type("p", wrong)


@pytest.mark.parametrize(("param", "text", "value", "wrong"), CASES, ids=IDS)
def test_optional_parameters_accept_none_and_their_type_silently(param, text, value, wrong):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        param._warn_on_wrong_param_type("p", None)
        param._warn_on_wrong_param_type("p", value)


def test_optional_parameters_report_bad_text_like_their_base_type():
    with pytest.raises(ValueError, match="'abc' is not a valid integer"):
        OptionalIntParameter().parse("abc")
    with pytest.raises(ValueError, match="'c' is not one of the choices"):
        OptionalChoiceParameter(choices=["a", "b"]).parse("c")
    with pytest.raises(ValueError, match="'11' is outside the permitted values"):
        OptionalNumericalParameter(var_type=int, min_value=0, max_value=10).parse("11")


def test_optional_parameters_keep_a_given_default():
    assert OptionalIntParameter(7)._default == 7
    assert OptionalIntParameter(default=7)._default == 7
    assert OptionalChoiceParameter("a", choices=["a"])._default == "a"
    assert OptionalDateParameter(default=datetime.date(2024, 1, 1))._default == datetime.date(2024, 1, 1)


def test_optional_date_parameter_takes_the_interval_positionally_like_date_parameter():
    param = OptionalDateParameter(7)
    assert param.interval == 7
    assert param._default is None


def test_optional_bool_parameter_defaults_to_none_not_false():
    assert OptionalBoolParameter()._default is None
    assert OptionalBoolParameter().normalize(None) is None


def test_optional_path_parameter_accepts_strings_and_paths():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        OptionalPathParameter()._warn_on_wrong_param_type("p", "a/b")
        OptionalPathParameter()._warn_on_wrong_param_type("p", Path("a/b"))


def test_optional_parameter_mixin_makes_a_custom_type_optional():
    class Upper(Parameter):
        def parse(self, x):
            return x.upper()

    class OptionalUpper(OptionalParameterMixin, Upper):
        expected_type = str

    param = OptionalUpper()
    assert param.parse("abc") == "ABC"
    assert param.parse("") is None
    assert param.serialize(None) == ""


def test_optional_parameters_never_enumerate():
    # Luigi's Optional* parameters form no ranges in the summary, even over integers.
    assert OptionalIntParameter().next_in_enumeration(None) is None
    assert OptionalIntParameter().next_in_enumeration(1) is None


@given(st.none() | st.integers())
def test_optional_int_parameter_round_trips_none_and_integers(value):
    param = OptionalIntParameter()
    assert param.parse(param.serialize(value)) == value
