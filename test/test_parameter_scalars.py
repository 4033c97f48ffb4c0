"""Scalar parameters: str, int, float, bool, bounded numbers, choices and enums."""

from __future__ import annotations

import argparse
import enum
import operator

import pytest
from hypothesis import given
from hypothesis import strategies as st

import luigi.parameter as lp
from luigi.parameter import (
    BoolParameter,
    ChoiceListParameter,
    ChoiceParameter,
    EnumListParameter,
    EnumParameter,
    FloatParameter,
    IntParameter,
    NumericalParameter,
    ParameterException,
    StrParameter,
)


class Colour(enum.Enum):
    RED = 1
    GREEN = 2
    BLUE = 3


def test_str_parameter_parses_and_serializes_as_str():
    param = StrParameter()
    assert param.parse("hello") == "hello"
    assert param.serialize("hello") == "hello"
    assert param.normalize("hello") == "hello"


def test_str_parameter_warns_when_given_a_non_string():
    with pytest.warns(UserWarning, match='"name" with value "5" is not of type string'):
        StrParameter()._warn_on_wrong_param_type("name", 5)


@given(st.integers())
def test_int_parameter_round_trips(value):
    param = IntParameter()
    assert param.parse(param.serialize(value)) == value


def test_int_parameter_rejects_text_naming_the_value():
    with pytest.raises(ValueError, match="'abc' is not a valid integer"):
        IntParameter().parse("abc")


def test_int_parameter_enumerates_by_one():
    assert IntParameter().next_in_enumeration(41) == 42


@given(st.floats(allow_nan=False))
def test_float_parameter_round_trips(value):
    param = FloatParameter()
    assert param.parse(param.serialize(value)) == value


def test_float_parameter_rejects_text_naming_the_value():
    with pytest.raises(ValueError, match="'1.2.3' is not a valid float"):
        FloatParameter().parse("1.2.3")


def test_float_parameter_has_no_enumeration():
    assert FloatParameter().next_in_enumeration(1.0) is None


@pytest.mark.parametrize(
    ("text", "expected"), [("true", True), ("True", True), ("FALSE", False), ("false", False)]
)
def test_bool_parameter_parses_true_and_false_in_any_case(text, expected):
    assert BoolParameter().parse(text) is expected


def test_bool_parameter_rejects_other_text():
    with pytest.raises(ValueError, match="'yes' is not a valid boolean \\(expected true or false\\)"):
        BoolParameter().parse("yes")


def test_bool_parameter_defaults_to_false_and_keeps_a_given_default():
    assert BoolParameter()._default is False
    assert BoolParameter(default=True)._default is True
    assert BoolParameter(True)._default is True


def test_bool_parameter_normalizes_unparseable_values_to_none():
    param = BoolParameter()
    assert param.normalize(True) is True
    assert param.normalize("false") is False
    assert param.normalize("maybe") is None
    assert param.normalize(None) is None


@given(st.booleans())
def test_bool_parameter_round_trips(value):
    param = BoolParameter()
    assert param.parse(param.serialize(value)) is value


def _parse_flag(param: BoolParameter, argv: list[str]) -> object:
    parser = argparse.ArgumentParser()
    parser.add_argument("--flag", dest="flag", **param._parser_kwargs("flag", "Task"))
    return parser.parse_args(argv).flag


def test_implicit_bool_flag_takes_no_value():
    param = BoolParameter(description="Turn it on")
    kwargs = param._parser_kwargs("flag", "Task")
    assert kwargs["action"] == "store_true"
    assert kwargs["help"] == "Turn it on"
    assert _parse_flag(param, ["--flag"]) is True
    assert _parse_flag(param, []) is False


def test_explicit_bool_flag_takes_an_optional_value():
    param = BoolParameter(parsing=BoolParameter.EXPLICIT_PARSING)
    kwargs = param._parser_kwargs("flag", "Task")
    assert kwargs["nargs"] == "?"
    assert kwargs["const"] is True
    assert param.parse(_parse_flag(param, ["--flag"])) is True
    assert param.parse(_parse_flag(param, ["--flag", "false"])) is False
    assert param.parse(_parse_flag(param, ["--flag", "TRUE"])) is True


def test_bool_parsing_class_attribute_sets_the_default_mode(monkeypatch):
    monkeypatch.setattr(BoolParameter, "parsing", BoolParameter.EXPLICIT_PARSING)
    assert BoolParameter().parsing == "explicit"
    assert BoolParameter(parsing="implicit").parsing == "implicit"


def test_bool_parameter_rejects_an_unknown_parsing_mode():
    with pytest.raises(ParameterException, match="'sometimes'"):
        BoolParameter(parsing="sometimes")


def test_numerical_parameter_accepts_values_in_the_range():
    param = NumericalParameter(var_type=int, min_value=0, max_value=10)
    assert param.parse("0") == 0
    assert param.parse("9") == 9


def test_numerical_parameter_rejects_values_outside_the_range():
    param = NumericalParameter(var_type=int, min_value=0, max_value=10)
    with pytest.raises(ValueError, match=r"'10' is outside the permitted values: int in \[0, 10\)"):
        param.parse("10")


def test_numerical_parameter_rejects_values_of_the_wrong_type():
    param = NumericalParameter(var_type=int, min_value=0, max_value=10)
    with pytest.raises(ValueError, match="'2.5' is not a valid int"):
        param.parse("2.5")


