"""Specification of luigi.target: the Target/FileSystem ABCs, FileSystemTarget and temporary_path."""

from __future__ import annotations

import gc
import os
import pathlib
import re
import shutil
import warnings

import pytest

from luigi.local_target import LocalTarget
from luigi.mock import MockFileSystem, MockTarget
from luigi.target import (
    AtomicLocalFile,
    FileAlreadyExists,
    FileSystem,
    FileSystemException,
    FileSystemTarget,
    MissingParentDirectory,
    NotADirectory,
    Target,
)


class DictFileSystem(FileSystem):
    """The smallest FileSystem: only what the ABC requires, plus move, to exercise the defaults."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}

    def exists(self, path: str) -> bool:
        return path in self.files

    def remove(self, path: str, recursive: bool = True, skip_trash: bool = True) -> None:
        del self.files[path]

    def move(self, path: str, dest: str) -> None:
        self.files[dest] = self.files.pop(path)


def test_target_requires_exists_only():
    with pytest.raises(TypeError, match="exists"):
        Target()  # type: ignore[abstract]

    class Always(Target):
        def exists(self) -> bool:
            return True

    assert Always().exists() is True


def test_filesystem_requires_exists_and_remove():
    class OnlyExists(FileSystem):
        def exists(self, path: str) -> bool:
            return False

    with pytest.raises(TypeError, match="remove"):
        OnlyExists()  # type: ignore[abstract]


@pytest.mark.parametrize(
    "call",
    [
        lambda fs: fs.mkdir("d"),
        lambda fs: fs.isdir("d"),
        lambda fs: fs.listdir("d"),
        lambda fs: fs.copy("a", "b"),
    ],
)
def test_filesystem_optional_operations_raise_not_implemented(call):
    with pytest.raises(NotImplementedError, match="DictFileSystem"):
        call(DictFileSystem())


def test_filesystem_exceptions_share_a_base_class():
    for exc in (FileAlreadyExists, MissingParentDirectory, NotADirectory):
        assert issubclass(exc, FileSystemException)
    assert issubclass(FileSystemException, Exception)


def test_rename_is_an_alias_of_move():
    fs = DictFileSystem()
    fs.files["a"] = "data"
    fs.rename("a", "b")
    assert fs.files == {"b": "data"}


def test_rename_dont_move_warns_then_moves_to_a_free_destination():
    fs = DictFileSystem()
    fs.files["a"] = "data"
    with pytest.warns(UserWarning, match="atomic"):
        fs.rename_dont_move("a", "b")
    assert fs.files == {"b": "data"}


def test_rename_dont_move_refuses_an_existing_destination():
    fs = DictFileSystem()
    fs.files.update(a="new", b="old")
    with pytest.warns(UserWarning), pytest.raises(FileAlreadyExists, match="'b'"):
        fs.rename_dont_move("a", "b")
    assert fs.files == {"a": "new", "b": "old"}


def test_filesystem_target_is_abstract_in_fs_and_open():
    with pytest.raises(TypeError):
        FileSystemTarget("x")  # type: ignore[abstract]


@pytest.mark.parametrize(
    "given, expected",
    [("a/b.txt", "a/b.txt"), (pathlib.Path("a") / "b.txt", "a/b.txt"), (b"a/b.txt", "a/b.txt")],
)
def test_path_is_coerced_to_str(given, expected):
    target = LocalTarget(given)
    assert target.path == expected
    assert isinstance(target.path, str)
    assert str(target) == expected


def test_path_accepts_any_pathlike():
    class Location(os.PathLike):
        def __fspath__(self) -> str:
            return "/data/out.csv"

    assert MockTarget(Location()).path == "/data/out.csv"  # type: ignore[arg-type]


def test_none_path_is_rejected_with_a_clear_error():
    with pytest.raises(TypeError, match="needs a path"):
        MockTarget(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("char", ["*", "?", "[", "{"])
def test_exists_warns_when_the_path_contains_glob_characters(tmp_path, char):
    target = LocalTarget(tmp_path / f"part{char}.csv")
    with pytest.warns(UserWarning, match="glob"):
        assert target.exists() is False


def test_exists_does_not_warn_for_a_plain_path(tmp_path):
    target = LocalTarget(tmp_path / "plain.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert target.exists() is False


def test_remove_deletes_the_target(tmp_path):
    target = LocalTarget(tmp_path / "f.txt")
    target._touchz()
    assert target.exists()
    target.remove()
    assert not target.exists()


def test_touchz_creates_an_empty_file(tmp_path):
    target = LocalTarget(tmp_path / "sub" / "empty")
    target._touchz()
    assert (tmp_path / "sub" / "empty").read_bytes() == b""


def test_temporary_path_moves_the_result_into_place_on_success(tmp_path):
    final = tmp_path / "out" / "result.txt"
    target = LocalTarget(final)
    with target.temporary_path() as tmp:
        assert re.fullmatch(re.escape(str(final)) + r"-luigi-tmp-\d{10}", tmp)
        assert os.path.isdir(final.parent), "the parent directory is created up front"
        assert not target.exists()
        pathlib.Path(tmp).write_text("done")
    assert final.read_text() == "done"
    assert os.listdir(final.parent) == ["result.txt"]


def test_temporary_path_moves_nothing_when_the_block_fails(tmp_path):
    final = tmp_path / "result.txt"
    target = LocalTarget(final)
    with pytest.raises(RuntimeError, match="boom"):
        with target.temporary_path() as tmp:
            pathlib.Path(tmp).write_text("half")
            raise RuntimeError("boom")
    assert not target.exists()


def test_temporary_path_keeps_a_trailing_slash_for_directories(tmp_path):
    target = LocalTarget(f"{tmp_path}/outdir/")
    with target.temporary_path() as tmp:
        assert re.fullmatch(re.escape(f"{tmp_path}/outdir") + r"-luigi-tmp-\d{10}/", tmp)
        os.makedirs(tmp)
        pathlib.Path(tmp, "part-0").write_text("x")
    assert (tmp_path / "outdir" / "part-0").read_text() == "x"


def test_temporary_path_refuses_to_overwrite_an_existing_target(tmp_path):
    final = tmp_path / "result.txt"
    final.write_text("old")
    with pytest.raises(FileAlreadyExists):
        with LocalTarget(final).temporary_path() as tmp:
            pathlib.Path(tmp).write_text("new")
    assert final.read_text() == "old"


def test_temporary_path_works_on_any_filesystem():
    MockFileSystem().clear()
    target = MockTarget("bucket/result")
    with pytest.warns(UserWarning, match="atomic"):  # the mock fs uses the generic rename_dont_move
        with target.temporary_path() as tmp:
            MockFileSystem().get_all_data()[tmp] = b"payload"
    assert dict(MockFileSystem().get_all_data()) == {"bucket/result": b"payload"}


def test_an_atomic_file_that_copies_instead_of_moving_has_its_temp_file_removed_when_dropped(tmp_path):
    """A subclass whose commit leaves the temporary file behind (an upload, say) relies on the finalizer."""

    class CopyingFile(AtomicLocalFile):
        def generate_tmp_path(self, path: str) -> str:
            return path + ".tmp"

        def move_to_final_destination(self) -> None:
            shutil.copyfile(self.tmp_path, self.path)

    with CopyingFile(str(tmp_path / "out")) as out:
        out.write(b"data")
    del out
    gc.collect()

    assert sorted(os.listdir(tmp_path)) == ["out"]
    assert (tmp_path / "out").read_bytes() == b"data"
