"""The class registry: lookup by family, did-you-mean, ambiguity, instance cache, save/restore, load_task."""

from __future__ import annotations

import sys
import textwrap

import pytest

import luigi.parameter as p
from luigi.task import Config, Task, externalize
from luigi.task_register import (
    Register,
    TaskClassAmbigiousException,
    TaskClassException,
    TaskClassNotFoundException,
    load_task,
)


def test_every_task_class_is_registered_under_its_family():
    class RegisteredJob(Task):
        pass

    assert Register.get_task_cls("RegisteredJob") is RegisteredJob
    assert "RegisteredJob" in Register.task_names()
    assert Register.task_names() == sorted(Register.task_names())
    assert isinstance(RegisteredJob, Register)


def test_task_family_works_on_the_class_and_on_instances():
    class Familiar(Task):
        pass

    assert Familiar.task_family == "Familiar"
    assert Familiar().task_family == "Familiar"
    assert Familiar.get_task_family() == "Familiar"


def test_unknown_family_suggests_close_names():
    class CountWords(Task):
        pass

    class CountLines(Task):
        pass

    with pytest.raises(TaskClassNotFoundException) as caught:
        Register.get_task_cls("CountWord")
    message = str(caught.value)
    assert "No task CountWord" in message
    assert "Did you mean: CountWords" in message
    assert message.index("CountWords") < message.index("CountLines")
    assert isinstance(caught.value, TaskClassException)


def test_unknown_family_without_close_names_lists_the_candidates():
    class Alpha(Task):
        pass

    with pytest.raises(TaskClassNotFoundException, match="Candidates are: .*Alpha"):
        Register.get_task_cls("Zzzzzzzzzzzzzzzzzzzzzzzz")


def test_two_unrelated_classes_with_one_family_are_ambiguous():
    class Twin(Task):
        pass

    first = Twin

    class Twin(Task):  # noqa: F811 - a second, unrelated class with the same family
        pass

    assert first is not Twin
    with pytest.raises(TaskClassAmbigiousException, match="Twin"):
        Register.get_task_cls("Twin")
    assert Register._get_reg()["Twin"] is Register.AMBIGUOUS_CLASS
    assert "Twin" not in {family for family, *_ in Register.get_all_params()}


def test_a_subclass_with_the_same_family_replaces_its_parent():
    class Same(Task):
        pass

    parent = Same

    class Same(parent):  # noqa: F811
        pass

    assert Register.get_task_cls("Same") is Same


def test_externalized_copies_stay_out_of_the_registry():
    class Original(Task):
        pass

    externalize(Original)
    assert Register.get_task_cls("Original") is Original


def test_instance_cache_returns_the_same_object_for_equal_parameters():
    class Cached(Task):
        x = p.IntParameter()

    assert Cached(1) is Cached(x=1)
    assert Cached(1) is not Cached(2)


def test_unhashable_values_skip_the_cache():
    class Unhashable(Task):
        x = p.Parameter()

    value = {"a": 1}
    with pytest.warns(UserWarning):
        first, second = Unhashable(x=value), Unhashable(x=value)
    assert first is not second and first == second


def test_clear_and_disable_instance_cache():
    class Cached(Task):
        x = p.IntParameter()

    before = Cached(1)
    Register.clear_instance_cache()
    assert Cached(1) is not before
    Register.disable_instance_cache()
    assert Cached(1) is not Cached(1)
    Register.clear_instance_cache()  # turns the cache back on
    assert Cached(1) is Cached(1)


def test_get_reg_and_set_reg_save_and_restore_definitions():
    saved = Register._get_reg()

    class Temporary(Task):
        pass

    assert "Temporary" in Register.task_names()
    Register._set_reg(saved)
    assert "Temporary" not in Register.task_names()
    assert dict(saved) == dict(Register._get_reg())


def test_set_reg_accepts_a_plain_family_to_class_dict():
    class Kept(Task):
        pass

    Register._set_reg({"Kept": Kept})
    assert Register.task_names() == ["Kept"]


def test_get_all_params_yields_family_section_flag_name_and_parameter():
    class WithParams(Task):
        a = p.Parameter()

    class globals_like(Config):
        use_cmdline_section = False
        b = p.IntParameter(default=1)

    rows = {(family, without_section, name) for family, without_section, name, _ in Register.get_all_params()}
    assert ("WithParams", False, "a") in rows
    assert ("globals_like", True, "b") in rows


def test_load_task_builds_a_task_from_serialized_parameters():
    class Loadable(Task):
        n = p.IntParameter()
        label = p.Parameter(default="x")

    task = load_task(None, "Loadable", {"n": "5"})
    assert task == Loadable(n=5)


def test_load_task_imports_the_module_first(tmp_path, monkeypatch):
    module = "task_register_loadme"
    (tmp_path / f"{module}.py").write_text(
        textwrap.dedent(
            """
            import luigi.parameter
            from luigi.task import Task

            class FromModule(Task):
                n = luigi.parameter.IntParameter()
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    task = load_task(module, "FromModule", {"n": "2"})
    assert task.task_family == "FromModule" and task.n == 2
    assert task.task_module == module
    sys.modules.pop(module, None)
