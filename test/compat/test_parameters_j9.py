"""Luigi compatibility, j.9: parameter warnings through ``luigi.parameter.warnings``, parsing, task plumbing.

Users' test suites patch ``luigi.parameter.warnings`` and ``luigi.parameter._JSONSCHEMA_ENABLED`` with
``mock.patch`` and assert on the calls, so the calls' arguments are part of the surface.
"""

from __future__ import annotations

import datetime
import warnings
from pathlib import Path
from unittest import mock

import pytest

import luigi
import luigi.parameter
from luigi import configuration
from luigi.freezing import FrozenOrderedDict
from luigi.parameter import OptionalParameterTypeWarning
from luigi.task import task_id_str

JSONSCHEMA_TEXT = (
    "The 'jsonschema' package is not installed so the parameter can not be validated even though a schema "
    "is given."
)


# -- luigi.parameter.warnings: every parameter warning goes through it -----------------------------------


def test_a_plain_parameter_given_a_non_string_warns_through_the_patched_module():
    class Plain(luigi.Task):
        x = luigi.Parameter()

    with mock.patch("luigi.parameter.warnings") as patched:
        Plain(x=5)
    patched.warn.assert_called_once_with('Parameter "x" with value "5" is not of type string.')


def test_a_plain_parameter_given_a_string_does_not_warn():
    class Plain(luigi.Task):
        x = luigi.Parameter()

    with mock.patch("luigi.parameter.warnings") as patched:
        Plain(x="5")
    patched.warn.assert_not_called()


@pytest.mark.parametrize(
    ("param_class", "wrong", "type_name"),
    [
        (luigi.OptionalParameter, 5, "str"),
        (luigi.OptionalStrParameter, 5, "str"),
        (luigi.OptionalIntParameter, "five", "int"),
        (luigi.OptionalFloatParameter, "1.5", "float"),
        (luigi.OptionalDictParameter, 5, "FrozenOrderedDict"),
        (luigi.OptionalListParameter, 5, "tuple"),
        (luigi.OptionalTupleParameter, 5, "tuple"),
    ],
)
def test_optional_parameters_warn_with_their_class_and_type_name(param_class, wrong, type_name):
    class WithOptional(luigi.Task):
        value = param_class()

    with mock.patch("luigi.parameter.warnings") as patched:
        WithOptional(value=wrong)
    expected = f'{param_class.__name__} "value" with value "{wrong}" is not of type "{type_name}" or None.'
    patched.warn.assert_called_once_with(expected, OptionalParameterTypeWarning)


def test_optional_bool_parameter_warns_with_its_type_name():
    # BoolParameter.normalize turns anything unparsable into None, so only a direct check sees a wrong type.
    with mock.patch("luigi.parameter.warnings") as patched:
        luigi.OptionalBoolParameter()._warn_on_wrong_param_type("flag", "yes")
    patched.warn.assert_called_once_with(
        'OptionalBoolParameter "flag" with value "yes" is not of type "bool" or None.',
        OptionalParameterTypeWarning,
    )


def test_an_optional_parameter_with_several_types_lists_them_all():
    class WithPath(luigi.Task):
        where = luigi.OptionalPathParameter()

    # PathParameter normalizes to a Path, so the wrong type has to come in below normalize: warn directly.
    with mock.patch("luigi.parameter.warnings") as patched:
        WithPath.where._warn_on_wrong_param_type("where", 5)
    patched.warn.assert_called_once_with(
        'OptionalPathParameter "where" with value "5" is not of any type in ["str", "Path"] or None.',
        OptionalParameterTypeWarning,
    )


def test_optional_parameters_accept_none_and_their_type_without_warning():
    class Quiet(luigi.Task):
        n = luigi.OptionalIntParameter()
        d = luigi.OptionalDictParameter()
        xs = luigi.OptionalListParameter()

    with mock.patch("luigi.parameter.warnings") as patched:
        Quiet()
        Quiet(n=3, d={"a": 1}, xs=[1, 2])
    patched.warn.assert_not_called()


def test_time_delta_parameter_given_a_non_timedelta_warns_through_the_patched_module():
    class Waits(luigi.Task):
        delay = luigi.TimeDeltaParameter()

    with mock.patch("luigi.parameter.warnings") as patched:
        Waits(delay=5)
        Waits(delay=datetime.timedelta(seconds=5))
    patched.warn.assert_called_once_with('Parameter "delay" with value "5" is not of type timedelta.')


def test_a_real_warning_is_a_user_warning_pointing_at_the_value():
    class Plain(luigi.Task):
        x = luigi.Parameter()

    with pytest.warns(UserWarning, match='^Parameter "x" with value "7" is not of type string.$'):
        Plain(x=7)


# -- _JSONSCHEMA_ENABLED ----------------------------------------------------------------------------------


