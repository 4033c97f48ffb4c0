"""``PathParameter(absolute=False, exists=False)`` as Luigi's (LUIGI_COMPAT c.2, j.9).

The value becomes a ``pathlib.Path`` (made absolute with ``absolute=True``); with ``exists=True`` a path that
does not exist is refused with a ValueError naming it, whether it comes from Python, the command line or the
config. It serialises as the path's text.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import luigi
from luigi import configuration


class ReadsInput(luigi.Task):
    source = luigi.PathParameter(exists=True)

    def complete(self):
        return True


class ReadsRelative(luigi.Task):
    source = luigi.PathParameter(absolute=True, exists=True)


class WritesOutput(luigi.Task):
    target = luigi.PathParameter()


def test_an_existing_path_becomes_a_path_serialised_as_its_text(tmp_path):
    (tmp_path / "in.csv").write_text("x")
    task = ReadsInput(source=str(tmp_path / "in.csv"))
    assert task.source == tmp_path / "in.csv" and isinstance(task.source, Path)
    assert task.to_str_params() == {"source": str(tmp_path / "in.csv")}
    assert ReadsInput(source=tmp_path / "in.csv") is task  # a Path and its text are the same task


def test_a_missing_path_is_refused_with_a_value_error_naming_it(tmp_path):
    missing = str(tmp_path / "missing.csv")
    with pytest.raises(ValueError, match=re.escape(missing)):
        ReadsInput(source=missing)


def test_a_missing_path_on_the_command_line_is_refused_naming_it(tmp_path):
    missing = str(tmp_path / "missing.csv")
    with pytest.raises(ValueError, match=re.escape(missing)):
        luigi.run(["ReadsInput", "--source", missing, "--local-scheduler", "--no-lock"])


def test_a_missing_path_in_the_config_is_refused_as_a_bad_default(tmp_path):
    configuration.get_config().set("ReadsInput", "source", str(tmp_path / "missing.csv"))
    with pytest.raises(ValueError, match="Error when parsing the default value of 'source'"):
        ReadsInput()


def test_absolute_resolves_against_the_working_directory_before_checking(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    assert ReadsRelative(source="data").source == tmp_path / "data"
    with pytest.raises(ValueError, match=re.escape(str(tmp_path / "absent"))):
        ReadsRelative(source="absent")


def test_without_exists_a_path_that_does_not_exist_yet_is_fine(tmp_path):
    task = WritesOutput(target="out/later.csv")
    assert task.target == Path("out/later.csv")
    assert WritesOutput.target.parse("out/later.csv") == Path("out/later.csv")
    assert WritesOutput.target.serialize(task.target) == "out/later.csv"
