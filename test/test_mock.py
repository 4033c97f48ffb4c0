"""Specification of luigi.mock: the in-memory file system shared with forked processes."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys

import pytest

import luigi.format
from luigi.mock import MockFileSystem, MockTarget
from luigi.target import FileAlreadyExists


@pytest.fixture
def fs() -> MockFileSystem:
    filesystem = MockFileSystem()
    filesystem.clear()
    return filesystem


def put(fs: MockFileSystem, *paths: str) -> None:
    for path in paths:
        fs.get_all_data()[path] = path.encode()


def test_importing_luigi_mock_starts_no_process():
    code = (
        "import multiprocessing, luigi.mock\n"
        "assert luigi.mock.MockFileSystem._data is None\n"
        "assert multiprocessing.active_children() == []\n"
        "luigi.mock.MockFileSystem().exists('x')\n"
        "assert len(multiprocessing.active_children()) == 1\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_write_then_read(fs):
    target = MockTarget("/data/out.txt")
    assert not target.exists()
    with target.open("w") as f:
        f.write("hello\n")
    assert target.exists()
    with target.open("r") as f:
        assert f.read() == "hello\n"
    assert fs.get_data("/data/out.txt") == b"hello\n"


def test_data_is_stored_as_bytes_only_on_close(fs):
    target = MockTarget("f")
    f = target.open("w")
    f.write("pending")
    f.flush()
    assert not target.exists()
    f.close()
    assert fs.get_all_data()["f"] == b"pending"


def test_exception_in_writer_commits_nothing(fs):
    target = MockTarget("f")
    with pytest.raises(RuntimeError):
        with target.open("w") as f:
            f.write("half")
            raise RuntimeError("midway")
    assert not target.exists()
    assert dict(fs.get_all_data()) == {}


def test_exception_in_binary_writer_commits_nothing(fs):
    target = MockTarget("f", format=luigi.format.Nop)
    with pytest.raises(RuntimeError):
        with target.open("wb") as f:
            f.write(b"half")
            raise RuntimeError("midway")
    assert not target.exists()


def test_formats_apply_to_mock_targets(fs):
    target = MockTarget("f.gz", format=luigi.format.Text >> luigi.format.Gzip)
    with target.open("w") as f:
        f.write("zipped")
    assert fs.get_data("f.gz")[:2] == b"\x1f\x8b"
    with target.open("r") as f:
        assert f.read() == "zipped"


def test_reading_a_missing_file_is_a_clear_error(fs):
    with pytest.raises(FileNotFoundError, match="'nope'"):
        MockTarget("nope").open("r")


@pytest.mark.parametrize("mode", ["a", "rw", "x"])
def test_unsupported_modes_raise_value_error(fs, mode):
    with pytest.raises(ValueError, match="Unsupported mode"):
        MockTarget("f").open(mode)


def test_mirror_on_stderr_prefixes_the_path_once_per_handle(fs, capsys):
    with MockTarget("log", mirror_on_stderr=True).open("w") as f:
        f.write("one\ntw")
        f.write("o\nthree\n")
    assert capsys.readouterr().err == "log: one\ntwo\nthree\n"


def test_all_instances_share_the_data(fs):
    with MockTarget("shared").open("w") as f:
        f.write("x")
    assert MockFileSystem().exists("shared")
    assert MockTarget("shared").exists()


def test_clear_forgets_everything(fs):
    put(fs, "a", "b")
    fs.clear()
    assert dict(fs.get_all_data()) == {}


def test_get_data_of_a_missing_file_raises(fs):
    with pytest.raises(FileNotFoundError, match="No mock file 'x'"):
        fs.get_data("x")


def test_copy(fs):
    put(fs, "a", "b")
    fs.copy("a", "c")
    assert fs.get_data("c") == b"a"
    with pytest.raises(FileAlreadyExists):
        fs.copy("a", "b", raise_if_exists=True)
    assert fs.get_data("b") == b"b"


def test_move_file_and_target(fs):
    put(fs, "a", "b")
    fs.move("a", "c")
    assert sorted(fs.get_all_data().keys()) == ["b", "c"]
    with pytest.raises(FileAlreadyExists):
        fs.move("c", "b", raise_if_exists=True)
    target = MockTarget("c")
    target.move("d")
    assert sorted(fs.get_all_data().keys()) == ["b", "d"]
    MockTarget("d").rename("e")
    assert fs.exists("e")


def test_move_directory_moves_every_file_below_it(fs):
    put(fs, "dir/x", "dir/sub/y", "dirty")
    fs.move("dir", "new")
    assert sorted(fs.get_all_data().keys()) == ["dirty", "new/sub/y", "new/x"]
    with pytest.raises(FileNotFoundError):
        fs.move("ghost", "other")


def test_remove_recursive_deletes_by_prefix(fs):
    put(fs, "out/part-0", "out/part-1", "outer", "keep")
    fs.remove("out")
    assert list(fs.get_all_data().keys()) == ["keep"]


def test_remove_non_recursive_deletes_one_file(fs):
    put(fs, "a", "ab")
    fs.remove("a", recursive=False)
    assert list(fs.get_all_data().keys()) == ["ab"]
    with pytest.raises(FileNotFoundError):
        fs.remove("a", recursive=False)


def test_target_remove(fs):
    put(fs, "t")
    MockTarget("t").remove()
    assert not fs.exists("t")


def test_listdir_is_a_prefix_match(fs):
    put(fs, "d/b", "d/a", "dx", "other")
    assert fs.listdir("d/") == ["d/a", "d/b"]
    assert fs.listdir("d") == ["d/a", "d/b", "dx"]


def test_isdir_means_some_file_lives_below(fs):
    put(fs, "d/a", "file")
    assert fs.isdir("d") and fs.isdir("d/")
    assert not fs.isdir("file")
    assert not fs.isdir("missing")


def test_mkdir_is_a_no_op(fs):
    fs.mkdir("anything", parents=False, raise_if_exists=True)
    assert dict(fs.get_all_data()) == {}


def test_mock_target_keeps_its_arguments(fs):
    target = MockTarget("p", is_tmp=True, format=luigi.format.Nop)
    assert target.is_tmp is True
    assert target.format is luigi.format.Nop
    assert MockTarget("q").format is luigi.format.get_default_format()


def _write_in_child(path: str, text: str) -> None:
    with MockTarget(path).open("w") as f:
        f.write(text)


def _fail_in_child(path: str) -> None:
    with MockTarget(path).open("w") as f:
        f.write("should never be seen")
        raise RuntimeError("child failed")


def test_a_write_in_a_forked_child_is_visible_in_the_parent(fs):
    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=_write_in_child, args=("from/child", "written by the child\n"))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    with MockTarget("from/child").open("r") as f:
        assert f.read() == "written by the child\n"


def test_a_failed_write_in_a_forked_child_commits_nothing(fs):
    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=_fail_in_child, args=("from/child",))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 1
    assert not MockTarget("from/child").exists()
