"""How a task resolves its parameter values, and the errors that name the task and the parameter."""

from __future__ import annotations

import warnings

import pytest

import luigi.parameter as p
from luigi import configuration
from luigi.cmdline_parser import CmdlineParser
from luigi.parameter import (
    DuplicateParameterException,
    MissingParameterException,
    UnconsumedParameterWarning,
    UnknownParameterException,
)
from luigi.task import Config, Task


def set_config(section: str, option: str, value: str) -> None:
    configuration.get_config().set(section, option, value)


class Resolved(Task):
    x = p.Parameter(default="default")


def test_default_is_used_when_nothing_else_gives_a_value():
    assert Resolved().x == "default"


def test_config_section_of_the_family_beats_the_default():
    set_config("Resolved", "x", "config")
    assert Resolved().x == "config"


def test_class_level_command_line_flag_beats_config():
    set_config("Resolved", "x", "config")
    with CmdlineParser.global_instance(["Resolved", "--Resolved-x", "cli"]):
        assert Resolved().x == "cli"


def test_constructor_argument_beats_everything():
    set_config("Resolved", "x", "config")
    with CmdlineParser.global_instance(["Resolved", "--Resolved-x", "cli"]):
        assert Resolved(x="given").x == "given"
        assert Resolved("positional").x == "positional"


def test_root_task_local_flag_comes_in_as_a_constructor_argument():
    set_config("Resolved", "x", "config")
    with CmdlineParser.global_instance(["Resolved", "--x", "local", "--Resolved-x", "global"]) as parser:
        assert parser.get_task_obj().x == "local"


def test_config_values_are_parsed_by_the_parameter():
    class Typed(Task):
        n = p.IntParameter()

    set_config("Typed", "n", "12")
    assert Typed().n == 12


def test_every_value_is_normalized_including_defaults():
    class Upper(p.Parameter):
        def normalize(self, x):
            return x.upper()

    class Normalized(Task):
        a = Upper()
        b = Upper(default="default")

    assert Normalized("given").param_kwargs == {"a": "GIVEN", "b": "DEFAULT"}


def test_positional_arguments_follow_declaration_order_and_skip_non_positional():
    class Positions(Task):
        first = p.Parameter()
        keyword_only = p.Parameter(positional=False, default="k")
        second = p.Parameter()

    task = Positions("1", "2")
    assert (task.first, task.second, task.keyword_only) == ("1", "2", "k")


def test_too_many_positional_arguments_name_the_task():
    class Small(Task):
        a = p.Parameter()

    with pytest.raises(
        UnknownParameterException, match=r"Small.*takes at most 1 positional parameters \(2 given\)"
    ):
        Small("1", "2")


def test_unknown_keyword_names_the_task_and_the_parameter():
    class Small(Task):
        a = p.Parameter()

    with pytest.raises(UnknownParameterException, match="Small.*unknown parameter b"):
        Small(a="1", b="2")


def test_duplicate_parameter_names_the_task_and_the_parameter():
    class Small(Task):
        a = p.Parameter()

    with pytest.raises(
        DuplicateParameterException, match="Small.*parameter a was already set as a positional"
    ):
        Small("1", a="2")


def test_missing_parameter_names_the_task_and_the_parameter():
    class NeedsValue(Task):
        needed = p.Parameter()

    with pytest.raises(
        MissingParameterException, match="NeedsValue.*requires the 'needed' parameter to be set"
    ):
        NeedsValue()


def test_bad_config_value_names_the_task_and_the_entry():
    class Typed(Task):
        n = p.IntParameter()

    set_config("Typed", "n", "abc")
    with pytest.raises(ValueError) as caught:
        Typed()
    assert str(caught.value) == "Typed[args=(), kwargs={}]: Error when parsing the default value of 'n'"
    assert "[Typed] n = 'abc'" in str(caught.value.__cause__)
    assert "'abc' is not a valid integer" in str(caught.value.__cause__)


def test_unconsumed_config_keys_warn_once_each():
    class Consumer(Task):
        used = p.Parameter(default="d")

    set_config("Consumer", "used", "u")
    set_config("Consumer", "typo-key", "1")
    set_config("Consumer", "other", "2")
    with pytest.warns(UnconsumedParameterWarning) as record:
        Consumer()
    messages = sorted(
        str(warning.message) for warning in record if warning.category is UnconsumedParameterWarning
    )
    assert len(messages) == 2
    assert "'other' with value '2' that is not consumed by the task 'Consumer'" in messages[0]
    assert "'typo_key'" in messages[1]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnconsumedParameterWarning)
        Consumer(used="again")


def test_ignore_unconsumed_silences_listed_keys():
    class Tolerant(Task):
        ignore_unconsumed = {"extra"}
        used = p.Parameter(default="d")

    set_config("Tolerant", "extra", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnconsumedParameterWarning)
        assert Tolerant().used == "d"


def test_default_section_keys_are_not_reported_as_unconsumed():
    class Plain(Task):
        used = p.Parameter(default="d")

    set_config("DEFAULT", "shared", "1")
    set_config("Plain", "used", "u")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnconsumedParameterWarning)
        assert Plain().used == "u"


def test_config_classes_read_their_section():
    class mysettings(Config):
        level = p.IntParameter(default=1)

    set_config("mysettings", "level", "5")
    assert mysettings().level == 5
