"""luigi.contrib.sparkey: the export task's contract, with a FAKE of the sparkey bindings' LogWriter.

The real bindings (``pip install sparkey-python``) load Spotify's C library libsparkey with ctypes, and
that library is in no package registry this project can reach, so a real Sparkey file cannot be written
here. `helpers.sparkey_fake` stands in for ``sparkey`` in ``sys.modules``; everything else is real:
``luigi.build``, the input targets, the temporary file and its move into place.
"""

from __future__ import annotations

import sys
from pathlib import Path

import helpers.sparkey_fake as fake_sparkey
import pytest
from helpers.outcomes import build_failing, printed_without

import luigi
from luigi.contrib.optional import MissingExtraError
from luigi.contrib.sparkey import SparkeyExportTask
from luigi.mock import MockTarget


@pytest.fixture(autouse=True)
def sparkey(monkeypatch: pytest.MonkeyPatch) -> list[fake_sparkey.LogWriter]:
    """The fake as ``sparkey``; the writers the test made."""
    monkeypatch.setitem(sys.modules, "sparkey", fake_sparkey)
    monkeypatch.setattr(fake_sparkey, "written", [])
    return fake_sparkey.written


class Listing(luigi.ExternalTask):
    path = luigi.Parameter()

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(self.path)


class ExportListings(SparkeyExportTask):
    sources = luigi.ListParameter()
    destination = luigi.Parameter()

    def requires(self) -> list[Listing]:
        return [Listing(path=path) for path in self.sources]

    def output(self) -> luigi.Target:
        return luigi.LocalTarget(self.destination)


class ExportCsv(ExportListings):
    separator = ","


def listing(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_every_key_value_line_of_every_input_lands_in_the_output_log(tmp_path, sparkey, monkeypatch):
    sources = [
        listing(tmp_path, "a.tsv", "ada\tlovelace\ngrace\thopper\n"),
        listing(tmp_path, "b.tsv", "k\tv\tw\n"),
    ]
    destination = tmp_path / "people.spl"
    output_when_closed = []
    close = fake_sparkey.LogWriter.close
    monkeypatch.setattr(
        fake_sparkey.LogWriter, "close", lambda w: (output_when_closed.append(destination.exists()), close(w))
    )

    assert luigi.build([ExportListings(sources=sources, destination=str(destination))], local_scheduler=True)

    [writer] = sparkey
    assert writer.entries == [("ada", "lovelace"), ("grace", "hopper"), ("k", "v\tw")]  # split once
    assert writer.closed and output_when_closed == [False]  # written aside, moved in only when complete
    assert writer.filename != str(destination) and not Path(writer.filename).exists()
    assert destination.read_text() == fake_sparkey.HEADER + "ada\tlovelace\ngrace\thopper\nk\tv\tw\n"


def test_the_separator_class_attribute_splits_keys_from_values(tmp_path, sparkey):
    source = listing(tmp_path, "a.csv", "  id7,seven,7  \n")
    assert luigi.build([ExportCsv(sources=[source], destination=str(tmp_path / "o"))], local_scheduler=True)
    assert sparkey[0].entries == [("id7", "seven,7")]  # each line stripped first, as in Luigi


def test_an_output_that_is_not_a_local_target_fails_the_task_with_a_type_error(tmp_path, sparkey):
    class ToMock(ExportListings):
        def output(self) -> luigi.Target:
            return MockTarget(self.destination)

    error = build_failing(ToMock(sources=[listing(tmp_path, "a.tsv", "k\tv\n")], destination="out"))
    assert isinstance(error, TypeError) and str(error) == "output must be a LocalTarget"
    assert sparkey == []


def test_a_line_without_the_separator_fails_naming_it_and_leaves_no_output(tmp_path, sparkey):
    source = listing(tmp_path, "a.tsv", "k\tv\nno separator here\n")
    error = build_failing(ExportListings(sources=[source], destination=str(tmp_path / "o")))
    assert isinstance(error, ValueError)
    assert f"line 2 of input LocalTarget('{source}')" in str(error) and "'no separator here'" in str(error)
    assert not (tmp_path / "o").exists()


def test_without_the_bindings_running_the_task_names_the_extra():
    code = (
        "from luigi.contrib.sparkey import SparkeyExportTask\n"
        "class T(SparkeyExportTask):\n"
        "    def output(self):\n        import luigi; return luigi.LocalTarget('never')\n"
        "try:\n    T().run()\nexcept ImportError as e:\n    print(e)"
    )
    assert printed_without("sparkey", code) == (
        "luigi.contrib.sparkey needs the 'sparkey' package, which is not installed: "
        "pip install 'luigi[sparkey]' (or pip install sparkey-python)"
    )


def test_bindings_without_libsparkey_fail_naming_the_c_library(tmp_path, monkeypatch):
    # What sparkey-python does when imported: it loads libsparkey with ctypes and looks its symbols up.
    (tmp_path / "sparkey.py").write_text(
        "import ctypes, ctypes.util\n"
        "libsparkey = ctypes.cdll.LoadLibrary(ctypes.util.find_library('sparkey-not-installed'))\n"
        "libsparkey.sparkey_errstring\n"
    )
    monkeypatch.delitem(sys.modules, "sparkey")
    monkeypatch.syspath_prepend(str(tmp_path))
    task = ExportListings(sources=[listing(tmp_path, "a.tsv", "k\tv\n")], destination=str(tmp_path / "o"))
    with pytest.raises(MissingExtraError, match="cannot load Spotify's C library libsparkey"):
        task.run()
