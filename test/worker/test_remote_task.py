"""Shipping a task by reference: module, family and serialized parameters, rebuilt where it runs."""

from __future__ import annotations

import logging

import pytest
from helpers.dask_tasks import RecordsWhereItRan

import luigi
from luigi.parameter import ParameterVisibility
from luigi.worker.remote_task import ByReference, TaskNotRebuildableError, TaskReference, task_of


class HasAPrivateParameter(luigi.Task):
    name = luigi.Parameter()
    secret = luigi.Parameter(default="default", visibility=ParameterVisibility.PRIVATE)


class UpperCasing(luigi.Parameter):
    """Parses a value other than the one it serialized."""

    def parse(self, x: str) -> str:
        return x.upper()


class LosesItsParameter(luigi.Task):
    value = UpperCasing()


def test_a_task_importable_by_name_goes_as_plain_data_and_is_rebuilt_with_every_parameter() -> None:
    task = HasAPrivateParameter(name="a", secret="not the default")
    payload = ByReference("Dask", "the Dask workers").payload(task)
    assert isinstance(payload, TaskReference)
    assert payload.module == __name__ and payload.family == "HasAPrivateParameter"
    assert payload.params == {"name": "a", "secret": "not the default"}
    rebuilt = task_of(payload)
    assert rebuilt.task_id == task.task_id and rebuilt.secret == "not the default"


def test_a_task_defined_inside_a_function_goes_by_the_executors_serialization_with_a_warning_saying_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class DefinedHere(luigi.Task):
        pass

    shipping = ByReference("Dask", "the Dask workers")
    with caplog.at_level(logging.WARNING, logger="luigi-interface"):
        first, second = shipping.payload(DefinedHere()), shipping.payload(DefinedHere())
    assert isinstance(first, DefinedHere) and task_of(second) is second
    assert "not reachable by name from its module (defined inside a function?)" in caplog.text
    assert "by Dask's own serialization" in caplog.text
    assert caplog.text.count("DefinedHere goes to the Dask workers") == 1  # once per class


def test_a_task_of_the_script_being_run_goes_by_the_executors_serialization(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script_task = type("InTheScript", (luigi.Task,), {"__module__": "__main__"})
    with caplog.at_level(logging.WARNING, logger="luigi-interface"):
        payload = ByReference("Ray", "the Ray workers").payload(script_task())
    assert not isinstance(payload, TaskReference)
    assert "defined in the script being run, which the Ray workers cannot import" in caplog.text


def test_a_parameter_that_does_not_survive_serialization_keeps_the_task_from_going_by_reference(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="luigi-interface"):
        payload = ByReference("Dask", "the Dask workers").payload(LosesItsParameter(value="low"))
    assert not isinstance(payload, TaskReference)
    assert "parameter(s) value do not survive serialization" in caplog.text


def test_a_reference_whose_module_does_not_import_where_it_runs_fails_naming_the_module() -> None:
    reference = TaskReference("no_such_module_anywhere", "Gone", {}, "Gone__99914b932b")
    with pytest.raises(
        TaskNotRebuildableError, match=r"Gone__99914b932b .*'no_such_module_anywhere'.*importable"
    ):
        reference.rebuild()


def test_a_reference_is_plain_data_that_names_the_task_it_rebuilds() -> None:
    task = RecordsWhereItRan("/tmp/x", 3, 0.5)
    reference = ByReference("Dask", "the Dask workers").payload(task)
    assert reference == TaskReference(
        "helpers.dask_tasks",
        "RecordsWhereItRan",
        {"root": "/tmp/x", "number": "3", "seconds": "0.5"},
        task.task_id,
    )