@pytest.mark.parametrize("param_class", [luigi.ListParameter, luigi.DictParameter])
def test_a_schema_without_jsonschema_warns_and_is_not_checked(param_class):
    schema = {"type": "array", "items": {"type": "string"}}
    with (
        mock.patch("luigi.parameter._JSONSCHEMA_ENABLED", False),
        mock.patch("luigi.parameter.warnings") as patched,
    ):
        param = param_class(schema=schema)
    patched.warn.assert_called_once_with(JSONSCHEMA_TEXT)
    assert param.normalize({"not": "checked"}) == {"not": "checked"}


def test_a_schema_with_jsonschema_enabled_is_checked_without_warning():
    jsonschema = pytest.importorskip("jsonschema")
    with (
        mock.patch("luigi.parameter._JSONSCHEMA_ENABLED", True),
        mock.patch("luigi.parameter.warnings") as patched,
    ):
        param = luigi.ListParameter(schema={"type": "array", "items": {"type": "string"}})
    patched.warn.assert_not_called()
    assert param.normalize(["a"]) == ("a",)
    with pytest.raises(jsonschema.ValidationError):
        param.normalize([1])


def test_the_hook_reflects_whether_jsonschema_is_importable():
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        assert luigi.parameter._JSONSCHEMA_ENABLED is False
    else:
        assert luigi.parameter._JSONSCHEMA_ENABLED is True


# -- DateMinuteParameter and TimeDeltaParameter -----------------------------------------------------------


def test_date_minute_parameter_parses_the_h_form_with_a_deprecation_warning():
    with mock.patch("luigi.parameter.warnings") as patched:
        value = luigi.DateMinuteParameter().parse("2024-05-06T07H08")
    assert value == datetime.datetime(2024, 5, 6, 7, 8)
    patched.warn.assert_called_once_with(
        'Using "H" between hours and minutes is deprecated, omit it instead.', DeprecationWarning
    )
    with pytest.warns(DeprecationWarning, match='^Using "H" between hours and minutes is deprecated'):
        luigi.DateMinuteParameter().parse("2024-05-06T07H08")


def test_date_minute_parameter_parses_the_current_form_silently():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert luigi.DateMinuteParameter().parse("2024-05-06T0708") == datetime.datetime(2024, 5, 6, 7, 8)


def test_time_delta_parameter_rejects_bad_text_with_a_parameter_exception():
    with pytest.raises(luigi.parameter.ParameterException) as caught:
        luigi.TimeDeltaParameter().parse("soon")
    assert str(caught.value) == "Invalid time delta - could not parse soon"


def test_time_delta_parameter_raises_the_parameter_exception_of_the_namespace_when_patched():
    class Patched(Exception):
        pass

    with mock.patch("luigi.parameter.ParameterException", Patched):
        with pytest.raises(Patched, match="^Invalid time delta - could not parse 1 fortnight$"):
            luigi.TimeDeltaParameter().parse("1 fortnight")


# -- ListParameter, DictParameter, TupleParameter parsing -------------------------------------------------


def test_list_parameter_parse_returns_lists_all_the_way_down():
    value = luigi.ListParameter().parse('[1, [2, [3]], {"a": [4]}]')
    assert type(value) is list
    assert value == [1, [2, [3]], FrozenOrderedDict(a=[4])]
    assert type(value[1]) is list and type(value[1][1]) is list


def test_list_parameter_parse_of_a_json_string_gives_its_characters():
    assert luigi.ListParameter().parse('"ab"') == ["a", "b"]


def test_list_parameter_parse_of_null_is_none():
    assert luigi.ListParameter().parse("null") is None


def test_list_parameter_normalize_freezes_into_tuples():
    param = luigi.ListParameter()
    assert param.normalize(param.parse("[1, [2, 3]]")) == (1, (2, 3))


class ListChild(luigi.Task):
    """A dynamic dependency whose list parameter defaults to None (serialized 'null' to the worker)."""

    xs = luigi.ListParameter(default=None)
    out_dir = luigi.Parameter()

    def output(self):
        return luigi.LocalTarget(str(Path(self.out_dir) / f"child-{self.xs}"))

    def run(self):
        with self.output().open("w") as f:
            f.write("ran")


class ListParent(luigi.Task):
    out_dir = luigi.Parameter()

    def output(self):
        return luigi.LocalTarget(str(Path(self.out_dir) / "parent"))

    def run(self):
        child = yield ListChild(out_dir=self.out_dir)
        with self.output().open("w") as f:
            f.write(child.open().read())


def test_a_list_parameter_defaulting_to_none_survives_dynamic_dependencies(tmp_path):
    assert luigi.build([ListParent(out_dir=str(tmp_path))], local_scheduler=True, log_level="ERROR")
    assert (tmp_path / "child-None").read_text() == "ran"
    assert (tmp_path / "parent").read_text() == "ran"


def test_dict_parameter_parse_freezes_dicts_but_keeps_lists():
    value = luigi.DictParameter().parse('{"a": {"b": [1, 2]}, "c": [3]}')
    assert type(value) is FrozenOrderedDict
    assert type(value["a"]) is FrozenOrderedDict
    assert type(value["a"]["b"]) is list and type(value["c"]) is list
    with pytest.raises(TypeError):
        hash(value)


