"""Luigi compatibility, j.12: MockTarget's mirror_on_stderr and open() argument checks."""

from __future__ import annotations

import gc

import pytest

import luigi
import luigi.format
from luigi.mock import MockFileSystem, MockTarget


@pytest.fixture(autouse=True)
def clean_fs():
    MockFileSystem().clear()
    yield
    MockFileSystem().clear()


def test_text_written_to_a_mirrored_target_appears_once_prefixed(capsys):
    with MockTarget("x", mirror_on_stderr=True).open("w") as f:
        f.write("Done.\n\n")
    assert capsys.readouterr().err == "x: Done.\n\n"
    assert MockTarget("x").open("r").read() == "Done.\n\n"


def test_the_prefix_comes_once_per_handle_and_never_after_a_newline(capsys):
    target = MockTarget("log", mirror_on_stderr=True)
    with target.open("w") as f:
        f.write("one\ntw")
        f.flush()
        f.write("o\nthree\n")
    with target.open("w") as f:
        f.write("again\n")
    assert capsys.readouterr().err == "log: one\ntwo\nthree\nlog: again\n"


def test_binary_chunks_are_mirrored_verbatim_as_they_arrive(capsys):
    with MockTarget("bin", mirror_on_stderr=True, format=luigi.format.Nop).open("w") as f:
        f.write(b"a")
        assert capsys.readouterr().err == "bin: a"
        f.write(b"\nb")
        assert capsys.readouterr().err == "\nb"
        f.write("é".encode()[:1])  # half a character: held back until the rest arrives
        f.write("é".encode()[1:] + b"!")
    assert capsys.readouterr().err == "é!"


def test_text_chunks_reach_the_mirror_when_flushed(capsys):
    with MockTarget("t", mirror_on_stderr=True).open("w") as f:
        f.write("buffered")
        assert capsys.readouterr().err == ""
    assert capsys.readouterr().err == "t: buffered"


def test_a_handle_that_writes_nothing_mirrors_nothing(capsys):
    with MockTarget("empty", mirror_on_stderr=True).open("w"):
        pass
    assert capsys.readouterr().err == ""
    assert MockTarget("empty").exists()


def test_without_mirror_nothing_reaches_stderr(capsys):
    with MockTarget("quiet").open("w") as f:
        f.write("silent\n")
    assert capsys.readouterr().err == ""


def test_open_without_a_mode_string_is_a_type_error():
    with pytest.raises(TypeError):
        MockTarget("x").open(None)


def test_a_dropped_mock_write_handle_stores_nothing():
    for fmt in (luigi.format.Text, luigi.format.Nop):
        handle = MockTarget("dropped", format=fmt).open("w")
        handle.write("x" if fmt is luigi.format.Text else b"x")
        del handle
        gc.collect()
        assert not MockTarget("dropped").exists()
