"""Specification of luigi.local_target: LocalTarget's atomic writes and LocalFileSystem's operations."""

from __future__ import annotations

import errno
import gc
import os
import re
import shutil
import tempfile

import pytest

import luigi.format
from luigi.local_target import LocalFileSystem, LocalTarget, atomic_file
from luigi.target import FileAlreadyExists, MissingParentDirectory, NotADirectory


def leftovers(directory) -> list[str]:
    return sorted(name for name in os.listdir(directory) if "-luigi-tmp-" in name)


# --- LocalTarget: writing ---------------------------------------------------------------------------------


def test_write_then_read_text(tmp_path):
    target = LocalTarget(tmp_path / "out.txt")
    with target.open("w") as f:
        f.write("héllo\nworld\n")
    with target.open("r") as f:
        assert f.read() == "héllo\nworld\n"
    assert (tmp_path / "out.txt").read_bytes() == "héllo\nworld\n".encode()


def test_write_creates_missing_parent_directories(tmp_path):
    target = LocalTarget(tmp_path / "a" / "b" / "c.txt")
    with target.open("w") as f:
        f.write("x")
    assert (tmp_path / "a" / "b" / "c.txt").read_text() == "x"


def test_output_appears_only_when_the_file_is_closed(tmp_path):
    target = LocalTarget(tmp_path / "out.txt")
    f = target.open("w")
    f.write("data")
    f.flush()
    assert not target.exists()
    assert len(leftovers(tmp_path)) == 1
    f.close()
    assert target.exists()
    assert leftovers(tmp_path) == []


def test_temp_file_sits_next_to_the_output_with_nine_digits(tmp_path):
    target = LocalTarget(tmp_path / "out.txt")
    with target.open("w"):
        (tmp_name,) = leftovers(tmp_path)
        assert re.fullmatch(r"out\.txt-luigi-tmp-\d{9}", tmp_name)


def test_exception_in_writer_leaves_no_file_and_no_temp_file(tmp_path):
    target = LocalTarget(tmp_path / "out.txt")
    with pytest.raises(ValueError, match="midway"):
        with target.open("w") as f:
            f.write("first half\n" * 10000)
            raise ValueError("midway")
    assert not target.exists()
    assert os.listdir(tmp_path) == []


def test_exception_in_writer_keeps_the_previous_version(tmp_path):
    target = LocalTarget(tmp_path / "out.txt")
    with target.open("w") as f:
        f.write("version 1")
    with pytest.raises(KeyError):
        with target.open("w") as f:
            f.write("version 2, incomplete")
            raise KeyError("oops")
    assert (tmp_path / "out.txt").read_text() == "version 1"
    assert leftovers(tmp_path) == []


def test_exception_in_binary_writer_leaves_nothing(tmp_path):
    target = LocalTarget(tmp_path / "blob", format=luigi.format.Nop)
    with pytest.raises(RuntimeError):
        with target.open("wb") as f:
            f.write(b"\x00" * 100)
            raise RuntimeError()
    assert os.listdir(tmp_path) == []


def test_unclosed_writer_that_is_dropped_commits_nothing(tmp_path):
    target = LocalTarget(tmp_path / "blob", format=luigi.format.Nop)
    f = target.open("w")
    f.write(b"partial")
    del f
    gc.collect()
    assert os.listdir(tmp_path) == []


def test_rewriting_replaces_the_whole_file(tmp_path):
    target = LocalTarget(tmp_path / "out.txt")
    for text in ("a long first version", "short"):
        with target.open("w") as f:
            f.write(text)
    assert (tmp_path / "out.txt").read_text() == "short"


# --- LocalTarget: modes and formats -----------------------------------------------------------------------


def test_b_and_t_in_the_mode_do_not_change_the_format(tmp_path):
    target = LocalTarget(tmp_path / "out.txt")
    with target.open("wt") as f:
        f.write("text")
    with target.open("rb") as f:
        assert f.read() == "text", "the default Text format decides, not the 'b'"


def test_nop_format_reads_and_writes_bytes(tmp_path):
    target = LocalTarget(tmp_path / "blob", format=luigi.format.Nop)
    payload = bytes(range(256))
    with target.open("wb") as f:
        f.write(payload)
    with target.open("rb") as f:
        assert f.read() == payload


@pytest.mark.parametrize("mode", ["a", "r+", "x", "w+", ""])
def test_other_modes_raise_a_clear_error(tmp_path, mode):
    target = LocalTarget(tmp_path / "out.txt")
    with pytest.raises(ValueError, match=re.escape(f"Unsupported mode {mode!r}")):
        target.open(mode)


def test_reading_a_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        LocalTarget(tmp_path / "missing").open("r")


def test_default_format_is_text(tmp_path):
    assert LocalTarget(tmp_path / "x").format is luigi.format.get_default_format()
    assert luigi.format.get_default_format() is luigi.format.Text


