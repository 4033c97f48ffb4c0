"""luigi.contrib.gcs through luigi.build against a real gcp-storage-emulator on loopback.

The client reaches the emulator the way a user reaches any other endpoint: a storage v1 discovery document
whose ``rootUrl`` names it, passed as GCSClient's ``descriptor``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any, ClassVar

import pytest
from helpers.gcs_emulator import GCSEmulator, storage_descriptor
from helpers.luigid import free_port

import luigi
from luigi.contrib import gcs
from luigi.contrib.gcs import GCSClient, GCSFlagTarget, GCSTarget, InvalidDeleteException
from luigi.contrib.optional import MissingExtraError
from luigi.target import FileAlreadyExists, NotADirectory

pytest_plugins = ["helpers.gcs_emulator"]


@pytest.fixture
def local_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder where the module's local temporary files go in this test, to see none is left behind."""
    folder = tmp_path / "local-tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.fixture
def client(gcs_emulator: GCSEmulator) -> GCSClient:
    return gcs_emulator.client()  # type: ignore[no-any-return]


@pytest.fixture
def bucket(client: GCSClient) -> str:
    """A new, empty bucket for the test."""
    name = f"b{uuid.uuid4().hex[:20]}"
    client.client.buckets().insert(project="luigi-test", body={"name": name}).execute()
    return name


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The seconds the module would have slept, recorded instead of slept."""
    recorded: list[float] = []
    monkeypatch.setattr(gcs, "_sleep", recorded.append)
    return recorded


def _text(client: GCSClient, path: str) -> str:
    with GCSTarget(path, client=client).open("r") as stream:
        return str(stream.read())


class _OnGCS(luigi.Task):
    bucket = luigi.Parameter()
    client: ClassVar[GCSClient]  # set by the test: a client is not a parameter value


class Sales(_OnGCS):
    day = luigi.Parameter()

    def output(self) -> GCSTarget:
        return GCSTarget(f"gs://{self.bucket}/raw/{self.day}.csv", client=self.client)

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write("apples,3\npears,5\n")


class Totals(_OnGCS):
    day = luigi.Parameter()

    def requires(self) -> Sales:
        return Sales(bucket=self.bucket, day=self.day)

    def output(self) -> GCSTarget:
        return GCSTarget(f"gs://{self.bucket}/totals/{self.day}.txt", client=self.client)

    def run(self) -> None:
        with self.input().open("r") as rows:
            total = sum(int(line.split(",")[1]) for line in rows)
        with self.output().open("w") as out:
            out.write(f"{total}\n")


def test_a_pipeline_writes_and_reads_objects(client: GCSClient, bucket: str, local_tmp: Path) -> None:
    _OnGCS.client = client
    task = Totals(bucket=bucket, day="2024-01-01")
    assert not task.complete()

    assert luigi.build([task], local_scheduler=True)

    assert task.complete()
    assert _text(client, f"gs://{bucket}/totals/2024-01-01.txt") == "8\n"
    assert sorted(client.listdir(f"gs://{bucket}")) == [
        f"gs://{bucket}/raw/2024-01-01.csv",
        f"gs://{bucket}/totals/2024-01-01.txt",
    ]
    assert list(local_tmp.iterdir()) == []  # uploads and downloads cleaned up after themselves


def test_an_object_appears_only_when_its_stream_closes(
    client: GCSClient, bucket: str, local_tmp: Path
) -> None:
    target = GCSTarget(f"gs://{bucket}/out.bin", format=luigi.format.Nop, client=client)
    stream = target.open("w")
    stream.write(b"a\xf2\xf3\r\nfd")
    assert not target.exists()

    stream.close()

    assert target.exists()
    with target.open("r") as back:
        assert back.read() == b"a\xf2\xf3\r\nfd"
    assert list(local_tmp.iterdir()) == []


class Failing(_OnGCS):
    def output(self) -> GCSTarget:
        return GCSTarget(f"gs://{self.bucket}/half.txt", client=self.client)

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write("the first half\n")
            raise RuntimeError("the second half never comes")


def test_a_task_failing_mid_write_leaves_no_object_and_no_local_file(
    client: GCSClient, bucket: str, local_tmp: Path
) -> None:
    _OnGCS.client = client

    assert not luigi.build([Failing(bucket=bucket)], local_scheduler=True)

    assert not client.exists(f"gs://{bucket}/half.txt")
    assert list(local_tmp.iterdir()) == []


def test_listing_gives_full_paths_under_a_prefix_and_filters_one_wildcard(
    client: GCSClient, bucket: str
) -> None:
    for name in ("logs/a.csv", "logs/b.txt", "logs/deep/c.csv", "logsbook.csv", "other/d.csv"):
        client.put_string("x", f"gs://{bucket}/{name}")
    expected = [f"gs://{bucket}/logs/a.csv", f"gs://{bucket}/logs/b.txt", f"gs://{bucket}/logs/deep/c.csv"]

    assert sorted(client.listdir(f"gs://{bucket}/logs")) == expected
    assert sorted(client.listdir(f"gs://{bucket}/logs/")) == expected
    assert len(list(client.listdir(f"gs://{bucket}"))) == 5
    assert sorted(client.list_wildcard(f"gs://{bucket}/logs/*.csv")) == [
        f"gs://{bucket}/logs/a.csv",
        f"gs://{bucket}/logs/deep/c.csv",
    ]
    assert list(client.list_wildcard(f"gs://{bucket}/logs/a*")) == [f"gs://{bucket}/logs/a.csv"]
    with pytest.raises(ValueError, match=r"one '\*', after the last '/'"):
        list(client.list_wildcard(f"gs://{bucket}/*/a.csv"))


def test_copy_and_move_objects_and_whole_directories(client: GCSClient, bucket: str) -> None:
    client.put_string("one", f"gs://{bucket}/src/one.txt")
    client.put_string("two", f"gs://{bucket}/src/sub/two.txt")

    client.copy(f"gs://{bucket}/src/one.txt", f"gs://{bucket}/copy.txt")
    client.copy(f"gs://{bucket}/src", f"gs://{bucket}/backup")
    client.move(f"gs://{bucket}/src", f"gs://{bucket}/moved")
    client.rename(f"gs://{bucket}/copy.txt", f"gs://{bucket}/renamed.txt")

    assert sorted(client.listdir(f"gs://{bucket}")) == [
        f"gs://{bucket}/backup/one.txt",
        f"gs://{bucket}/backup/sub/two.txt",
        f"gs://{bucket}/moved/one.txt",
        f"gs://{bucket}/moved/sub/two.txt",
        f"gs://{bucket}/renamed.txt",
    ]
    assert _text(client, f"gs://{bucket}/moved/sub/two.txt") == "two"
    assert _text(client, f"gs://{bucket}/renamed.txt") == "one"


def test_remove_deletes_objects_and_directories_but_never_a_bucket_root(
    client: GCSClient, bucket: str
) -> None:
    # more objects than one batch request may carry (100), so the delete takes two batches
    for i in range(105):
        client.put_string(str(i), f"gs://{bucket}/many/{i:03}")
    client.put_string("keep", f"gs://{bucket}/keep.txt")
    client.put_string("gone", f"gs://{bucket}/gone.txt")

    assert client.remove(f"gs://{bucket}/gone.txt") is True
    with pytest.raises(InvalidDeleteException, match="recursive=True"):
        client.remove(f"gs://{bucket}/many", recursive=False)
    assert client.remove(f"gs://{bucket}/many") is True
    assert client.remove(f"gs://{bucket}/nothing-here") is False
    with pytest.raises(InvalidDeleteException, match="root of bucket"):
        client.remove(f"gs://{bucket}/")

    assert list(client.listdir(f"gs://{bucket}")) == [f"gs://{bucket}/keep.txt"]


def test_isdir_and_mkdir_see_markers_prefixes_and_buckets(client: GCSClient, bucket: str) -> None:
    client.put_string("x", f"gs://{bucket}/implied/file.txt")

    client.mkdir(f"gs://{bucket}/made")

    assert client.isdir(f"gs://{bucket}/made") and client.exists(f"gs://{bucket}/made")
    assert list(client.listdir(f"gs://{bucket}/made")) == [f"gs://{bucket}/made/"]  # the empty marker
    assert client.isdir(f"gs://{bucket}/implied")
    assert client.isdir(f"gs://{bucket}")
    assert not client.isdir(f"gs://{bucket}/implied/file.txt")
    assert not client.isdir(f"gs://no-such-{bucket}")
    client.mkdir(f"gs://{bucket}/made")  # exists: nothing to do
    with pytest.raises(FileAlreadyExists):
        client.mkdir(f"gs://{bucket}/made", raise_if_exists=True)
    with pytest.raises(NotADirectory):
        client.mkdir(f"gs://{bucket}/implied/file.txt")


def _counting_http() -> Any:
    """An ``http_`` for GCSClient (a plain ``httplib2.Http``) that records each upload request it sends:
    its method and Content-Range."""
    import httplib2

    class CountingHttp(httplib2.Http):  # type: ignore[misc]
        uploads: list[tuple[str, str]] = []

        def request(
            self, uri: str, method: str = "GET", body: Any = None, headers: Any = None, **kw: Any
        ) -> Any:
            if "/upload/" in uri:
                self.uploads.append((method, (headers or {}).get("Content-Range", "")))
            return super().request(uri, method, body=body, headers=headers, **kw)

    return CountingHttp()


class BigUpload(_OnGCS):
    def output(self) -> GCSTarget:
        return GCSTarget(f"gs://{self.bucket}/big.bin", format=luigi.format.Nop, client=self.client)

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write(bytes(range(256)) * 2800)  # 716,800 bytes: three chunks of 256 KiB


def test_a_file_bigger_than_the_chunk_size_goes_up_in_resumable_chunks(gcs_emulator: GCSEmulator) -> None:
    http = _counting_http()
    client = GCSClient(descriptor=storage_descriptor(gcs_emulator.root_url), http_=http, chunksize=256 * 1024)
    bucket = f"b{uuid.uuid4().hex[:20]}"
    client.client.buckets().insert(project="luigi-test", body={"name": bucket}).execute()
    _OnGCS.client = client

    assert luigi.build([BigUpload(bucket=bucket)], local_scheduler=True)

    assert http.uploads == [
        ("POST", ""),  # opens the resumable session
        ("PUT", "bytes 0-262143/716800"),
        ("PUT", "bytes 262144-524287/716800"),
        ("PUT", "bytes 524288-716799/716800"),
    ]
    with GCSTarget(f"gs://{bucket}/big.bin", format=luigi.format.Nop, client=client).open("r") as back:
        assert back.read() == bytes(range(256)) * 2800


class PartFiles(_OnGCS):
    def output(self) -> GCSFlagTarget:
        return GCSFlagTarget(f"gs://{self.bucket}/parts/", client=self.client)

    def run(self) -> None:
        for i in range(2):
            with GCSTarget(f"{self.output().path}part-{i}", client=self.client).open("w") as out:
                out.write(f"part {i}\n")
        self.client.put_string("", f"{self.output().path}_SUCCESS")


def test_a_flag_target_exists_once_its_success_flag_does(client: GCSClient, bucket: str) -> None:
    _OnGCS.client = client
    client.put_string("partial", f"gs://{bucket}/parts/part-0")
    task = PartFiles(bucket=bucket)
    assert not task.complete()  # a directory without its flag is unfinished

    assert luigi.build([task], local_scheduler=True)

    assert task.complete()
    assert GCSFlagTarget(f"gs://{bucket}/parts/", client=client, flag="part-1").exists()
    with pytest.raises(ValueError, match="ending in '/'"):
        GCSFlagTarget(f"gs://{bucket}/parts", client=client)


def test_put_multiple_uploads_in_two_processes(client: GCSClient, bucket: str, tmp_path: Path) -> None:
    files = []
    for i in range(4):
        files.append(tmp_path / f"f{i}.txt")
        files[-1].write_text(f"file {i}")

    client.put_multiple([str(f) for f in files], f"gs://{bucket}/up", num_process=2)

    assert [_text(client, f"gs://{bucket}/up/f{i}.txt") for i in range(4)] == [f"file {i}" for i in range(4)]
    with pytest.raises(ValueError, match="use put"):
        client.put_multiple(str(files[0]), f"gs://{bucket}/up")


def test_download_reads_chunks_until_the_callback_says_stop(
    client: GCSClient, bucket: str, local_tmp: Path
) -> None:
    client.put_string("x" * 1000, f"gs://{bucket}/chunky")
    chunks: list[int] = []

    def enough(fp: Any) -> bool:
        chunks.append(fp.tell())
        return len(chunks) == 2

    copy = client.download(f"gs://{bucket}/chunky", chunksize=300, chunk_callback=enough)

    assert chunks == [300, 600] and copy.read() == b"x" * 600
    copy.close()
    copy.close()  # closing twice is fine
    assert list(local_tmp.iterdir()) == []


class ReadsMissing(_OnGCS):
    def output(self) -> GCSTarget:
        return GCSTarget(f"gs://{self.bucket}/result.txt", client=self.client)

    def run(self) -> None:
        with GCSTarget(f"gs://{self.bucket}/missing.txt", client=self.client).open("r") as source:
            data = source.read()
        with self.output().open("w") as out:
            out.write(data)


def test_reading_a_missing_object_fails_naming_it_and_writes_nothing(
    client: GCSClient, bucket: str, local_tmp: Path
) -> None:
    from googleapiclient.errors import HttpError

    with pytest.raises(HttpError) as caught:
        GCSTarget(f"gs://{bucket}/missing.txt", client=client).open("r")
    assert caught.value.resp.status == 404
    if sys.version_info >= (3, 11):
        assert caught.value.__notes__ == [f"Cannot read gs://{bucket}/missing.txt: no such object or bucket"]

    _OnGCS.client = client
    assert not luigi.build([ReadsMissing(bucket=bucket)], local_scheduler=True)
    assert not client.exists(f"gs://{bucket}/result.txt")
    assert list(local_tmp.iterdir()) == []


def test_a_refused_connection_fails_after_five_attempts_naming_the_endpoint(
    waits: list[float], local_tmp: Path
) -> None:
    root = f"http://127.0.0.1:{free_port()}/"
    client = GCSClient(descriptor=storage_descriptor(root), http_=__import__("httplib2").Http())
    stream = GCSTarget("gs://bucket/out.txt", client=client).open("w")
    stream.write("never arrives")

    with pytest.raises(ConnectionRefusedError) as caught:
        stream.close()

    assert waits == [1, 2, 4, 8]  # 1, 2, 4, 8 s between the five attempts, as Luigi's tenacity policy
    if sys.version_info >= (3, 11):
        assert caught.value.__notes__ == [
            f"Cannot upload to gs://bucket/out.txt: cannot connect to {root} (ConnectionRefusedError)"
        ]
    assert list(local_tmp.iterdir()) == []


def test_a_pipeline_against_an_unreachable_gcs_fails_naming_the_endpoint(
    waits: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    root = f"http://127.0.0.1:{free_port()}/"
    _OnGCS.client = GCSClient(descriptor=storage_descriptor(root), http_=__import__("httplib2").Http())

    with caplog.at_level("WARNING", logger="luigi-interface"):
        assert not luigi.build([Sales(bucket="b", day="2024-01-01")], local_scheduler=True)

    assert waits == [1, 2, 4, 8]  # the existence check was tried five times before the task was given up
    (record,) = [r for r in caplog.records if "error in complete() method" in r.getMessage()]
    assert "ConnectionRefusedError" in record.getMessage()
    if sys.version_info >= (3, 11):
        assert f"Cannot check gs://b/raw/2024-01-01.csv: cannot connect to {root}" in record.getMessage()


def test_gcs_retry_returns_after_transient_errors_and_raises_the_last(waits: list[float]) -> None:
    import httplib2
    from googleapiclient.errors import HttpError

    outcomes: list[Any] = [OSError("reset"), HttpError(httplib2.Response({"status": 503}), b""), "done"]

    @gcs.gcs_retry
    def flaky() -> Any:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    @gcs.gcs_retry
    def broken() -> None:
        raise OSError("still down")

    @gcs.gcs_retry
    def not_found() -> None:
        raise HttpError(httplib2.Response({"status": 404}), b"")

    assert flaky() == "done" and waits == [1, 2]
    with pytest.raises(OSError, match="still down"):
        broken()
    assert waits == [1, 2, 1, 2, 4, 8]
    with pytest.raises(HttpError):
        not_found()
    assert waits == [1, 2, 1, 2, 4, 8]  # a 404 is an answer, not a failure to retry
    assert gcs.is_error_5xx(HttpError(httplib2.Response({"status": 500}), b""))
    assert not gcs.is_error_5xx(OSError())
    assert gcs.RETRYABLE_ERRORS == (httplib2.HttpLib2Error, IOError)


def test_credentials_stay_out_of_reprs_logs_and_errors(
    gcs_emulator: GCSEmulator, bucket: str, caplog: pytest.LogCaptureFixture, waits: list[float]
) -> None:
    from google.oauth2.credentials import Credentials
    from googleapiclient.errors import HttpError

    token = "ya29.secret-token-1b2c3d"
    client = GCSClient(
        oauth_credentials=Credentials(token), descriptor=storage_descriptor(gcs_emulator.root_url)
    )
    client.put_string("hello", f"gs://{bucket}/x.txt")  # sent with the token (the emulator does not check)

    with caplog.at_level("DEBUG"), pytest.raises(HttpError) as caught:
        client.download(f"gs://{bucket}/nope")

    shown = [repr(client), str(caught.value), *getattr(caught.value, "__notes__", []), caplog.text]
    assert not [text for text in shown if token in text]
    assert repr(client) == f"GCSClient(root_url='{gcs_emulator.root_url}')"


def test_without_application_credentials_the_client_is_anonymous(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from luigi.contrib.gcp import get_authenticate_kwargs

    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)

    (http,) = get_authenticate_kwargs().values()

    assert 308 not in http.redirect_codes  # resumable uploads see "308 Resume Incomplete", not a redirect
    assert get_authenticate_kwargs(oauth_credentials="creds") == {"credentials": "creds"}
    assert get_authenticate_kwargs(http_="http") == {"http": "http"}


def test_without_the_client_library_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "googleapiclient.discovery", None)

    with pytest.raises(MissingExtraError, match=r"pip install 'luigi\[gcs\]'") as caught:
        GCSTarget("gs://bucket/x")

    assert "\n" not in str(caught.value)


def test_a_path_outside_gs_is_refused_naming_the_form(client: GCSClient) -> None:
    with pytest.raises(ValueError, match=r"not a GCS path: use gs://<bucket>/<object>"):
        client.exists("s3://bucket/key")


def test_importing_the_modules_loads_no_client_library() -> None:
    import subprocess

    code = (
        "import sys, luigi.contrib.gcs, luigi.contrib.gcp; "
        "libraries = ('googleapiclient', 'google.auth', 'httplib2', 'tenacity'); "
        "print(sorted(m for m in libraries if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)

    assert loaded.stdout.strip() == "[]"


def test_targets_round_trip_text_gzip_and_lines_and_drop_unclosed_writes(
    client: GCSClient, bucket: str, local_tmp: Path
) -> None:
    text = GCSTarget(f"gs://{bucket}/text.txt", client=client)
    with text.open("w") as out:
        out.writelines(["我éçф\n", "b\n"])
    zipped = GCSTarget(f"gs://{bucket}/data.gz", format=luigi.format.Gzip, client=client)
    with zipped.open("w") as out:
        out.write(b"compressed\n" * 100)
    unclosed = GCSTarget(f"gs://{bucket}/unclosed.txt", client=client).open("w")
    unclosed.write("lost")
    del unclosed

    with text.open("r") as back:
        assert list(back) == ["我éçф\n", "b\n"]
    with zipped.open("r") as back:
        assert back.read() == b"compressed\n" * 100
    assert not client.exists(f"gs://{bucket}/unclosed.txt")
    assert list(local_tmp.iterdir()) == []


def test_rename_dont_move_refuses_an_existing_destination(client: GCSClient, bucket: str) -> None:
    GCSTarget(f"gs://{bucket}/a", client=client)._touchz()
    GCSTarget(f"gs://{bucket}/c", client=client)._touchz()

    with pytest.warns(UserWarning, match="no atomic rename_dont_move"):
        client.rename_dont_move(f"gs://{bucket}/a", f"gs://{bucket}/b")
    with pytest.warns(UserWarning), pytest.raises(FileAlreadyExists):
        client.rename_dont_move(f"gs://{bucket}/c", f"gs://{bucket}/b")

    assert sorted(client.listdir(f"gs://{bucket}")) == [f"gs://{bucket}/b", f"gs://{bucket}/c"]
