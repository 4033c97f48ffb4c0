"""A ``DictParameter`` value prints as a plain dict, as Luigi's does (LUIGI_COMPAT c.2).

Luigi freezes a dict value into an immutable ordered mapping (lists inside become tuples) whose ``repr``
is the plain dict's, so log lines and f-strings built from the value read naturally. The value stays
hashable, immutable and serialised as JSON.
"""

from __future__ import annotations

import pytest

import luigi


class Deploy(luigi.Task):
    settings = luigi.DictParameter()


def test_a_dict_parameter_value_prints_as_a_plain_dict():
    task = Deploy(settings={"role": "web", "env": "staging"})
    expected = "{'role': 'web', 'env': 'staging'}"
    assert str(task.settings) == expected
    assert repr(task.settings) == expected
    assert f"{task.settings}" == expected
    assert f"{task.settings!r}" == expected


def test_a_nested_dict_parameter_value_prints_as_nested_plain_dicts_with_lists_as_tuples():
    task = Deploy(settings={"a": {"b": [1, 2]}, "c": None})
    assert str(task.settings) == "{'a': {'b': (1, 2)}, 'c': None}"
    assert repr(task.settings) == "{'a': {'b': (1, 2)}, 'c': None}"


def test_a_dict_parameter_value_parsed_from_the_command_line_prints_as_a_plain_dict():
    param = luigi.DictParameter()
    assert str(param.normalize(param.parse('{"role": "web", "env": "staging"}'))) == (
        "{'role': 'web', 'env': 'staging'}"
    )


def test_the_printed_value_stays_hashable_immutable_and_serialised_as_json():
    task = Deploy(settings={"a": {"b": [1, 2]}, "c": None})
    assert hash(task.settings) == hash(Deploy(settings={"c": None, "a": {"b": (1, 2)}}).settings)
    with pytest.raises(TypeError):
        task.settings["c"] = 1
    assert Deploy.settings.serialize(task.settings) == '{"a": {"b": [1, 2]}, "c": null}'
    assert task.to_str_params() == {"settings": '{"a": {"b": [1, 2]}, "c": null}'}
