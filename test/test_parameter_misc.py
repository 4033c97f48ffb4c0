"""Path and task-class parameters."""

from __future__ import annotations

from pathlib import Path

import pytest

from luigi.parameter import PathParameter, TaskParameter


def test_path_parameter_gives_a_path_and_serializes_it_back(tmp_path):
    param = PathParameter()
    value = param.parse(str(tmp_path / "out.txt"))
    assert value == tmp_path / "out.txt"
    assert isinstance(value, Path)
    assert param.serialize(value) == str(tmp_path / "out.txt")
    assert param.normalize("relative/file") == Path("relative/file")


def test_path_parameter_can_make_paths_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert PathParameter(absolute=True).normalize("data/in.csv") == tmp_path / "data" / "in.csv"


def test_path_parameter_can_require_the_path_to_exist(tmp_path):
    (tmp_path / "here.txt").write_text("x")
    param = PathParameter(exists=True)
    assert param.parse(str(tmp_path / "here.txt")) == tmp_path / "here.txt"
    with pytest.raises(ValueError, match=r"The path '.*missing\.txt' does not exist"):
        param.parse(str(tmp_path / "missing.txt"))


def test_path_parameter_rejects_values_that_are_not_paths():
    with pytest.raises(ValueError, match="42 is not a valid path"):
        PathParameter().normalize(42)


def test_task_parameter_looks_up_the_task_class_by_family_name():
    luigi_task = pytest.importorskip("luigi.task")

    class Upstream(luigi_task.Task):
        pass

    param = TaskParameter()
    assert param.parse("Upstream") is Upstream
    assert param.serialize(Upstream) == "Upstream"


def test_task_parameter_serializes_namespaced_families():
    luigi_task = pytest.importorskip("luigi.task")

    class Spaced(luigi_task.Task):
        task_namespace = "team"

    assert TaskParameter().serialize(Spaced) == "team.Spaced"
    assert TaskParameter().parse("team.Spaced") is Spaced


def test_task_parameter_rejects_unknown_families_with_a_value_error():
    pytest.importorskip("luigi.task")
    with pytest.raises(ValueError, match="'NoSuchTask' is not a usable task family"):
        TaskParameter().parse("NoSuchTask")
