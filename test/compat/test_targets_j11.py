"""Luigi compatibility, j.11: unclosed write handles publish nothing; temporary_path() names and parents.

Only ``close()`` or a clean ``with`` exit commits a target. A handle that is dropped, garbage-collected or
left open when the process ends leaves neither the target nor its temporary file, whatever the format.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tempfile
import textwrap

import pytest
from helpers.s3_server import s3_server  # noqa: F401  # the session fixture

import luigi
import luigi.format
from luigi.target import FileSystem, FileSystemTarget

FORMATS = {
    "Text": luigi.format.Text,
    "UTF8": luigi.format.UTF8,
    "Nop": luigi.format.Nop,
    "Gzip": luigi.format.Gzip,
    "Bzip2": luigi.format.Bzip2,
    "SysNewLine": luigi.format.SysNewLine,
    "MixedUnicodeBytes": luigi.format.MixedUnicodeBytes,
    "Text>>Gzip": luigi.format.Text >> luigi.format.Gzip,
    "UTF8>>SysNewLine": luigi.format.UTF8 >> luigi.format.SysNewLine,
}


def _payload(fmt: luigi.format.Format) -> str | bytes:
    return "some text\n" if fmt.input == luigi.format.UNICODE else b"some bytes\n"


@pytest.mark.parametrize("fmt", FORMATS.values(), ids=FORMATS.keys())
def test_a_dropped_write_handle_publishes_nothing(tmp_path, fmt):
    handle = luigi.LocalTarget(str(tmp_path / "out"), format=fmt).open("w")
    handle.write(_payload(fmt))
    del handle
    gc.collect()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("fmt", FORMATS.values(), ids=FORMATS.keys())
def test_a_flushed_then_collected_handle_publishes_nothing(tmp_path, fmt):
    handle = luigi.LocalTarget(str(tmp_path / "out"), format=fmt).open("w")
    handle.write(_payload(fmt))
    handle.flush()
    cycle = [handle]
    cycle.append(cycle)  # only the cycle collector can free it
    del handle, cycle
    gc.collect()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("fmt", FORMATS.values(), ids=FORMATS.keys())
def test_close_and_a_clean_with_exit_commit(tmp_path, fmt):
    target = luigi.LocalTarget(str(tmp_path / "closed"), format=fmt)
    handle = target.open("w")
    handle.write(_payload(fmt))
    handle.close()
    with luigi.LocalTarget(str(tmp_path / "with"), format=fmt).open("w") as f:
        f.write(_payload(fmt))
    assert sorted(os.listdir(tmp_path)) == ["closed", "with"]
    with target.open("r") as f:
        assert f.read() == _payload(fmt)


@pytest.mark.parametrize("fmt", FORMATS.values(), ids=FORMATS.keys())
def test_an_exception_in_the_with_block_publishes_nothing(tmp_path, fmt):
    with pytest.raises(KeyError):
        with luigi.LocalTarget(str(tmp_path / "out"), format=fmt).open("w") as f:
            f.write(_payload(fmt))
            raise KeyError("half way")
    assert os.listdir(tmp_path) == []


def test_a_handle_left_open_when_the_process_exits_publishes_nothing(tmp_path):
    script = textwrap.dedent(
        f"""
        import luigi, luigi.format
        text = luigi.LocalTarget({str(tmp_path / "text")!r}).open("w")
        text.write("never closed")
        gz = luigi.LocalTarget({str(tmp_path / "gz")!r}, format=luigi.format.Gzip).open("w")
        gz.write(b"never closed")
        KEEP = [text, gz]  # still referenced when the interpreter shuts down
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert os.listdir(tmp_path) == []


