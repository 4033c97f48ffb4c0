"""FrozenOrderedDict and recursive freezing: what makes dict and list parameter values hashable."""

from __future__ import annotations

import json
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from luigi.freezing import FrozenOrderedDict, recursively_freeze, recursively_unfreeze

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)


def test_frozen_dict_keeps_insertion_order():
    frozen = FrozenOrderedDict([("b", 1), ("a", 2), ("c", 3)])
    assert list(frozen) == ["b", "a", "c"]
    assert list(frozen.items()) == [("b", 1), ("a", 2), ("c", 3)]


def test_frozen_dict_equals_a_dict_with_the_same_items():
    assert FrozenOrderedDict(a=1, b=2) == {"b": 2, "a": 1}
    assert FrozenOrderedDict(a=1) != {"a": 2}


def test_equal_frozen_dicts_hash_equal_whatever_their_order():
    first = FrozenOrderedDict([("a", 1), ("b", 2)])
    second = FrozenOrderedDict([("b", 2), ("a", 1)])
    assert first == second
    assert hash(first) == hash(second)
    assert len({first, second}) == 1


def test_frozen_dict_cannot_be_changed():
    frozen = FrozenOrderedDict(a=1)
    with pytest.raises(TypeError):
        frozen["a"] = 2  # type: ignore[index]
    with pytest.raises(AttributeError):
        frozen._items = {}  # type: ignore[misc]
    assert frozen == {"a": 1}


def test_get_wrapped_gives_a_plain_dict_copy_for_json():
    frozen = FrozenOrderedDict(a=1, b=2)
    wrapped = frozen.get_wrapped()
    wrapped["c"] = 3
    assert json.dumps(frozen.get_wrapped()) == '{"a": 1, "b": 2}'
    assert "c" not in frozen


def test_frozen_dict_survives_pickling():
    frozen = recursively_freeze({"a": [1, {"b": 2}]})
    restored = pickle.loads(pickle.dumps(frozen))
    assert restored == frozen
    assert hash(restored) == hash(frozen)
    assert isinstance(restored, FrozenOrderedDict)


def test_repr_is_the_plain_dicts():
    assert repr(FrozenOrderedDict(a=1, b=FrozenOrderedDict(c=(2,)))) == "{'a': 1, 'b': {'c': (2,)}}"


def test_recursively_freeze_turns_dicts_and_lists_into_hashable_forms():
    frozen = recursively_freeze({"a": [1, 2, {"b": [3]}], "c": (4, [5])})
    assert isinstance(frozen, FrozenOrderedDict)
    assert frozen["a"] == (1, 2, FrozenOrderedDict(b=(3,)))
    assert frozen["c"] == (4, (5,))
    hash(frozen)


def test_recursively_freeze_leaves_scalars_alone():
    assert recursively_freeze("text") == "text"
    assert recursively_freeze(3) == 3
    assert recursively_freeze(None) is None


def test_recursively_unfreeze_gives_plain_dicts_and_lists():
    value = recursively_unfreeze(recursively_freeze({"a": (1, {"b": (2,)})}))
    assert value == {"a": [1, {"b": [2]}]}
    assert type(value) is dict
    assert type(value["a"]) is list


@given(json_values)
def test_unfreeze_undoes_freeze_for_json_values(value):
    frozen = recursively_freeze(value)
    hash(frozen)
    assert recursively_unfreeze(frozen) == value
    assert recursively_freeze(recursively_unfreeze(frozen)) == frozen
