"""luigi.contrib.target.CascadingClient over real clients: local disk, the mock file system, S3 endpoints."""

from __future__ import annotations

import importlib.util
import traceback
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from helpers.luigid import free_port
from helpers.services import unavailable

import luigi
from luigi.contrib.target import CascadingClient
from luigi.local_target import LocalFileSystem
from luigi.mock import MockFileSystem
from luigi.target import FileSystemTarget, NotADirectory

if TYPE_CHECKING:
    from helpers.s3_server import S3Server

HAVE_S3_FIXTURE = importlib.util.find_spec("helpers.s3_server") is not None
pytest_plugins = ["helpers.s3_server"] if HAVE_S3_FIXTURE else []

S3_METHODS = [
    "exists",
    "isdir",
    "mkdir",
    "put_string",
    "get_as_string",
    "listdir",
    "remove",
    "rename_dont_move",
]


# -- local disk and the mock file system ------------------------------------------------------------------


def test_an_answer_from_the_first_client_is_final(tmp_path: Path) -> None:
    on_disk = tmp_path / "only-on-disk.txt"
    on_disk.write_text("x")
    cascade = CascadingClient([MockFileSystem(), LocalFileSystem()])

    # The mock file system answers (False) without failing, so the disk is never asked.
    assert cascade.exists(str(on_disk)) is False
    assert cascade.isdir(str(tmp_path)) is False


