"""The command-line parser: flags generated from registered parameters, help, errors (COMPAT e.1, c.3)."""

from __future__ import annotations

import datetime
import sys
import textwrap

import pytest

import luigi.parameter as p
from luigi.cmdline_parser import CmdlineParser, InvalidParameterValueException
from luigi.parameter import ParameterException
from luigi.task import Config, Task
from luigi.task_register import TaskClassNotFoundException


def build(args):
    with CmdlineParser.global_instance(args) as parser:
        return parser.get_task_obj()


def test_global_instance_is_active_only_inside_the_block():
    class Root(Task):
        pass

    assert CmdlineParser.get_instance() is None
    with CmdlineParser.global_instance(["Root"]) as parser:
        assert CmdlineParser.get_instance() is parser
        assert CmdlineParser._instance is parser
        assert parser.get_task_obj() == Root()
    assert CmdlineParser.get_instance() is None


def test_nested_global_instance_needs_allow_override_and_restores_the_outer_one():
    class Root(Task):
        x = p.Parameter(default="d")

    with CmdlineParser.global_instance(["Root"]) as outer:
        with pytest.raises(RuntimeError, match="allow_override"):
            with CmdlineParser.global_instance(["Root"]):
                pass
        with CmdlineParser.global_instance(["Root", "--x", "inner"], allow_override=True) as inner:
            assert CmdlineParser.get_instance() is inner
        assert CmdlineParser.get_instance() is outer


def test_root_task_takes_local_flags_with_dashes_for_underscores():
    class Report(Task):
        out_dir = p.Parameter()
        n = p.IntParameter(default=1)

    task = build(["Report", "--out-dir", "/tmp/x", "--n", "3"])
    assert (task.out_dir, task.n) == ("/tmp/x", 3)


def test_any_task_takes_family_prefixed_flags():
    class Dependency(Task):
        size = p.IntParameter(default=1)

    class Root(Task):
        def requires(self):
            return Dependency()

    with CmdlineParser.global_instance(["Root", "--Dependency-size", "9"]) as parser:
        assert parser.known_args.Dependency_size == "9"
        assert parser.get_task_obj().requires().size == 9


def test_namespaced_families_keep_their_dots_in_flags():
    class Job(Task):
        task_namespace = "my.ns"
        level = p.IntParameter(default=0)

    class Root(Task):
        pass

    task = build(["my.ns.Job", "--my.ns.Job-level", "4"])
    assert task.level == 4
    with CmdlineParser.global_instance(["Root", "--my.ns.Job-level", "5"]):
        assert Job().level == 5


def test_config_without_cmdline_section_takes_unprefixed_flags():
    class knobs(Config):
        use_cmdline_section = False
        speed_limit = p.IntParameter(default=10)

    class Root(Task):
        pass

    with CmdlineParser.global_instance(["Root", "--speed-limit", "20"]):
        assert knobs().speed_limit == 20


def test_flags_may_come_before_the_task_name():
    class Dependency(Task):
        size = p.IntParameter(default=1)

    class Root(Task):
        pass

    with CmdlineParser.global_instance(["--Dependency-size", "2", "Root"]) as parser:
        assert parser.get_task_obj() == Root()
        assert Dependency().size == 2


def test_bool_flags_need_no_value():
    class Switch(Task):
        verbose = p.BoolParameter()

    assert build(["Switch", "--verbose"]).verbose is True
    assert build(["Switch"]).verbose is False