def test_numerical_parameter_honours_the_comparison_operators():
    param = NumericalParameter(
        var_type=float, min_value=0.0, max_value=1.0, left_op=operator.lt, right_op=operator.le
    )
    assert param.parse("1.0") == 1.0
    with pytest.raises(ValueError):
        param.parse("0.0")
    assert param.description == "permitted values: float in (0.0, 1.0]"


def test_numerical_parameter_appends_the_range_to_the_description():
    param = NumericalParameter(var_type=int, min_value=1, max_value=5, description="How many")
    assert param.description == "How many permitted values: int in [1, 5)"


@pytest.mark.parametrize("missing", ["var_type", "min_value", "max_value"])
def test_numerical_parameter_requires_type_and_bounds(missing):
    kwargs = {"var_type": int, "min_value": 0, "max_value": 10}
    del kwargs[missing]
    with pytest.raises(ParameterException, match=missing):
        NumericalParameter(**kwargs)


@given(st.integers(min_value=-50, max_value=49))
def test_numerical_parameter_round_trips(value):
    param = NumericalParameter(var_type=int, min_value=-50, max_value=50)
    assert param.parse(param.serialize(value)) == value


def test_choice_parameter_accepts_one_of_the_choices():
    param = ChoiceParameter(choices=["red", "green"])
    assert param.parse("green") == "green"
    assert param.serialize("green") == "green"


def test_choice_parameter_rejects_other_values_listing_the_choices():
    with pytest.raises(ValueError, match=r"'purple' is not one of the choices \{'red', 'green'\}"):
        ChoiceParameter(choices=["red", "green"]).parse("purple")


def test_choice_parameter_normalize_rejects_values_outside_the_choices():
    param = ChoiceParameter(choices=["red", "green"])
    assert param.normalize("red") == "red"
    with pytest.raises(ValueError, match="'blue'"):
        param.normalize("blue")


def test_choice_parameter_converts_with_var_type():
    param = ChoiceParameter(choices=[1, 2, 3], var_type=int)
    assert param.parse("2") == 2
    with pytest.raises(ValueError, match="'x' is not a valid int"):
        param.parse("x")


def test_choice_parameter_appends_the_choices_to_the_description():
    assert ChoiceParameter(choices=["a", "b"]).description == "Choices: {a, b}"
    assert ChoiceParameter(choices=["a", "b"], description="Mode.").description == "Mode. Choices: {a, b}"


def test_choice_parameter_requires_choices():
    with pytest.raises(ParameterException, match="choices"):
        ChoiceParameter()


def test_choice_list_parameter_parses_comma_separated_choices():
    param = ChoiceListParameter(choices=["a", "b", "c"])
    assert param.parse("a,c") == ("a", "c")
    assert param.parse("") == ()
    assert param.serialize(("c", "a")) == "c,a"
    assert param.normalize(["b"]) == ("b",)


def test_choice_list_parameter_checks_every_element():
    with pytest.raises(ValueError, match=r"'d' is not one of the choices \{'a', 'b'\}"):
        ChoiceListParameter(choices=["a", "b"]).parse("a,d")


@given(st.lists(st.sampled_from([1, 2, 3])))
def test_choice_list_parameter_round_trips(values):
    param = ChoiceListParameter(choices=[1, 2, 3], var_type=int)
    assert param.parse(param.serialize(tuple(values))) == tuple(values)


def test_enum_parameter_parses_member_names():
    param = EnumParameter(enum=Colour)
    assert param.parse("GREEN") is Colour.GREEN
    assert param.serialize(Colour.BLUE) == "BLUE"


def test_enum_parameter_rejects_unknown_names_listing_the_members():
    with pytest.raises(
        ValueError, match="'PINK' is not a member of Colour \\(expected one of: RED, GREEN, BLUE\\)"
    ):
        EnumParameter(enum=Colour).parse("PINK")


def test_enum_parameter_requires_the_enum_keyword():
    with pytest.raises(ParameterException, match="enum class must be specified"):
        EnumParameter()


@given(st.sampled_from(Colour))
def test_enum_parameter_round_trips(member):
    param = EnumParameter(enum=Colour)
    assert param.parse(param.serialize(member)) is member


def test_enum_list_parameter_parses_comma_separated_names():
    param = EnumListParameter(enum=Colour)
    assert param.parse("RED,BLUE") == (Colour.RED, Colour.BLUE)
    assert param.parse("") == ()
    assert param.serialize((Colour.GREEN, Colour.RED)) == "GREEN,RED"
    assert param.normalize([Colour.RED]) == (Colour.RED,)


def test_enum_list_parameter_rejects_unknown_names():
    with pytest.raises(ValueError, match="'PINK' is not a member of Colour"):
        EnumListParameter(enum=Colour).parse("RED,PINK")


@given(st.lists(st.sampled_from(Colour)))
def test_enum_list_parameter_round_trips(members):
    param = EnumListParameter(enum=Colour)
    assert param.parse(param.serialize(tuple(members))) == tuple(members)


def test_scalar_parameters_are_exported_from_luigi_parameter():
    for name in [
        "StrParameter",
        "IntParameter",
        "FloatParameter",
        "BoolParameter",
        "NumericalParameter",
        "ChoiceParameter",
        "ChoiceListParameter",
        "EnumParameter",
        "EnumListParameter",
    ]:
        assert name in lp.__all__
        assert issubclass(getattr(lp, name), lp.Parameter)