def test_a_failing_client_falls_back_to_the_next(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    on_disk = tmp_path / "only-on-disk.txt"
    on_disk.write_text("x")
    cascade = CascadingClient([MockFileSystem(), LocalFileSystem()])

    cascade.remove(str(on_disk), recursive=False)  # no such mock file: FileNotFoundError, then the disk

    assert not on_disk.exists()
    assert "remove() failed on MockFileSystem (client 1 of 2): FileNotFoundError" in caplog.text
    assert "trying LocalFileSystem (client 2 of 2)" in caplog.text


def test_a_file_system_error_is_the_storage_answering_and_is_not_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    cascade = CascadingClient([LocalFileSystem(), MockFileSystem()])

    with pytest.raises(NotADirectory):
        cascade.mkdir(str(a_file))

    assert "trying" not in caplog.text


def test_when_every_client_fails_the_last_error_is_raised_with_all_of_them_noted(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    cascade = CascadingClient([MockFileSystem(), LocalFileSystem()])

    with pytest.raises(FileNotFoundError) as raised:
        cascade.copy(missing, str(tmp_path / "copy"))

    shown = "".join(traceback.format_exception(raised.value))
    assert "CascadingClient tried copy() on every client:" in shown
    assert "MockFileSystem (client 1 of 2): FileNotFoundError" in shown
    assert "LocalFileSystem (client 2 of 2): FileNotFoundError" in shown


def test_a_client_without_the_method_is_skipped(tmp_path: Path) -> None:
    cascade = CascadingClient([object(), LocalFileSystem()], method_names=["exists"])

    assert cascade.exists(str(tmp_path)) is True


def test_only_the_named_methods_exist() -> None:
    cascade = CascadingClient([LocalFileSystem()], method_names=["exists", "listdir"])

    assert hasattr(cascade, "listdir")
    with pytest.raises(AttributeError):
        cascade.remove  # noqa: B018 - the attribute access is what is tested
    assert set(CascadingClient([LocalFileSystem()]).method_names) == set(CascadingClient.ALL_METHOD_NAMES)
    with pytest.raises(ValueError, match="at least one client"):
        CascadingClient([])


# -- two S3 endpoints: one refusing connections, the moto server --------------------------------------------


@pytest.fixture
def s3(request: pytest.FixtureRequest) -> S3Server:
    if not HAVE_S3_FIXTURE:
        unavailable("test/helpers/s3_server.py (the luigi.contrib.s3 test fixture) is missing")
    pytest.importorskip("luigi.contrib.s3")
    return request.getfixturevalue("s3_server")


def _s3_cascade(server: S3Server) -> CascadingClient:
    from luigi.contrib.s3 import S3Client

    def client(endpoint_url: str) -> S3Client:
        return S3Client(
            server.access_key,
            server.secret_key,
            endpoint_url=endpoint_url,
            region_name=server.region,
            max_attempts=1,  # a refused connection fails at once instead of being retried by botocore
        )

    unreachable = client(f"http://127.0.0.1:{free_port()}")
    return CascadingClient([unreachable, client(server.endpoint_url)], method_names=S3_METHODS)


def test_s3_calls_fall_back_from_an_unreachable_endpoint(
    s3: S3Server, caplog: pytest.LogCaptureFixture
) -> None:
    bucket = s3.new_bucket()
    cascade = _s3_cascade(s3)
    path = f"s3://{bucket}/data/one.txt"

    cascade.put_string("one", path)

    assert cascade.exists(path) is True
    assert cascade.get_as_string(path) == "one"
    assert list(cascade.listdir(f"s3://{bucket}/data/")) == [path]
    assert s3.boto3_client().get_object(Bucket=bucket, Key="data/one.txt")["Body"].read() == b"one"
    assert "put_string() failed on S3Client (client 1 of 2): EndpointConnectionError" in caplog.text
    assert s3.secret_key not in caplog.text


class S3ViaCascade(FileSystemTarget):
    """An S3 object whose client is a cascade; written through put_string on its temporary path."""

    def __init__(self, path: str, fs: CascadingClient) -> None:
        super().__init__(path)
        self._fs = fs

    @property
    def fs(self) -> Any:
        return self._fs

    def open(self, mode: str = "r") -> Any:
        raise NotImplementedError("the tasks here use fs.put_string and fs.get_as_string")


class S3Report(luigi.Task):
    """Counts how often it ran (in a local file) and writes its S3 report through the cascade."""

    bucket = luigi.Parameter()
    runs_file = luigi.Parameter()
    server: Any = None  # the S3Server to build the cascade for, set by the test

    def output(self) -> S3ViaCascade:
        return S3ViaCascade(f"s3://{self.bucket}/reports/daily.txt", _s3_cascade(self.server))

    def run(self) -> None:
        with open(self.runs_file, "a") as runs:
            runs.write("ran\n")
        target = self.output()
        with target.temporary_path() as tmp:
            target.fs.put_string("report\n", tmp)


@pytest.mark.filterwarnings("ignore:S3Client has no atomic rename_dont_move")
def test_an_s3_pipeline_runs_once_through_the_fallback_endpoint(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(S3Report, "server", s3)
    task = S3Report(bucket=s3.new_bucket(), runs_file=str(tmp_path / "runs"))

    assert luigi.build([task], local_scheduler=True)
    assert luigi.build([task], local_scheduler=True)

    assert (tmp_path / "runs").read_text() == "ran\n"
    listing = s3.boto3_client().list_objects_v2(Bucket=task.bucket)
    keys = [item["Key"] for item in listing.get("Contents", [])]
    assert "reports/daily.txt" in keys and not any("luigi-tmp" in key for key in keys)
    assert task.output().fs.get_as_string(task.output().path) == "report\n"


def test_s3_cascade_where_every_endpoint_is_unreachable_fails_naming_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pytest.importorskip("boto3")
    from botocore.exceptions import EndpointConnectionError

    from luigi.contrib.s3 import S3Client

    secret = f"secret-{uuid.uuid4().hex}"
    dead = [
        S3Client("AKIDEXAMPLE", secret, endpoint_url=f"http://127.0.0.1:{free_port()}", max_attempts=1)
        for _ in range(2)
    ]
    cascade = CascadingClient(dead, method_names=["exists"])

    with pytest.raises(EndpointConnectionError) as raised:  # botocore's own error, as in Luigi
        cascade.exists("s3://some-bucket/key")

    shown = "".join(traceback.format_exception(raised.value))
    assert "S3Client (client 1 of 2)" in shown and "S3Client (client 2 of 2)" in shown
    assert "s3://some-bucket/key" in shown
    assert secret not in shown and secret not in caplog.text