def test_gzip_target_round_trip(tmp_path):
    target = LocalTarget(tmp_path / "data.gz", format=luigi.format.Gzip)
    with target.open("w") as f:
        f.write(b"compressed payload")
    with target.open("r") as f:
        assert f.read() == b"compressed payload"


# --- LocalTarget: other operations ------------------------------------------------------------------------


def test_target_without_path_needs_is_tmp():
    with pytest.raises(ValueError, match="needs a path"):
        LocalTarget()


def test_tmp_target_lives_in_the_temp_dir_and_is_removed_when_dropped():
    target = LocalTarget(is_tmp=True)
    assert re.fullmatch(re.escape(tempfile.gettempdir()) + r"/luigi-tmp-\d{9}", target.path)
    with target.open("w") as f:
        f.write("scratch")
    path = target.path
    assert os.path.exists(path)
    del target
    gc.collect()
    assert not os.path.exists(path)


def test_move_renames_the_file(tmp_path):
    target = LocalTarget(tmp_path / "a.txt")
    target._touchz()
    target.move(str(tmp_path / "sub" / "b.txt"))
    assert not target.exists()
    assert (tmp_path / "sub" / "b.txt").exists()


def test_move_can_refuse_to_overwrite(tmp_path):
    (tmp_path / "b.txt").write_text("keep")
    target = LocalTarget(tmp_path / "a.txt")
    target._touchz()
    with pytest.raises(FileAlreadyExists):
        target.move(str(tmp_path / "b.txt"), raise_if_exists=True)
    assert (tmp_path / "b.txt").read_text() == "keep"


def test_move_dir_moves_a_directory(tmp_path):
    (tmp_path / "src" / "deep").mkdir(parents=True)
    (tmp_path / "src" / "deep" / "f").write_text("1")
    LocalTarget(tmp_path / "src").move_dir(str(tmp_path / "dst"))
    assert (tmp_path / "dst" / "deep" / "f").read_text() == "1"
    assert not (tmp_path / "src").exists()


def test_copy_duplicates_the_file(tmp_path):
    target = LocalTarget(tmp_path / "a.txt")
    with target.open("w") as f:
        f.write("content")
    target.copy(str(tmp_path / "copies" / "b.txt"))
    assert (tmp_path / "a.txt").read_text() == "content"
    assert (tmp_path / "copies" / "b.txt").read_text() == "content"
    with pytest.raises(FileAlreadyExists):
        target.copy(str(tmp_path / "copies" / "b.txt"), raise_if_exists=True)


def test_makedirs_creates_the_parent_only(tmp_path):
    target = LocalTarget(tmp_path / "x" / "y" / "file")
    target.makedirs()
    target.makedirs()
    assert (tmp_path / "x" / "y").is_dir()
    assert not target.exists()


def test_fn_is_a_deprecated_alias_of_path(tmp_path):
    target = LocalTarget(tmp_path / "f")
    with pytest.warns(DeprecationWarning, match="path"):
        assert target.fn == target.path


def test_fs_is_shared_local_filesystem(tmp_path):
    assert isinstance(LocalTarget.fs, LocalFileSystem)
    assert LocalTarget(tmp_path / "a").fs is LocalTarget(tmp_path / "b").fs


# --- atomic_file ------------------------------------------------------------------------------------------


def test_atomic_file_commits_on_close(tmp_path):
    path = str(tmp_path / "f.bin")
    f = atomic_file(path)
    assert f.tmp_path.startswith(path + "-luigi-tmp-")
    f.write(b"abc")
    assert not os.path.exists(path)
    f.close()
    f.close()  # a second close is harmless
    with open(path, "rb") as fh:
        assert fh.read() == b"abc"
    assert not os.path.exists(f.tmp_path)


def test_atomic_file_context_manager_commits_only_on_success(tmp_path):
    ok, bad = str(tmp_path / "ok"), str(tmp_path / "bad")
    with atomic_file(ok) as f:
        f.write(b"1")
    with pytest.raises(OSError):
        with atomic_file(bad) as f:
            f.write(b"2")
            raise OSError("disk trouble")
    assert os.listdir(tmp_path) == ["ok"]


# --- LocalFileSystem --------------------------------------------------------------------------------------


@pytest.fixture
def fs() -> LocalFileSystem:
    return LocalFileSystem()


def test_mkdir_creates_parents_by_default(fs, tmp_path):
    fs.mkdir(str(tmp_path / "a" / "b"))
    assert fs.isdir(str(tmp_path / "a" / "b"))


def test_mkdir_on_an_existing_directory_is_quiet_unless_asked(fs, tmp_path):
    fs.mkdir(str(tmp_path))
    with pytest.raises(FileAlreadyExists, match="already exists"):
        fs.mkdir(str(tmp_path), raise_if_exists=True)