def test_a_task_whose_run_drops_its_handle_fails_for_missing_output(tmp_path):
    class Forgetful(luigi.Task):
        def output(self):
            return luigi.LocalTarget(str(tmp_path / "forgot"))

        def run(self):
            self.output().open("w").write("written but never closed")

    result = luigi.build([Forgetful()], local_scheduler=True, detailed_summary=True, log_level="ERROR")
    assert not (tmp_path / "forgot").exists()
    assert os.listdir(tmp_path) == []
    assert "failed" in result.summary_text


# -- S3Target shares the text layer: a dropped handle uploads nothing -------------------------------------


def test_a_dropped_s3_write_handle_uploads_nothing(s3_server, tmp_path, monkeypatch):  # noqa: F811
    from luigi.contrib.s3 import S3Target

    s3_server.configure()
    bucket = s3_server.new_bucket()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the upload is staged
    handle = S3Target(f"s3://{bucket}/dropped.txt").open("w")
    handle.write("never closed")
    del handle
    gc.collect()
    with S3Target(f"s3://{bucket}/kept.txt").open("w") as f:
        f.write("closed")
    listing = s3_server.boto3_client().list_objects_v2(Bucket=bucket)
    assert [item["Key"] for item in listing.get("Contents", [])] == ["kept.txt"]
    assert os.listdir(tmp_path) == []


# -- temporary_path() -------------------------------------------------------------------------------------


class RecordingFileSystem(FileSystem):
    """A user's own file system that records what temporary_path() asks of it."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    def exists(self, path: str) -> bool:
        return False

    def remove(self, path: str, recursive: bool = True, skip_trash: bool = True) -> None:
        self.calls.append(("remove", path))

    def mkdir(self, path: str, parents: bool = True, raise_if_exists: bool = False) -> None:
        self.calls.append(("mkdir", path, parents, raise_if_exists))

    def rename_dont_move(self, path: str, dest: str) -> None:
        self.calls.append(("rename_dont_move", path, dest))


class RecordingTarget(FileSystemTarget):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self._fs = RecordingFileSystem()

    @property
    def fs(self) -> RecordingFileSystem:
        return self._fs

    def open(self, mode: str = "r"):
        raise NotImplementedError


@pytest.mark.parametrize(
    ("path", "prefix", "suffix", "parent"),
    [
        ("/data/out/", "/data/out-luigi-tmp-", "/", "/data"),
        ("D:\\data\\out\\", "D:\\data\\out-luigi-tmp-", "\\", None),
        ("/data/out.csv", "/data/out.csv-luigi-tmp-", "", "/data"),
        ("out.csv", "out.csv-luigi-tmp-", "", None),
        ("out/", "out-luigi-tmp-", "/", None),
    ],
)
def test_temporary_path_keeps_a_trailing_separator_and_makes_only_a_real_parent(path, prefix, suffix, parent):
    target = RecordingTarget(path)
    with target.temporary_path() as tmp:
        assert tmp.startswith(prefix) and tmp.endswith(suffix)
        digits = tmp[len(prefix) : len(tmp) - len(suffix)]
        assert len(digits) == 10 and digits.isdigit()
    expected = [] if parent is None else [("mkdir", parent, True, False)]
    assert target.fs.calls == [*expected, ("rename_dont_move", tmp, path)]


def test_temporary_path_moves_nothing_when_the_block_fails():
    target = RecordingTarget("/data/out/")
    with pytest.raises(ZeroDivisionError):
        with target.temporary_path():
            raise ZeroDivisionError()
    assert [call[0] for call in target.fs.calls] == ["mkdir"]


def test_temporary_path_of_a_local_directory_target(tmp_path):
    target = luigi.LocalTarget(str(tmp_path / "deep" / "result") + "/")
    with target.temporary_path() as tmp:
        assert tmp.endswith("/") and "-luigi-tmp-" in tmp
        os.mkdir(tmp)
        (tmp_path / "deep" / os.path.basename(tmp.rstrip("/")) / "part-0").write_text("x")
    assert (tmp_path / "deep" / "result" / "part-0").read_text() == "x"
    assert os.listdir(tmp_path / "deep") == ["result"]
