"""SafeExtractor: real tar files built in tmp, extracted whole or refused before anything is written."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from luigi.safe_extractor import SafeExtractor


def add_file(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def add_link(tar: tarfile.TarFile, name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> None:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    tar.addfile(info)


def build_tar(path: Path, files: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            add_file(tar, name, data)
        for name, target in (links or {}).items():
            add_link(tar, name, target)
    return path


def test_a_clean_archive_is_extracted_whole(tmp_path):
    archive = build_tar(tmp_path / "ok.tar.gz", {"a.txt": b"alpha", "sub/b.txt": b"beta"})
    destination = tmp_path / "out"
    SafeExtractor(str(destination)).safe_extract(str(archive))
    assert (destination / "a.txt").read_bytes() == b"alpha"
    assert (destination / "sub" / "b.txt").read_bytes() == b"beta"


def test_the_default_destination_is_the_current_directory(tmp_path, monkeypatch):
    archive = build_tar(tmp_path / "ok.tar", {"here.txt": b"x"})
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    SafeExtractor().safe_extract(str(archive))
    assert (workdir / "here.txt").read_bytes() == b"x"


@pytest.mark.parametrize("evil_name", ["../escaped.txt", "sub/../../escaped.txt", "/tmp/absolute-escape.txt"])
def test_a_member_outside_the_destination_is_refused_before_anything_is_extracted(tmp_path, evil_name):
    # The harmless member comes first: it must not be written either.
    archive = build_tar(tmp_path / "evil.tar.gz", {"first.txt": b"1", evil_name: b"evil"})
    destination = tmp_path / "out"
    destination.mkdir()
    with pytest.raises(RuntimeError, match=r"^Attempted Path Traversal in Tar File$"):
        SafeExtractor(str(destination)).safe_extract(str(archive))
    assert list(destination.iterdir()) == []
    assert not (tmp_path / "escaped.txt").exists()


def test_a_sibling_directory_sharing_the_destinations_name_prefix_is_outside(tmp_path):
    archive = build_tar(tmp_path / "evil.tar", {"../out-evil/x.txt": b"evil"})
    destination = tmp_path / "out"
    destination.mkdir()
    with pytest.raises(RuntimeError, match="Attempted Path Traversal in Tar File"):
        SafeExtractor(str(destination)).safe_extract(str(archive))
    assert not (tmp_path / "out-evil").exists()


def test_a_symlink_pointing_outside_the_destination_is_refused(tmp_path):
    archive = build_tar(tmp_path / "link.tar", {"ok.txt": b"ok"}, links={"escape": "../../etc"})
    destination = tmp_path / "out"
    destination.mkdir()
    with pytest.raises(RuntimeError, match="Attempted Path Traversal in Tar File"):
        SafeExtractor(str(destination)).safe_extract(str(archive))
    assert list(destination.iterdir()) == []


def test_only_the_given_members_are_extracted_and_numeric_owner_is_accepted(tmp_path):
    archive = build_tar(tmp_path / "some.tar", {"keep.txt": b"k", "skip.txt": b"s"})
    destination = tmp_path / "out"
    with tarfile.open(archive) as tar:
        keep = [member for member in tar.getmembers() if member.name == "keep.txt"]
    SafeExtractor(destination).safe_extract(archive, members=keep, numeric_owner=True)
    assert sorted(p.name for p in destination.iterdir()) == ["keep.txt"]