def test_dict_parameter_normalize_makes_it_hashable():
    param = luigi.DictParameter()
    value = param.normalize(param.parse('{"a": {"b": [1, 2]}}'))
    assert value["a"]["b"] == (1, 2)
    assert hash(value) == hash(param.normalize({"a": {"b": [1, 2]}}))


def test_tuple_parameter_reads_json_then_python_literals():
    param = luigi.TupleParameter()
    assert param.parse("[[1, 2], [3, 4]]") == ((1, 2), (3, 4))
    assert param.parse("((5, 6), (7, 8))") == ((5, 6), (7, 8))


def test_tuple_parameter_lets_literal_eval_syntax_errors_through():
    with pytest.raises(SyntaxError):
        luigi.TupleParameter().parse("((5,6),(7")


def test_tuple_parameter_rejects_a_string_result():
    with pytest.raises(ValueError, match="^Parsed result cannot be a string$"):
        luigi.TupleParameter().parse("'(1, 2)'")


def test_choice_parameter_checks_the_type_of_its_choices():
    with pytest.raises(AssertionError, match="^Invalid type in choices$"):
        luigi.ChoiceParameter(var_type=int, choices=[1, "x"])
    assert luigi.ChoiceParameter(var_type=int, choices=[1, 2]).parse("2") == 2


# -- Optional* parameters form no ranges ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("param", "value"),
    [
        (luigi.OptionalIntParameter(), 1),
        (luigi.OptionalDateParameter(), datetime.date(2024, 1, 1)),
        (luigi.OptionalIntParameter(), None),
    ],
)
def test_optional_parameters_have_no_next_in_enumeration(param, value):
    assert param.next_in_enumeration(value) is None


def test_the_summary_lists_optional_int_values_one_by_one():
    class Numbered(luigi.Task):
        n = luigi.OptionalIntParameter()

        def complete(self):
            return getattr(self, "finished", False)

        def run(self):
            self.finished = True

    class Counted(Numbered):
        n = luigi.IntParameter()

    class Both(luigi.WrapperTask):
        def requires(self):
            return [Numbered(n=i) for i in range(1, 5)] + [Counted(n=i) for i in range(1, 5)]

    result = luigi.build([Both()], local_scheduler=True, detailed_summary=True, log_level="ERROR")
    assert "Numbered(n=1,2,3,4)" in result.summary_text
    assert "Counted(n=1...4)" in result.summary_text


# -- Task plumbing -----------------------------------------------------------------------------------------


def test_param_args_holds_the_values_in_declaration_order():
    class Ordered(luigi.Task):
        b = luigi.IntParameter()
        a = luigi.Parameter(default="x")
        c = luigi.ListParameter(default=[1, 2])

    task = Ordered(5)
    assert task.param_args == (5, "x", (1, 2))
    assert isinstance(task.param_args, tuple)


def test_an_unparsable_config_value_names_the_task_and_parameter():
    class Configured(luigi.Task):
        count = luigi.IntParameter()

    configuration.get_config().set("Configured", "count", "many")
    with pytest.raises(ValueError) as caught:
        Configured()
    assert (
        str(caught.value) == "Configured[args=(), kwargs={}]: Error when parsing the default value of 'count'"
    )
    assert "'many'" in str(caught.value.__cause__)  # the chained cause says what was wrong


def test_an_unparsable_time_delta_in_config_gets_the_same_error():
    class Delayed(luigi.Task):
        delay = luigi.TimeDeltaParameter()

    configuration.get_config().set("Delayed", "delay", "soon")
    with pytest.raises(
        ValueError, match=r"^Delayed\[args=\(\), kwargs=\{\}\]: Error when parsing the default"
    ):
        Delayed()


# -- Task ids do not depend on how a value arrived --------------------------------------------------------


class Structured(luigi.Task):
    xs = luigi.ListParameter()
    d = luigi.DictParameter(default={"k": [1, 2]})


def test_task_ids_of_list_and_dict_values_are_the_same_from_kwargs_and_the_command_line():
    expected = task_id_str("Structured", {"xs": "[1, [2, 3]]", "d": '{"k": [1, 2]}'})
    assert Structured(xs=[1, [2, 3]]).task_id == expected
    assert Structured(xs=(1, (2, 3))).task_id == expected
    with luigi.cmdline_parser.CmdlineParser.global_instance(["Structured", "--xs", "[1, [2, 3]]"]) as cp:
        assert cp.get_task_obj().task_id == expected


def test_a_task_rebuilt_from_its_string_params_has_the_same_id():
    task = Structured(xs=[1, [2, 3]], d={"k": [1, {"z": None}]})
    rebuilt = Structured.from_str_params(task.to_str_params())
    assert rebuilt.task_id == task.task_id
    assert rebuilt is task  # the instance cache finds it: equal normalized values