def test_module_flag_imports_the_module_before_finding_the_task(tmp_path, monkeypatch):
    module = "cmdline_parser_test_tasks"
    (tmp_path / f"{module}.py").write_text(
        textwrap.dedent(
            """
            import luigi.parameter
            from luigi.task import Task

            class ModuleDependency(Task):
                level = luigi.parameter.IntParameter(default=0)

            class FromModule(Task):
                n = luigi.parameter.IntParameter()

                def requires(self):
                    return ModuleDependency()
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    with CmdlineParser.global_instance(
        ["--module", module, "--ModuleDependency-level", "3", "FromModule", "--n", "7"]
    ) as parser:
        task = parser.get_task_obj()
        assert task.task_family == "FromModule" and task.n == 7
        assert task.requires().level == 3
    sys.modules.pop(module, None)


def test_no_task_exits_with_a_message():
    with pytest.raises(SystemExit, match="No task specified"):
        CmdlineParser([])


def test_unknown_family_raises_with_suggestions():
    class WordCount(Task):
        pass

    with pytest.raises(TaskClassNotFoundException, match="Did you mean: WordCount"):
        CmdlineParser(["WordCont"])


def test_unknown_flags_are_an_argparse_error_with_exit_code_2(capsys):
    class Strict(Task):
        pass

    with pytest.raises(SystemExit) as caught:
        CmdlineParser(["Strict", "--no-such-flag", "1"])
    assert caught.value.code == 2
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err


def test_help_shows_root_task_parameters_and_always_in_help_flags(capsys):
    class Shown(Task):
        size = p.IntParameter(default=1, description="how many")

    class Hidden(Task):
        secret_knob = p.Parameter(default="x", description="not for --help")

    class common(Config):
        important = p.Parameter(default="i", always_in_help=True, description="always here")

    with pytest.raises(SystemExit) as caught:
        CmdlineParser(["Shown", "--help"])
    assert caught.value.code == 0
    out = capsys.readouterr().out
    assert "--size" in out and "how many" in out and "--Shown-size" in out
    assert "--common-important" in out and "always here" in out
    assert "--Hidden-secret-knob" not in out


def test_help_all_shows_every_flag(capsys):
    class Shown(Task):
        pass

    class Hidden(Task):
        secret_knob = p.Parameter(default="x", description="knob help")

    with pytest.raises(SystemExit) as caught:
        CmdlineParser(["Shown", "--help-all"])
    assert caught.value.code == 0
    out = capsys.readouterr().out
    assert "--Hidden-secret-knob" in out and "knob help" in out


def test_help_without_a_task_still_prints_help(capsys):
    with pytest.raises(SystemExit) as caught:
        CmdlineParser(["--help"])
    assert caught.value.code == 0
    assert "usage:" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["Typed", "--n", "abc"],
            "Invalid value for --n (parameter 'n' of Typed): 'abc' is not a valid integer",
        ),
        (["Typed", "--Typed-n", "abc"], "--Typed-n (parameter 'n' of Typed): 'abc' is not a valid integer"),
        (["Typed", "--n", "1", "--day", "2024-13-01"], "--day (parameter 'day' of Typed)"),
        (["Typed", "--n", "1", "--mode", "purple"], "--mode (parameter 'mode' of Typed)"),
    ],
)
def test_bad_values_fail_at_parse_time_with_one_line_naming_flag_and_value(args, expected):
    class Typed(Task):
        n = p.IntParameter(default=0)
        day = p.DateParameter(default=datetime.date(2024, 1, 1))
        mode = p.ChoiceParameter(choices=["fast", "slow"], default="fast")

    with pytest.raises(InvalidParameterValueException) as caught:
        CmdlineParser(args)
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message
    assert args[-1] in message
    assert isinstance(caught.value, ParameterException) and isinstance(caught.value, ValueError)


def test_bad_value_for_a_task_that_is_not_the_root_still_fails_early():
    class Typed(Task):
        n = p.IntParameter(default=0)

    class Root(Task):
        pass

    with pytest.raises(InvalidParameterValueException, match="--Typed-n"):
        CmdlineParser(["Root", "--Typed-n", "x"])


def test_parameters_consult_the_active_parser_for_their_family():
    class Elsewhere(Task):
        label = p.Parameter(default="d")

    class Root(Task):
        pass

    assert Elsewhere().label == "d"
    with CmdlineParser.global_instance(["Root", "--Elsewhere-label", "cli"]):
        assert Elsewhere().label == "cli"


def test_explicit_bool_flags_take_an_optional_true_or_false():
    class Switches(Task):
        on = p.BoolParameter(parsing="explicit")
        off = p.BoolParameter(default=True, parsing="explicit")

    assert build(["Switches", "--on"]).on is True
    task = build(["Switches", "--on", "true", "--off", "false"])
    assert (task.on, task.off) == (True, False)
    with pytest.raises(InvalidParameterValueException, match="--on .*'maybe'"):
        CmdlineParser(["Switches", "--on", "maybe"])


def test_a_root_parameter_clashing_with_an_unprefixed_flag_keeps_its_prefixed_flag():
    class knobs(Config):
        use_cmdline_section = False
        workers_hint = p.IntParameter(default=1)

    class Clash(Task):
        workers_hint = p.IntParameter(default=5)

    with CmdlineParser.global_instance(
        ["Clash", "--workers-hint", "2", "--Clash-workers-hint", "7"]
    ) as parser:
        assert knobs().workers_hint == 2
        assert parser.get_task_obj().workers_hint == 7


def test_a_unique_prefix_abbreviates_a_flag_as_in_luigi():
    class Plain(Task):
        pass

    class Settings(Config):
        zeta_flag_long = p.BoolParameter()
        use_cmdline_section = False

    with CmdlineParser.global_instance(["Plain", "--zeta-flag"]):
        assert Settings().zeta_flag_long is True


def test_a_root_task_flag_prefixing_several_known_flags_is_ambiguous_as_in_luigi(capsys):
    class Short(Task):
        b = p.IntParameter()

    with pytest.raises(SystemExit) as exit_info:
        build(["Short", "--b", "4"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "ambiguous option: --b could match --batch-email-email-interval, --batch-email-batch-mode" in err


def test_an_exact_root_task_flag_wins_over_longer_flags_it_prefixes():
    class Exact(Task):
        no = p.IntParameter()

    with CmdlineParser.global_instance(["Exact", "--no", "3"]) as parser:
        assert parser.get_task_obj().no == 3