def test_mkdir_on_an_existing_file_raises_not_a_directory(fs, tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(NotADirectory):
        fs.mkdir(str(tmp_path / "f"))
    with pytest.raises(NotADirectory):
        fs.mkdir(str(tmp_path / "f" / "sub"))


def test_mkdir_without_parents_needs_the_parent(fs, tmp_path):
    with pytest.raises(MissingParentDirectory, match="parents=True"):
        fs.mkdir(str(tmp_path / "missing" / "child"), parents=False)
    fs.mkdir(str(tmp_path / "child"), parents=False)
    assert fs.isdir(str(tmp_path / "child"))


def test_exists_and_isdir(fs, tmp_path):
    (tmp_path / "f").write_text("")
    assert fs.exists(str(tmp_path / "f")) and not fs.isdir(str(tmp_path / "f"))
    assert fs.exists(str(tmp_path)) and fs.isdir(str(tmp_path))
    assert not fs.exists(str(tmp_path / "nope"))


def test_listdir_yields_files_recursively(fs, tmp_path):
    (tmp_path / "d" / "e").mkdir(parents=True)
    for name in ("top", "d/mid", "d/e/leaf"):
        (tmp_path / name).write_text(name)
    assert sorted(fs.listdir(str(tmp_path))) == [
        str(tmp_path / "d" / "e" / "leaf"),
        str(tmp_path / "d" / "mid"),
        str(tmp_path / "top"),
    ]


def test_remove_deletes_files_and_directory_trees(fs, tmp_path):
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "d" / "e" / "leaf").write_text("")
    (tmp_path / "f").write_text("")
    fs.remove(str(tmp_path / "f"))
    with pytest.raises(OSError):
        fs.remove(str(tmp_path / "d"), recursive=False)
    fs.remove(str(tmp_path / "d"))
    assert os.listdir(tmp_path) == []


def test_rename_dont_move_refuses_an_existing_destination(fs, tmp_path):
    (tmp_path / "a").write_text("a")
    (tmp_path / "b").write_text("b")
    with pytest.raises(FileAlreadyExists):
        fs.rename_dont_move(str(tmp_path / "a"), str(tmp_path / "b"))
    fs.rename_dont_move(str(tmp_path / "a"), str(tmp_path / "c"))
    assert sorted(os.listdir(tmp_path)) == ["b", "c"]


def _cross_device_replace(monkeypatch, source: str):
    """Make os.replace fail with EXDEV when moving `source`, as it does between file systems."""
    real_replace = os.replace

    def replace(src, dst, **kwargs):
        if os.fspath(src) == source:
            raise OSError(errno.EXDEV, "Invalid cross-device link", src)
        return real_replace(src, dst, **kwargs)

    monkeypatch.setattr(os, "replace", replace)


def test_move_falls_back_to_copying_across_devices(fs, tmp_path, monkeypatch):
    source = tmp_path / "src.txt"
    source.write_text("payload")
    _cross_device_replace(monkeypatch, str(source))
    fs.move(str(source), str(tmp_path / "out" / "dst.txt"))
    assert not source.exists()
    assert (tmp_path / "out" / "dst.txt").read_text() == "payload"
    assert leftovers(tmp_path / "out") == []


def test_move_of_a_directory_across_devices(fs, tmp_path, monkeypatch):
    (tmp_path / "src" / "sub").mkdir(parents=True)
    (tmp_path / "src" / "sub" / "f").write_text("1")
    _cross_device_replace(monkeypatch, str(tmp_path / "src"))
    fs.move(str(tmp_path / "src"), str(tmp_path / "dst"))
    assert sorted(os.listdir(tmp_path)) == ["dst"]
    assert (tmp_path / "dst" / "sub" / "f").read_text() == "1"


def test_move_between_real_file_systems(fs, tmp_path):
    if not os.path.isdir("/dev/shm") or os.stat("/dev/shm").st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs /dev/shm on a different device from the temp dir")
    other = tempfile.mkdtemp(dir="/dev/shm")
    try:
        source = os.path.join(other, "src.txt")
        with open(source, "w") as fh:
            fh.write("across")
        fs.move(source, str(tmp_path / "dst.txt"))
        assert (tmp_path / "dst.txt").read_text() == "across"
        assert not os.path.exists(source)
    finally:
        shutil.rmtree(other)


def test_move_reraises_other_errors(fs, tmp_path):
    with pytest.raises(FileNotFoundError):
        fs.move(str(tmp_path / "missing"), str(tmp_path / "dst"))


def test_writing_into_an_existing_directory_creates_nothing_else(tmp_path):
    (tmp_path / "d").mkdir()
    target = LocalTarget(tmp_path / "d" / "out.txt")

    with target.open("w") as out:
        out.write("x")

    assert sorted(os.listdir(tmp_path)) == ["d"]
    assert os.listdir(tmp_path / "d") == ["out.txt"]


def test_writing_below_a_file_fails_as_before(tmp_path):
    (tmp_path / "f").write_text("not a directory")
    target = LocalTarget(tmp_path / "f" / "out.txt")

    with pytest.raises(FileExistsError):
        target.open("w")
