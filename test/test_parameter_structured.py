"""Dict, list and tuple parameters: JSON in and out, frozen values, and optional schema checks."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from luigi.freezing import FrozenOrderedDict
from luigi.parameter import DictParameter, ListParameter, TupleParameter

json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=15,
)


class RejectNegatives:
    """A stand-in for a jsonschema validator: anything with a ``validate`` method is accepted as a schema."""

    def __init__(self) -> None:
        self.seen: list[object] = []

    def validate(self, value: object) -> None:
        self.seen.append(value)
        if any(item < 0 for item in (value.values() if isinstance(value, dict) else value)):
            raise ValueError(f"{value!r} has a negative number")


def test_dict_parameter_parses_json_into_a_frozen_ordered_dict():
    param = DictParameter()
    value = param.parse('{"b": 1, "a": [1, {"c": 2}]}')
    assert isinstance(value, FrozenOrderedDict)
    assert list(value) == ["b", "a"]
    assert value["a"] == [1, FrozenOrderedDict(c=2)]  # arrays stay lists until normalize freezes them
    hash(param.normalize(value))


def test_dict_parameter_serializes_as_json_unwrapping_frozen_dicts():
    param = DictParameter()
    assert param.serialize(param.normalize({"a": {"b": [1, 2]}})) == '{"a": {"b": [1, 2]}}'


def test_dict_parameter_normalizes_plain_dicts_to_frozen_ones():
    value = DictParameter().normalize({"a": [1, 2]})
    assert isinstance(value, FrozenOrderedDict)
    assert value == {"a": (1, 2)}


def test_dict_parameter_returns_non_string_values_unchanged_from_parse():
    value = {"already": "parsed"}
    assert DictParameter().parse(value) is value  # type: ignore[arg-type]


def test_dict_parameter_rejects_invalid_json_naming_the_text():
    with pytest.raises(ValueError, match=r"'\{a: 1\}' is not valid JSON .*expected a JSON object"):
        DictParameter().parse("{a: 1}")


def test_dict_parameter_rejects_json_that_is_not_an_object():
    with pytest.raises(ValueError, match=r"'\[1, 2\]' is not a JSON object"):
        DictParameter().parse("[1, 2]")


@given(st.dictionaries(st.text(max_size=5), json_values, max_size=4))
def test_dict_parameter_round_trips(value):
    param = DictParameter()
    normalized = param.normalize(value)
    assert param.normalize(param.parse(param.serialize(normalized))) == normalized
    assert json.loads(param.serialize(normalized)) == value


def test_dict_parameter_validates_with_an_object_that_has_validate():
    schema = RejectNegatives()
    param = DictParameter(schema=schema)
    assert param.normalize(FrozenOrderedDict(a=1)) == {"a": 1}
    assert schema.seen == [{"a": 1}]
    assert type(schema.seen[0]) is dict  # the validator sees plain JSON types
    with pytest.raises(ValueError, match="negative"):
        param.normalize({"a": -1})


def test_dict_parameter_with_a_json_schema_warns_and_ignores_it_without_jsonschema(monkeypatch):
    monkeypatch.setattr("luigi.parameter._JSONSCHEMA_ENABLED", False)  # as when jsonschema is missing
    with pytest.warns(UserWarning, match="'jsonschema' package is not installed"):
        param = DictParameter(schema={"type": "object", "properties": {"a": {"type": "string"}}})
    assert param.normalize({"a": 1}) == {"a": 1}


def test_dict_parameter_validates_with_jsonschema_when_installed():
    jsonschema = pytest.importorskip("jsonschema")
    param = DictParameter(schema={"type": "object", "properties": {"a": {"type": "string"}}})
    assert param.normalize({"a": "x"}) == {"a": "x"}
    with pytest.raises(jsonschema.ValidationError):
        param.normalize({"a": 1})


def test_list_parameter_parses_json_arrays_into_tuples():
    param = ListParameter()
    parsed = param.parse('[1, [2, 3], {"a": [4]}]')
    assert parsed == [1, [2, 3], FrozenOrderedDict(a=[4])]
    assert param.normalize(parsed) == (1, (2, 3), FrozenOrderedDict(a=(4,)))
    assert param.normalize([1, [2]]) == (1, (2,))


def test_list_parameter_serializes_as_json():
    assert ListParameter().serialize((1, ("a", None))) == '[1, ["a", null]]'


def test_list_parameter_rejects_json_that_is_not_an_array():
    with pytest.raises(ValueError, match="'5' is not a JSON array"):
        ListParameter().parse("5")


def test_list_parameter_rejects_invalid_json():
    with pytest.raises(ValueError, match=r"'\[1, 2' is not valid JSON"):
        ListParameter().parse("[1, 2")


def test_list_parameter_validates_with_a_schema_object():
    param = ListParameter(schema=RejectNegatives())
    assert param.normalize((1, 2)) == (1, 2)
    with pytest.raises(ValueError, match="negative"):
        param.normalize([1, -2])


@given(st.lists(json_values, max_size=4))
def test_list_parameter_round_trips(value):
    param = ListParameter()
    normalized = param.normalize(value)
    hash(normalized)
    assert param.normalize(param.parse(param.serialize(normalized))) == normalized


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[[1, 2], [3, 4]]", ((1, 2), (3, 4))),
        ("[1, 2]", (1, 2)),
        ("((1, 2), (3, 4))", ((1, 2), (3, 4))),
        ("(1, 'a')", (1, "a")),
        ("[]", ()),
    ],
)
def test_tuple_parameter_parses_json_or_python_literals(text, expected):
    assert TupleParameter().parse(text) == expected


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("'abc'", ValueError, "^Parsed result cannot be a string$"),
        ('"abc"', ValueError, "^Parsed result cannot be a string$"),
        ("5", ValueError, "is not a valid tuple"),
        ("{'a': 1}", ValueError, "is not a valid tuple"),
        ("(1, 2", SyntaxError, None),  # ast.literal_eval's own errors pass through, as in Luigi
        ("__import__('os')", ValueError, "malformed"),
    ],
)
def test_tuple_parameter_rejects_what_is_not_a_tuple(text, error, message):
    with pytest.raises(error, match=message):
        TupleParameter().parse(text)


def test_tuple_parameter_serializes_as_json():
    assert TupleParameter().serialize(((1, 2), (3, 4))) == "[[1, 2], [3, 4]]"


@given(st.lists(st.lists(json_scalars, max_size=3), max_size=4))
def test_tuple_parameter_round_trips(value):
    param = TupleParameter()
    normalized = param.normalize(value)
    assert param.parse(param.serialize(normalized)) == normalized
