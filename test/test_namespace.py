"""Task namespaces: namespace(), auto_namespace() and the task_namespace attribute (COMPAT b.2)."""

from __future__ import annotations

import sys
import textwrap

import pytest

from luigi.task import Task, auto_namespace, namespace
from luigi.task_register import Register


def _define(name: str, module: str, **attrs: object) -> type:
    """A task class as if written in ``module`` (namespaces are chosen by the defining module)."""
    return type(name, (Task,), {"__module__": module, **attrs})


def test_namespace_applies_to_classes_defined_afterwards():
    before = _define("Early", "pipeline.jobs")
    namespace("reports")
    after = _define("Late", "pipeline.jobs")
    assert before.get_task_family() == "Early"
    assert after.get_task_family() == "reports.Late"
    assert after.get_task_namespace() == "reports"
    assert Register.get_task_cls("reports.Late") is after


def test_namespace_none_resets_to_no_namespace():
    namespace("tmp")
    namespaced = _define("One", "m")
    namespace()
    plain = _define("Two", "m")
    assert (namespaced.task_family, plain.task_family) == ("tmp.One", "Two")


def test_most_specific_scope_wins():
    namespace("outer", scope="company")
    namespace("inner", scope="company.team")
    assert _define("A", "company.other").task_family == "outer.A"
    assert _define("B", "company.team.jobs").task_family == "inner.B"
    assert _define("C", "company.team").task_family == "inner.C"
    assert _define("D", "companyx").task_family == "D"
    assert _define("E", "elsewhere").task_family == "E"


def test_auto_namespace_uses_the_python_module():
    auto_namespace(scope="auto_pkg")
    assert _define("Job", "auto_pkg.etl").task_family == "auto_pkg.etl.Job"
    assert _define("Job2", "other_pkg").task_family == "Job2"


def test_explicit_task_namespace_overrides_and_is_inherited():
    namespace("ignored")
    explicit = _define("Explicit", "m", task_namespace="mine")
    child = type("Child", (explicit,), {"__module__": "m"})
    assert explicit.task_family == "mine.Explicit"
    assert child.task_family == "mine.Child"


def test_explicit_empty_or_none_namespace_means_no_namespace():
    namespace("ignored")
    assert _define("NoneNs", "m", task_namespace=None).task_family == "NoneNs"
    assert _define("EmptyNs", "m", task_namespace="").task_family == "EmptyNs"


def test_namespace_set_in_a_module_applies_to_its_tasks(tmp_path, monkeypatch):
    module = "namespace_test_module"
    (tmp_path / f"{module}.py").write_text(
        textwrap.dedent(
            """
            import luigi.task

            luigi.task.namespace("ns_from_module", scope=__name__)

            class Inside(luigi.task.Task):
                pass
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    imported = __import__(module)
    assert imported.Inside.task_family == "ns_from_module.Inside"
    assert _define("Outside", "somewhere_else").task_family == "Outside"
    sys.modules.pop(module, None)


def test_namespace_settings_are_restored_with_the_registry():
    saved = Register._get_reg()
    namespace("leaky")
    Register._set_reg(saved)
    assert _define("Clean", "m").task_family == "Clean"


@pytest.mark.parametrize("family", ["a.b.Task", "Task"])
def test_instances_report_the_family_of_their_class(family):
    *ns, name = family.split(".")
    cls = _define(name, "m", task_namespace=".".join(ns) or None)
    assert cls().task_family == family
    assert cls().task_id.startswith(family + "_")
